"""What a Slurm validate asks for: the manifest's `validation.slurm` with the command line over it, and
the checks that refuse bad input (exit 2) before anything is submitted."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import msgspec

from forkctl.errors import BadInput
from forkctl.manifest import Manifest
from forkctl.manifest.validation import SlurmSettings, problem
from forkctl.slurm.tools import Slurm

# Image references a container runtime pulls itself (no file to check here).
_URI_SCHEMES = ("docker://", "docker-daemon://", "oras://", "library://", "shub://", "http://", "https://")
_IMAGE_FILES = (".sqsh", ".squashfs", ".sif", ".simg")
JOB_DIR = ".forkctl/slurm"


def settings(manifest: Manifest, given: dict[str, Any]) -> SlurmSettings:
    """The manifest's settings with every option given on the command line (not None) over them."""
    base = manifest.validation.slurm
    for key, value in given.items():
        message = problem(key, value)
        if message is not None:
            raise BadInput(f"--{key.replace('_', '-')}: {message}")
    merged = msgspec.structs.replace(base, **{k: v for k, v in given.items() if v is not None})
    return merged


def gpus_per_node(chosen: SlurmSettings, ep: int | None) -> int:
    gpus = chosen.gpus_per_node if chosen.gpus_per_node is not None else (ep or 1)
    if ep is not None and gpus < ep:
        raise BadInput(
            f"--ep {ep} needs {ep} GPUs on one node, but the job asks for {gpus} per node",
            hint=f"pass --gpus-per-node {ep} (or set validation.slurm.gpus_per_node)",
        )
    return gpus


def check(chosen: SlurmSettings, slurm: Slurm, root: Path) -> None:
    """Refuse before submitting: more than one node, an unknown partition, a missing image file."""
    if chosen.nodes != 1:
        raise BadInput(
            f"--nodes {chosen.nodes}: the GPU suites start their ranks on one host (torchrun --standalone "
            "in tests/multigpu), so a validate job uses one node",
            hint="pass --nodes 1 --gpus-per-node N --ep N for the expert-parallel suite on N GPUs",
        )
    partitions = slurm.partitions()
    if chosen.partition is not None and chosen.partition not in partitions:
        raise BadInput(
            f"Slurm has no partition {chosen.partition!r} (sinfo lists: {', '.join(partitions) or 'none'})",
            hint="pass --partition with one of them (or fix validation.slurm.partition)",
        )
    image = chosen.container_image
    if image is not None and image_is_file(image):
        path = Path(image).expanduser()
        path = path if path.is_absolute() else root / path
        if not path.is_file():
            raise BadInput(
                f"container image {image} does not exist ({path})",
                hint="build or copy the image first, or name a registry image (e.g. nvcr.io#nvidia/pytorch:25.01-py3)",
            )


def image_is_file(image: str) -> bool:
    """A path to an image file (checked here), not a reference the runtime pulls."""
    if image.startswith(_URI_SCHEMES):
        return False
    return image.startswith(("/", "./", "../", "~")) or image.endswith(_IMAGE_FILES)


def image_path(image: str, root: Path) -> str:
    """An image file as the node must see it (absolute); a reference as given."""
    if not image_is_file(image):
        return image
    path = Path(image).expanduser()
    return str(path if path.is_absolute() else root / path)


def job_python(chosen: SlurmSettings) -> str:
    """The interpreter the job runs forkctl with: the setting, else this one (a shared filesystem)."""
    return chosen.job_python or sys.executable


def job_parent(chosen: SlurmSettings, root: Path) -> Path:
    """Where the job's private folder goes: a filesystem the node sees (the checkout by default)."""
    if chosen.job_dir is None:
        return root / JOB_DIR
    path = Path(chosen.job_dir).expanduser()
    return path if path.is_absolute() else root / path
