"""The fix(recompute) patch: adapters inside fully recomputed layers train with a frozen input.

Re-entrant checkpointing saves the CUDA RNG state, so this only runs with a GPU. The check runs in
a child interpreter (recompute_check.py) against the patched copy, and against an unpatched copy
of the same installed package, which must fail it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests import _cuda, _patched

CHECK = Path(__file__).with_name("recompute_check.py")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not _cuda.available(), reason="needs a CUDA GPU (checkpoint saves the CUDA RNG state)"
    ),
]


def _check(tree: Path, method: str) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, str(CHECK), method],
        env=_patched.subprocess_env(tree),
        capture_output=True,
        text=True,
        timeout=300,
    )
    print(proc.stdout[-4000:], proc.stderr[-4000:])
    assert f"megatron.core from {tree.resolve()}" in proc.stdout, "child imported the wrong megatron"
    return proc


@pytest.mark.parametrize("method", ["uniform", "block"])
def test_patched_adapters_get_gradients(megatron_tree, method):
    proc = _check(megatron_tree, method)
    assert proc.returncode == 0 and "ADAPTER_GRADS_OK" in proc.stdout


@pytest.mark.parametrize("method", ["uniform", "block"])
def test_unpatched_fails_the_regression(plain_megatron_tree, method):
    proc = _check(plain_megatron_tree, method)
    assert proc.returncode == 3 and "ADAPTER_GRAD_MISSING" in proc.stdout
