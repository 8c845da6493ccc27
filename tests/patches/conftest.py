from __future__ import annotations

import os
import sys

from tests import _patched
from tests._patched import megatron_tree, plain_megatron_tree

# On CPU, megatron's jit_fuser (torch.compile) has inductor build C++ kernels with the host compiler: 25 of
# the grouped-GEMM bench smoke's 37 s of CPU here, for fused activations these tests check as well run
# eagerly. The child interpreters inherit it. `forkctl validate` (the GPU runs) names its patched copy in
# FORKCTL_PATCHED_MEGATRON and keeps compiling.
if _patched.PATCHED_ENV not in os.environ:
    os.environ.setdefault("TORCH_COMPILE_DISABLE", "1")
    if "torch._dynamo.config" in sys.modules:  # read at its import: a module imported earlier is told here
        sys.modules["torch._dynamo.config"].disable = os.environ["TORCH_COMPILE_DISABLE"] == "1"

__all__ = ["megatron_tree", "plain_megatron_tree"]  # the fixtures, defined once in tests/_patched.py
