"""One forkctl at a time per repository, per toolkit and per cache entry: `fcntl` locks that the kernel
releases when the process ends, however it ends (a killed run never leaves a stale lock behind)."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import ParamSpec, TypeVar

from forkctl.digests import sha256_hex
from forkctl.errors import BadInput

DEFAULT_WAIT_S = 60.0


def wait_limit() -> float:
    raw = os.environ.get("FORKCTL_LOCK_TIMEOUT", "")
    try:
        return float(raw) if raw else DEFAULT_WAIT_S
    except ValueError:
        raise BadInput(f"FORKCTL_LOCK_TIMEOUT={raw!r} is not a number of seconds") from None


@contextlib.contextmanager
def held(path: Path, what: str, wait_s: float | None = None) -> Iterator[None]:
    """Hold an exclusive lock on `path` (created if needed), waiting up to FORKCTL_LOCK_TIMEOUT seconds
    (`wait_s`: that long instead, for a lock held across network operations)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    limit = wait_limit() if wait_s is None else wait_s
    try:
        deadline = time.monotonic() + limit
        while True:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = os.pread(descriptor, 64, 0).decode(errors="replace").strip() or "another process"
                    raise BadInput(
                        f"another forkctl ({holder}) is working on {what}; gave up after {limit:.0f} s",
                        hint="let it finish and run again (FORKCTL_LOCK_TIMEOUT sets how long to wait)",
                    ) from None
                time.sleep(0.05)
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, f"pid {os.getpid()}".encode(), 0)
        yield
    finally:
        os.close(descriptor)  # closing releases the lock


def repository(git_dir: Path) -> contextlib.AbstractContextManager[None]:
    return held(git_dir / "forkctl.lock", f"the repository {git_dir}")


def toolkit(manifest_path: Path, cache: Path) -> contextlib.AbstractContextManager[None]:
    """The manifest and its patch files. The lock lives in forkctl's cache, not in the user's tree."""
    key = sha256_hex(str(manifest_path.resolve()).encode())[:16]
    return held(cache / "locks" / f"toolkit-{key}.lock", f"the patch series of {manifest_path}")


P = ParamSpec("P")
R = TypeVar("R")


def repository_locked(func: Callable[P, R]) -> Callable[P, R]:
    """For an operation whose first argument is a GitRepo: hold that repository's lock while it runs."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        repo = args[0]
        with repository(repo.git_dir):  # type: ignore[attr-defined]
            return func(*args, **kwargs)

    return wrapper
