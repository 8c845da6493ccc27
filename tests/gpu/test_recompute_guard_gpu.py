"""The fix(recompute) patch: its own regression test passes on the patched megatron and fails on the
unpatched one.

The regression is the patch's `test_adapters_get_gradients_with_frozen_input` (CUDA only: the local
attention allocates CUDA buffers, and re-entrant checkpointing saves the CUDA RNG state), extracted from
the series (tests/_in_patch.py) and run in a child pytest against the patched copy, where both recompute
methods must pass, and against an unpatched copy of the same megatron, where each must fail on the
detached output: the test is the patch's own, not a copy of it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import _cuda, _in_patch, _patched

REGRESSION = (
    "tests/unit_tests/transformer/test_full_recompute_frozen_input.py"
    "::test_adapters_get_gradients_with_frozen_input"
)
DETACHED = "checkpointed block output is detached from the adapters"  # the regression's own words

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not _cuda.available(), reason="needs a CUDA GPU (checkpoint saves the CUDA RNG state)"
    ),
]


@pytest.fixture(scope="module")
def series_tests(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("series-tests")
    _in_patch.extract(dest)
    return dest


@pytest.mark.parametrize("method", ["uniform", "block"])
def test_patched_adapters_get_gradients(series_tests: Path, tmp_path_factory, method: str) -> None:
    site = _patched.patched_tree(tmp_path_factory)
    outcome = _in_patch.run(series_tests, site, select=(f"{REGRESSION}[{method}]",))
    assert outcome.returncode == 0 and not outcome.failed, outcome.output
    assert len(outcome.passed) == 1, outcome.output


@pytest.mark.parametrize("method", ["uniform", "block"])
def test_unpatched_fails_the_regression(series_tests: Path, tmp_path_factory, method: str) -> None:
    site = _patched.plain_tree(tmp_path_factory)
    outcome = _in_patch.run(series_tests, site, select=(f"{REGRESSION}[{method}]",))
    assert len(outcome.failed) == 1 and not outcome.passed, outcome.output
    assert DETACHED in outcome.why[outcome.failed[0]], outcome.why
