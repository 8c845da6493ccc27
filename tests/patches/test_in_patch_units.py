"""The unit tests the patches carry, run on CPU against the patched megatron-core (see tests/_in_patch.py).

Their CUDA-only tests skip here and run in `forkctl validate` (tests/gpu/test_in_patch_units_gpu.py).
"""

from __future__ import annotations

from pathlib import Path

from tests import _in_patch, _patched


def test_the_patches_own_unit_tests_pass_on_cpu(tmp_path_factory, tmp_path: Path) -> None:
    site = _patched.patched_tree(tmp_path_factory)
    files = _in_patch.extract(tmp_path / "upstream-tests")
    names = {f.name for f in files}
    assert {
        "test_torch_grouped_linear.py",
        "test_torch_expert_backend.py",
        "test_full_recompute_frozen_input.py",
    } <= names
    outcome = _in_patch.run(tmp_path / "upstream-tests", site)
    assert outcome.returncode == 0 and not outcome.failed, outcome.output
    # The MoE backend's tests run on CPU (config guards, parity, packing, device moves, adapters).
    assert sum("test_torch_expert_backend" in n for n in outcome.passed) >= 40, outcome.passed
    # The feat(moe) patch's own tests: the TE-free grouped linears, trained and checked against float64,
    # per-expert biases and the sharded state dict's global expert offsets.
    assert sum("test_torch_grouped_linear" in n for n in outcome.passed) >= 9, outcome.passed
    assert any("adapter_wrappers" in n for n in outcome.passed)
    # The recompute regression through TransformerBlock, the hybrid stack and the MTP layer runs on CPU
    # too; only its variant with (CUDA-only) local attention is the GPU suite's.
    recompute = [n for n in outcome.passed if "test_full_recompute_frozen_input" in n]
    assert any("hybrid_stack" in n for n in recompute) and any("multi_token" in n for n in recompute)
    assert len(recompute) >= 5, recompute
    assert all(
        "test_adapters_get_gradients_with_frozen_input" in n
        or "cuda" in n.lower()
        or "transformer_engine_weights" in n
        or "distributed_checkpoint_loads_into_the_other_backend" in n  # megatron's save needs CUDA
        for n in outcome.skipped
    ), outcome.skipped


STACKS = (
    "tests/unit_tests/transformer/test_full_recompute_frozen_input.py"
    "::test_checkpointed_stacks_train_adapters_with_frozen_input"
)


def test_the_recompute_regression_fails_on_the_unpatched_package(tmp_path_factory, tmp_path: Path) -> None:
    """The fix(recompute) patch's own regression on CPU (TransformerBlock and the hybrid stack, uniform
    and block recompute) fails every case on the unpatched megatron, on the detached output it was
    written for: the patch's test catches the bug, run as it is, not a copy of it."""
    _in_patch.extract(tmp_path / "upstream-tests")
    plain = _patched.plain_tree(tmp_path_factory)
    outcome = _in_patch.run(tmp_path / "upstream-tests", plain, select=(STACKS,))
    assert len(outcome.failed) == 4 and not outcome.passed, outcome.output
    detached = "the checkpointed output is detached from the adapters"  # the regression's own words
    assert all(detached in outcome.why[name] for name in outcome.failed), outcome.why
