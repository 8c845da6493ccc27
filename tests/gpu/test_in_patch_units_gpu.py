"""The unit tests the patches carry, run on a GPU against the patched megatron-core (tests/_in_patch.py).

Here their CUDA tests run too: the full-recompute regression of the fix(recompute) patch and the CUDA
parity of the perf(moe) patch, and its distributed-checkpoint round trip between the two expert
backends. Only tests that need Transformer Engine may skip (it is not installed on
the GPU hosts).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import _cuda, _in_patch, _patched

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not _cuda.available(), reason="needs a CUDA GPU"),
]


def test_the_patches_own_unit_tests_pass_on_gpu(tmp_path_factory, tmp_path: Path, record_property) -> None:
    site = _patched.patched_tree(tmp_path_factory)
    _in_patch.extract(tmp_path / "upstream-tests")
    outcome = _in_patch.run(tmp_path / "upstream-tests", site)
    record_property("in_patch.passed", len(outcome.passed))
    record_property("in_patch.skipped", ", ".join(outcome.skipped))
    record_property("in_patch.failed", ", ".join(outcome.failed))
    assert outcome.returncode == 0 and not outcome.failed, outcome.output
    recompute = [n for n in outcome.passed if "test_full_recompute_frozen_input" in n]
    # On the GPU: the CUDA regression (uniform and block), the stacks it guards (TransformerBlock and
    # the hybrid stack, each with uniform and block recompute) and multi-token prediction's own path.
    cuda_regression = [n for n in recompute if "test_adapters_get_gradients_with_frozen_input" in n]
    stacks = [n for n in recompute if "test_checkpointed_stacks_train_adapters_with_frozen_input" in n]
    mtp = [n for n in recompute if "multi_token_prediction" in n]
    assert (len(cuda_regression), len(stacks), len(mtp)) == (2, 4, 1), (recompute, outcome.output)
    assert any("test_cuda_parity" in n for n in outcome.passed), outcome.passed
    # A distributed checkpoint saved with each expert backend and loaded into the other (CUDA only).
    round_trips = [n for n in outcome.passed if "distributed_checkpoint_loads_into_the_other_backend" in n]
    assert len(round_trips) == 2, outcome.passed
    assert all("transformer_engine" in n for n in outcome.skipped), outcome.skipped
