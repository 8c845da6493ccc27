"""`validation.slurm`: how `forkctl validate --launcher slurm` asks the site's Slurm for a node.

Every key may also be given on the command line, which wins. The values are checked here, for the
manifest and for the command line alike (`problem`), so that nothing odd reaches sbatch: they are passed
to it as separate arguments, never through a shell, but a name that Slurm cannot hold is an error here,
before anything is submitted.
"""

from __future__ import annotations

import re
from typing import Literal

import msgspec

from forkctl.fielderrors import FieldError

# Slurm's names (partitions, accounts): letters, digits and . _ - (no spaces, no option-like start).
NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")
# sbatch --time: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS.
TIME_RE = re.compile(r"\d+|\d+:\d{1,2}|\d+:\d{1,2}:\d{1,2}|\d+-\d{1,2}(:\d{1,2}){0,2}")
Container = Literal["pyxis", "apptainer"]
DEFAULT_PENDING_LIMIT_S = 600


class SlurmSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    partition: str | None = None  # None: the cluster's default partition
    account: str | None = None
    time: str | None = None  # sbatch --time (e.g. 30, 1:00:00, 1-00:00)
    nodes: int = 1
    gpus_per_node: int | None = None  # None: --ep N, else 1; 0 asks for no GPU (a CPU partition)
    container_image: str | None = None  # a registry reference or an image file (.sqsh, .sif)
    container: Container = "pyxis"  # pyxis: srun --container-image; apptainer: apptainer exec --nv
    job_python: str | None = None  # the interpreter on the node with forkctl, torch and megatron-core
    job_dir: str | None = None  # where job folders go (a filesystem the nodes see); default .forkctl/slurm
    # Seconds a job may stay pending for a reason no waiting cures (its nodes down or drained).
    pending_limit: int = DEFAULT_PENDING_LIMIT_S

    def __post_init__(self) -> None:
        for key in ("partition", "account", "time", "nodes", "gpus_per_node", "pending_limit"):
            message = problem(key, getattr(self, key))
            if message is not None:
                raise FieldError(key, message)


def problem(key: str, value: object) -> str | None:
    """What is wrong with one setting's value, or None."""
    if value is None:
        return None
    if key in ("partition", "account") and not NAME_RE.fullmatch(str(value)):
        return f"{value!r} is not a Slurm name (letters, digits, '.', '_', '-')"
    if key == "time" and not TIME_RE.fullmatch(str(value)):
        return f"{value!r} is not a Slurm time limit (minutes, HH:MM:SS or D-HH:MM:SS)"
    if key == "nodes" and not (isinstance(value, int) and value >= 1):
        return f"{value!r} is not a node count (1 or more)"
    if key in ("gpus_per_node", "pending_limit") and not (isinstance(value, int) and value >= 0):
        return f"{value!r} is not a count (0 or more)"
    return None
