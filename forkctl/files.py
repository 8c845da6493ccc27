"""Writing files so that a kill at any moment leaves the old bytes or the new ones, never a mix; and
where forkctl keeps its cache.

`tempfile` and `shutil` are imported by the functions that write: a command that only reads (lint,
status) imports this module for `cache_root` and must not pay for them.
"""

from __future__ import annotations

import contextlib
import errno
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
    """Write `data` to a temp file, flush it to disk, then rename it over `path`.

    The temp file is made where a kill before the rename leaves nothing a user sees: for a file in a
    git checkout, in that checkout's git dir (`scratch_folder`), else beside `path`. A symlink at
    `path` is replaced by a regular file (the link's target is never written through).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.is_file() and not path.is_symlink() else 0o644
    scratch = scratch_folder(path.parent)
    if scratch is not None:
        try:
            _write_then_rename(path, data, mode, scratch, f"{os.getpid()}.")
            return
        except OSError as exc:
            if exc.errno != errno.EXDEV:  # another mount of the same file system: beside it, below
                raise
    _write_then_rename(path, data, mode, path.parent, f".{path.name}.")


def _write_then_rename(path: Path, data: bytes, mode: int, folder: Path, prefix: str) -> None:
    import tempfile

    handle, temporary = tempfile.mkstemp(prefix=prefix, suffix=TEMP_SUFFIX, dir=folder)
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


SCRATCH = "forkctl-tmp"  # in a checkout's git dir: atomic_write's temp files, named <pid>.<random>.tmp
ABANDONED_AFTER_S = 60.0  # a temp file this old whose process is gone was left by a kill
_SWEPT: set[Path] = set()  # scratch folders this process has swept


def scratch_folder(folder: Path) -> Path | None:
    """Where atomic_write keeps the temp file of a file in `folder` inside a git checkout: the
    `forkctl-tmp` folder of that checkout's git dir (git never lists it; the rename from there is
    atomic on one file system). None (beside the file) outside a checkout, in a git dir or in
    forkctl's cache, or when that folder cannot be used. Temp files that killed runs left there are
    removed the first time a process writes through it."""
    git_dir = _checkout_git_dir(folder)
    if git_dir is None:
        return None
    scratch = git_dir / SCRATCH
    try:
        scratch.mkdir(exist_ok=True)
        if os.stat(scratch).st_dev != os.stat(folder).st_dev:
            return None  # another file system: the rename would fail
        if scratch not in _SWEPT:
            _SWEPT.add(scratch)
            _sweep(scratch)
    except OSError:  # a read-only git dir, say: beside the file, as before
        return None
    return scratch


def _checkout_git_dir(folder: Path) -> Path | None:
    """The git dir of the checkout whose work tree holds `folder` (a `.git` folder, or the folder a
    `.git` file names: linked worktrees, submodules); None outside one, or inside a git dir itself."""
    try:
        resolved = folder.resolve()
        if resolved.is_relative_to(cache_root().resolve()):
            return None  # forkctl's own files: nobody's checkout
    except (OSError, BadInput):
        return None
    for above in (resolved, *resolved.parents):
        if above.name == ".git" or ((above / "HEAD").is_file() and (above / "objects").is_dir()):
            return None  # a git dir (bare, or a checkout's): git lists nothing in it
        marker = above / ".git"
        if marker.is_dir():
            return marker
        if marker.is_file():
            text = marker.read_text(errors="replace").strip()
            named = above / text.removeprefix("gitdir:").strip() if text.startswith("gitdir:") else None
            return named.resolve() if named is not None and named.is_dir() else None
    return None


def _sweep(scratch: Path) -> None:
    """Remove the temp files of atomic writes whose process is gone (killed before its rename)."""
    import time

    for entry in os.scandir(scratch):
        pid = entry.name.split(".", 1)[0]
        if not (entry.name.endswith(TEMP_SUFFIX) and pid.isdigit()) or process_alive(int(pid)):
            continue
        with contextlib.suppress(OSError):  # another forkctl swept it first
            if time.time() - entry.stat(follow_symlinks=False).st_mtime > ABANDONED_AFTER_S:
                os.unlink(entry.path)


def process_alive(pid: int) -> bool:
    """Is process `pid` running (as far as this process can tell)?"""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write(path, text.encode("utf-8"))


def remove_temporaries(paths: Iterable[Path]) -> int:
    """Delete the temp files that a killed atomic_write of any of `paths` left next to it; how many.

    Only names atomic_write makes (`.<name>.<8 random characters>.tmp`) are touched; the caller holds
    the lock that keeps every other forkctl from writing these paths, so no such file is in use.
    """
    removed = 0
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
                    removed += 1
    return removed


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
