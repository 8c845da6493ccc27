"""Child processes of `forkctl validate` (pytest, torchrun, the benchmark, interpreter probes): through
forkctl.process, each in its own process group, with a time limit that also ends whatever the child
started (torchrun's ranks, a benchmark's workers); stdout and stderr read as one text.

The code those children run is under test (upstream's tests and conftests, from an archive; the GPU
suite), so they get an allow-listed environment (`sealed_env`): what torch, CUDA, NCCL, compilers and
pytest need, never a token, a password, a cloud credential or the signing key's path, whatever the
runner's job holds.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import msgspec

from forkctl import process
from forkctl.errors import BadInput

# Names a tested child keeps (exactly, or by prefix), unless the name says it holds a secret.
KEPT_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "TERM",
        "TZ",
        "LANG",
        "LANGUAGE",
        "TMPDIR",
        "TMP",
        "TEMP",
        "PYTHONPATH",
        "PYTHONHASHSEED",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONUNBUFFERED",
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "CONDA_DEFAULT_ENV",
        "LD_LIBRARY_PATH",
        "LIBRARY_PATH",
        "CPATH",
        "CC",
        "CXX",
        "XDG_CACHE_HOME",
        "CUDA_HOME",
        "CUDA_PATH",
        "CUDNN_PATH",
        "HF_HOME",
        "HF_HUB_OFFLINE",
        "MASTER_ADDR",
        "MASTER_PORT",
        "WORLD_SIZE",
        "RANK",
        "LOCAL_RANK",
    }
)
KEPT_PREFIXES = (
    "LC_",
    "CUDA_",
    "NCCL_",
    "NVIDIA_",
    "NVTE_",
    "NVSHMEM_",
    "CUBLAS",
    "CUDNN_",
    "TORCH_",
    "PYTORCH_",
    "TORCHINDUCTOR_",
    "TRITON_",
    "OMP_",
    "MKL_",
    "KMP_",
    "OPENBLAS_",
    "UCX_",
    "FI_",
    "PYTEST_",
    "FORKCTL_",
)
SECRET_WORDS = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|KEY|COOKIE|SESSION", re.IGNORECASE)


def sealed_env(source: dict[str, str] | None = None) -> dict[str, str]:
    """The allow-listed part of `source` (default: this process's environment) for tested code: kept
    names and prefixes only, and none whose name says it holds a secret (FORKCTL_SIGNING_KEY included)."""
    source = dict(os.environ if source is None else source)
    return {
        name: value
        for name, value in source.items()
        if (name in KEPT_NAMES or name.startswith(KEPT_PREFIXES)) and not SECRET_WORDS.search(name)
    }


class Finished(msgspec.Struct, frozen=True):
    """A child process that ended (or was killed at the time limit)."""

    returncode: int | None  # None: killed at the time limit
    output: str  # stdout and stderr, interleaved

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.output.strip().splitlines()[-lines:])


def run(
    args: list[str], timeout: float, env: dict[str, str] | None = None, cwd: Path | None = None
) -> Finished:
    """Run a child in its own process group, so a timeout also ends whatever it started."""
    try:
        done = process.run(args, timeout=timeout, env=env, cwd=cwd, text=True, merge_stderr=True)
    except OSError as exc:
        raise BadInput(
            f"cannot run {args[0]}: {exc.strerror}", hint="pass --python PATH to a working interpreter"
        ) from None
    except process.TimedOut as late:
        return Finished(None, str(late.stdout))
    return Finished(done.returncode, str(done.stdout))
