"""How many CUDA devices torch sees, answered without importing torch on a host with no NVIDIA driver.

The GPU suites decide their skips when pytest collects them, and every pytest-xdist worker collects the
whole suite: importing torch there costs seconds of CPU per worker on the CPU hosts where all of them
skip. A host with no NVIDIA device node in /dev and no nvidia-smi on PATH has no CUDA device (the same
look `forkctl validate` takes before it refuses; tests/test_evidence.py checks that the two agree), so
there the answer is 0 at once; anywhere else torch is asked, exactly as before.
"""

from __future__ import annotations

import shutil
from pathlib import Path

# As forkctl/commands/validate.py: DRIVER_DEVICE_NODES, DRIVER_TOOL (not imported: these helpers also
# run in validate's target interpreter, which needs no more than torch and megatron).
DRIVER_DEVICE_NODES = ("nvidia*", "dxg")
DRIVER_TOOL = "nvidia-smi"


def host_shows_a_gpu_driver() -> bool:
    """An NVIDIA device node in /dev or nvidia-smi on PATH (nothing is run)."""
    dev = Path("/dev")
    if any(next(dev.glob(pattern), None) is not None for pattern in DRIVER_DEVICE_NODES):
        return True
    return shutil.which(DRIVER_TOOL) is not None


def device_count() -> int:
    """torch.cuda.device_count(), without importing torch on a driverless host (0 there)."""
    if not host_shows_a_gpu_driver():
        return 0
    import torch

    return torch.cuda.device_count()


def available() -> bool:
    """torch.cuda.is_available(), without importing torch on a driverless host."""
    if not host_shows_a_gpu_driver():
        return False
    import torch

    return torch.cuda.is_available()
