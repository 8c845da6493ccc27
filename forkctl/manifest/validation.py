"""The `validation:` section's own value types: the library versions a required environment was
validated with (`validation.environments`), and how `validate --launcher slurm` asks the site's Slurm
for a node (`validation.slurm`).

Library pins: the manifest owns the validated combinations, not the patch: the patch stays upstreamable
(it knows no list of validated versions), and the gate refuses evidence from any other combination.

Slurm settings: every key may also be given on the command line, which wins. The values are checked
here, for the manifest and for the command line alike (`problem`), so that nothing odd reaches sbatch:
they are passed to it as separate arguments, never through a shell, but a name that Slurm cannot hold
is an error here, before anything is submitted.
"""

from __future__ import annotations

import re
from typing import Literal

import msgspec

from forkctl.fielderrors import FieldError

# The libraries a required environment's evidence records (gpu.evidence.Environment's fields of the same
# names) that the manifest can pin. cuBLASLt ships in the cuBLAS library and carries its version.
PINNABLE_LIBRARIES = ("torch", "cuda", "cublas", "transformer_engine")
_VERSION_BOUNDARY = ".+-"


def version_matches(pin: str, recorded: str) -> bool:
    """A pin is a version prefix cut at a component boundary: `13.0` matches 13.0 and 13.0.88, not 13.1
    or 13.01; `2.11.0` matches 2.11.0+cu130 (the local label is one more component: pin it to require
    it). Plain strings, no version ordering: `absent` (validate's word for a library not installed)
    matches only itself."""
    return recorded == pin or (recorded.startswith(pin) and recorded[len(pin)] in _VERSION_BOUNDARY)


class LibraryPins(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The library versions a required environment was validated with (`validation.environments`):
    evidence recorded with another version of a pinned library does not count for it. Unset: any."""

    torch: str | None = None  # torch.__version__, e.g. "2.11.0+cu130"
    cuda: str | None = None  # torch.version.cuda, e.g. "13.0"
    cublas: str | None = None  # the cuBLAS (and cuBLASLt) library version, e.g. "13.1.0"
    transformer_engine: str | None = None  # a version, or "absent": validated without Transformer Engine

    def __post_init__(self) -> None:
        pinned = self.pinned()
        if not pinned:
            # A ValueError, not a FieldError: the message belongs to the entry itself, not one of its keys.
            raise ValueError(
                f"the entry pins nothing; name one of {', '.join(PINNABLE_LIBRARIES)} or remove it"
            )
        for library, version in pinned.items():
            if not version.strip() or version != version.strip():
                raise FieldError(
                    library, f'{version!r} is empty or has spaces around it; write the version, e.g. "13.0"'
                )

    def pinned(self) -> dict[str, str]:
        """library -> pin, for the pinned ones only."""
        return {name: getattr(self, name) for name in PINNABLE_LIBRARIES if getattr(self, name) is not None}


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
