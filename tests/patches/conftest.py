from __future__ import annotations

import os
import sys

import pytest

from tests import _patched

# On CPU, megatron's jit_fuser (torch.compile) has inductor build C++ kernels with the host compiler: 25 of
# the grouped-GEMM bench smoke's 37 s of CPU here, for fused activations these tests check as well run
# eagerly. The child interpreters inherit it. `forkctl validate` (the GPU runs) names its patched copy in
# FORKCTL_PATCHED_MEGATRON and keeps compiling.
if _patched.PATCHED_ENV not in os.environ:
    os.environ.setdefault("TORCH_COMPILE_DISABLE", "1")
    if "torch._dynamo.config" in sys.modules:  # read at its import: a module imported earlier is told here
        sys.modules["torch._dynamo.config"].disable = os.environ["TORCH_COMPILE_DISABLE"] == "1"


@pytest.fixture(scope="session")
def megatron_tree(tmp_path_factory: pytest.TempPathFactory):
    """A patched copy of the installed megatron package, first on sys.path.

    Nothing in these tests imports megatron at module level, so this runs before the first import.
    """
    tree = _patched.patched_tree(tmp_path_factory)
    _patched.activate(tree)
    import megatron.core

    assert str(megatron.core.__file__).startswith(str(tree.resolve()))
    return tree


@pytest.fixture(scope="session")
def plain_megatron_tree(tmp_path_factory: pytest.TempPathFactory):
    """An unpatched copy of the installed megatron package (for 'the old code fails' checks)."""
    return _patched.plain_tree(tmp_path_factory)
