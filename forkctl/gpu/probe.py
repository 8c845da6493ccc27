"""The environment probe: what a GPU run's evidence records about the host, printed as one JSON object.

It runs in the target interpreter (`forkctl validate --python`), which has torch and the standard
library and need not have forkctl: so this module imports nothing else, and torch only when it probes.
It runs standalone (`python probe.py`); `forkctl validate` hands its text to `python -c`, so the child's
import path starts with its working folder, never with forkctl's own package folder.
The keys are exactly `Environment`'s fields less `tag`, which forkctl derives from the capability.
"""

from __future__ import annotations

import ctypes
import importlib.metadata as md
import json
import platform
import subprocess
from typing import Any

CUBLAS_LIBRARIES = ("libcublas.so.13", "libcublas.so.12", "libcublas.so")
CUBLAS_PROPERTIES = (0, 1, 2)  # MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL


def version(dist: str) -> str:
    """An installed distribution's version, or "absent"."""
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return "absent"


def cublas() -> str:
    """The version of the first cuBLAS the dynamic loader finds, as cublasGetProperty reports it."""
    for name in CUBLAS_LIBRARIES:
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        parts = []
        for prop in CUBLAS_PROPERTIES:
            value = ctypes.c_int()
            if lib.cublasGetProperty(prop, ctypes.byref(value)) != 0:
                return "unknown"
            parts.append(str(value.value))
        return ".".join(parts)
    return "unknown"


def driver() -> str:
    """The NVIDIA driver version as nvidia-smi reports it, or "unknown"."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def probe() -> dict[str, Any]:
    """The environment of GPU 0 and the software stack around it."""
    import torch  # only here: the module itself must import where torch is absent

    torch.zeros(1, device="cuda")  # load the CUDA libraries before asking for cuBLAS
    major, minor = torch.cuda.get_device_capability(0)
    te = version("transformer-engine")
    return {
        "gpu_name": torch.cuda.get_device_name(0),
        "gpu_count": torch.cuda.device_count(),
        "compute_capability": f"{major}.{minor}",
        "driver": driver(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda or "unknown",
        "cublas": cublas(),
        "megatron_core": version("megatron-core"),
        "transformer_engine": te if te != "absent" else version("transformer_engine"),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


if __name__ == "__main__":
    print(json.dumps(probe()))
