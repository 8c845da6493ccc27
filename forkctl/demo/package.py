"""The installed package the demo builds its upstream from (the manifest's `package:`), found without
importing it."""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

import msgspec

from forkctl.errors import BadInput
from forkctl.manifest.schema import Package as ManifestPackage


class Installed(msgspec.Struct, frozen=True):
    name: str  # the import folder's name, e.g. megatron
    folder: Path  # the installed folder
    distribution: str | None  # e.g. megatron-core
    version: str | None  # the distribution's version from its dist-info, when one sits next to it


def find_installed(spec: ManifestPackage, search_path: list[str] | None = None) -> Installed:
    """The installed folder of the manifest's `package`, found on sys.path without importing it
    (importing megatron.core pulls in torch: seconds, and not needed to copy files).

    A folder with the distribution's dist-info beside it (the installed distribution) wins over a bare
    copy earlier on the path, such as a patched copy a test or `forkctl validate` put first.
    """
    if spec.name is None:
        raise BadInput(
            "the manifest names no package: the demo builds its upstream from an installed package",
            hint="set package.name (the import folder, e.g. megatron) and package.distribution in the manifest",
        )
    found = [
        Path(entry or ".") / spec.name
        for entry in (search_path if search_path is not None else sys.path)
        if (Path(entry or ".") / spec.name).is_dir() and any((Path(entry or ".") / spec.name).glob("*/*.py"))
    ]
    for folder in found:
        version = _version_next_to(folder.parent, spec.distribution)
        if version is not None:
            return Installed(spec.name, folder.resolve(), spec.distribution, version)
    if found:
        return Installed(spec.name, found[0].resolve(), spec.distribution, None)
    install = (
        f"pip install {spec.requirement}" if spec.requirement else f"install {spec.distribution or spec.name}"
    )
    raise BadInput(
        f"{spec.distribution or spec.name} is not installed in this Python: no {spec.name}/ package on sys.path",
        hint=f"make setup (or {install}), then run forkctl demo again",
    )


def _version_next_to(site: Path, distribution: str | None) -> str | None:
    if distribution is None:
        return None
    wanted = distribution.lower().replace("_", "-")
    for dist in importlib.metadata.distributions(path=[str(site)]):
        if (dist.metadata["Name"] or "").lower().replace("_", "-") == wanted:
            return dist.version
    return None
