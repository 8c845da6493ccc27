"""What the GPU host offers `forkctl validate`: a CUDA device (and how many), and the installed
megatron-core package the series is applied to. Torch is never imported here: the target interpreter
(--python) answers in a child process."""

from __future__ import annotations

import shutil
from pathlib import Path

from forkctl.errors import BadInput
from forkctl.gpu import process

CHECK_CUDA = "import torch; print(torch.cuda.is_available(), torch.cuda.device_count())"
FIND_MEGATRON = (
    "import importlib.util, pathlib; spec = importlib.util.find_spec('megatron.core'); "
    "print(pathlib.Path(spec.origin).parent.parent if spec and spec.origin else '')"
)
# Where an NVIDIA driver shows itself without running anything: its device nodes in /dev (nvidia0,
# nvidiactl, ... also inside containers, which get them from the runtime; dxg: WSL2's GPU node) or its
# nvidia-smi on PATH. A host with none of them has no CUDA device, so validate refuses at once instead of
# importing torch (seconds) to hear the same. tests/_cuda.py repeats both names (a test checks they agree).
DRIVER_DEVICE_NODES = ("nvidia*", "dxg")
DRIVER_TOOL = "nvidia-smi"
CPU_HOST_HINT = "run it on the GPU machine; on a CPU host, `forkctl gate` checks the committed evidence"


def shows_a_gpu_driver() -> bool:
    """Whether this host may have a CUDA device: an NVIDIA device node or nvidia-smi on PATH (nothing run)."""
    dev = Path("/dev")
    if any(next(dev.glob(pattern), None) is not None for pattern in DRIVER_DEVICE_NODES):
        return True
    return shutil.which(DRIVER_TOOL) is not None


def require_cuda(python: str, gpus: int = 1) -> None:
    """Refuse unless `python`'s torch sees at least `gpus` CUDA devices (at once where no driver shows)."""
    need = f" (--ep {gpus} needs {gpus} GPUs)" if gpus > 1 else ""
    if not shows_a_gpu_driver():
        raise BadInput(
            f"no CUDA device is available on this host (no NVIDIA device in /dev, no {DRIVER_TOOL} on PATH)"
            f"{need}: forkctl validate runs the GPU test suite and must run on a CUDA host",
            hint=CPU_HOST_HINT,
        )
    finished = process.run([python, "-c", CHECK_CUDA], timeout=300)
    if finished.returncode != 0:
        raise BadInput(
            f"{python} cannot import torch:\n{finished.tail(5)}",
            hint="install torch in that interpreter, or pass --python PATH to one that has it",
        )
    answer = (finished.output.strip().splitlines() or [""])[-1].split()
    if answer[:1] != ["True"]:
        raise BadInput(
            f"no CUDA device is available to {python} (torch.cuda.is_available() is False){need}: "
            "forkctl validate runs the GPU test suite and must run on a CUDA host",
            hint=CPU_HOST_HINT,
        )
    count = int(answer[1]) if len(answer) > 1 and answer[1].isdigit() else 0
    require_gpu_count(python, count, gpus)


def require_gpu_count(python: str, count: int, gpus: int) -> None:
    """Refuse a run that needs `gpus` devices where `python` sees `count`."""
    if count < gpus:
        raise BadInput(
            f"--ep {gpus} needs {gpus} CUDA devices, but {python} sees {count} "
            "(torch.cuda.device_count()); no evidence was written",
            hint=f"run it on a host with {gpus} GPUs (check CUDA_VISIBLE_DEVICES), or lower --ep",
        )


def installed_megatron(python: str, requirement: str | None = None) -> Path:
    """The folder of the `megatron` package `python` imports; `requirement` (the manifest's
    package.requirement) is what the hint tells the user to install."""
    finished = process.run([python, "-c", FIND_MEGATRON], timeout=120)
    location = finished.output.strip().splitlines()[-1:] if finished.returncode == 0 else []
    if not location or not location[0] or not Path(location[0]).is_dir():
        raise BadInput(
            f"megatron-core is not installed for {python}",
            hint=f"pip install {requirement or 'megatron-core'} --no-deps (the release closest to the pinned base)",
        )
    return Path(location[0])
