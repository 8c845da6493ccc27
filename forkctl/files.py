"""Writing files so that a kill at any moment leaves the old bytes or the new ones, never a mix; and
where forkctl keeps its cache.

`tempfile` and `shutil` are imported by the functions that write: a command that only reads (lint,
status) imports this module for `cache_root` and must not pay for them.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable
from pathlib import Path

from forkctl.errors import BadInput

TEMP_SUFFIX = ".tmp"
# mkstemp's names: the prefix, 8 characters from this alphabet, the suffix.
_RANDOM_PART = r"[a-z0-9_]{8}"


class CacheNotAFolder(BadInput):
    """$FORKCTL_CACHE names a file (or a path below one): a command that needs the cache stops here,
    one that only reads or writes a courtesy cache entry goes on without it."""


def cache_root() -> Path:
    """Where forkctl keeps what it learned: remote listings, partial clones, parsed manifests."""
    configured = os.environ.get("FORKCTL_CACHE")
    if not configured:
        return Path.home() / ".cache" / "forkctl"
    root = Path(configured)
    # The folder is made on first use; a file at it (or at a folder above it) would crash every write.
    for existing in (root, *root.parents):
        if existing.exists() or existing.is_symlink():
            if not existing.is_dir():
                raise CacheNotAFolder(
                    f"FORKCTL_CACHE={configured} cannot be forkctl's cache: {existing} is not a folder",
                    hint="point FORKCTL_CACHE at a folder (it is made if missing), or unset it",
                )
            break
    return root


def atomic_write(path: Path, data: bytes) -> None:
    """Write `data` to a temp file in `path`'s folder, flush it to disk, then rename it over `path`.

    A symlink at `path` is replaced by a regular file (the link's target is never written through).
    """
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.is_file() and not path.is_symlink() else 0o644
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMP_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write(path, text.encode("utf-8"))


def remove_temporaries(paths: Iterable[Path]) -> None:
    """Delete the temp files that a killed atomic_write of any of `paths` left next to it.

    Only names atomic_write makes (`.<name>.<8 random characters>.tmp`) are touched; the caller holds
    the lock that keeps every other forkctl from writing these paths, so no such file is in use.
    """
    wanted: dict[Path, set[str]] = {}
    for path in paths:
        wanted.setdefault(path.parent, set()).add(path.name)
    for folder, names in wanted.items():
        pattern = re.compile(
            r"\.("
            + "|".join(re.escape(name) for name in sorted(names))
            + r")\."
            + _RANDOM_PART
            + re.escape(TEMP_SUFFIX)
        )
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue  # no folder: nothing was written there
        for entry in entries:
            if pattern.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)


def atomic_folder(path: Path, files: dict[str, bytes]) -> Path:
    """Create the folder `path` holding `files` ({relative posix path: bytes}, made read-only), whole or
    not at all: written into a temp folder beside it, flushed to disk, then renamed to `path`.

    When `path` already exists (another process made it first) it is kept and the new copy dropped:
    the caller names a folder by its content, so both are the same. Returns `path`.
    """
    import shutil
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=TEMP_SUFFIX, dir=path.parent))
    try:
        for relative, data in files.items():
            target = temporary.joinpath(*relative.split("/"))
            if not target.resolve().is_relative_to(temporary.resolve()):
                raise ValueError(f"{relative!r} is outside the folder")
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "xb") as stream:
                stream.write(data)
                stream.flush()
                os.fsync(stream.fileno())
            os.chmod(target, 0o444)
        os.chmod(temporary, 0o755)
        try:
            os.rename(temporary, path)
        except OSError:
            if not path.is_dir():
                raise
            shutil.rmtree(temporary, ignore_errors=True)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    return path
