"""Where a stopped port or apply of a checkout is, so that `forkctl status` can show it.

The state lives in the git dir of the repository the operation ran in (`ops/state.py`): the cache clone,
or a clone named with `--repo`, which status is not told about. So each saved state also leaves a
pointer under the cache (`in-progress/<digest of the manifest path>.json`: that git dir, and the
`--repo` the commands need), removed with the state. A pointer is only a courtesy: status trusts the
state file it points at, and one whose state is gone, or names another manifest, is ignored.

Light on purpose: status imports this module on every run, and it reads JSON and files only.
"""

from __future__ import annotations

import contextlib
import shlex
from pathlib import Path
from typing import Any

import msgspec

from forkctl.errors import BadInput
from forkctl.files import atomic_write_text, cache_root
from forkctl.ops.markers import CONFLICT_MARKER_RE

STATE_DIR = "forkctl"  # under the git dir
# A stopped series build (a port, or the legacy apply --continue): its state, and its scratch worktree.
STATE_FILE, WORKTREE_DIR = "build-state.json", "build-worktree"
# The names the previous version gave them: a stop it left is still found, resumed and aborted.
OLD_STATE_FILE, OLD_WORKTREE_DIR = "apply-state.json", "apply-worktree"


def state_file(git_dir: Path) -> Path:
    """The state of the build stopped in `git_dir`: `build-state.json`, or the previous version's
    `apply-state.json` while only that one exists (the stop it left goes on under its own names)."""
    folder = git_dir / STATE_DIR
    new, old = folder / STATE_FILE, folder / OLD_STATE_FILE
    return old if old.is_file() and not new.is_file() else new


class Pointer(msgspec.Struct, frozen=True):
    git_dir: str
    repo: str | None  # what to pass as --repo; None for the cache clone (the default)


class InProgress(msgspec.Struct, frozen=True):
    operation: str  # "port" or "apply"
    git_dir: str
    file: str | None  # the patch it stopped at (relative to the manifest's folder); None: writing results
    parent: str
    paths: list[str]
    unresolved: list[str]  # paths that still hold conflict markers
    worktree: str
    commands: dict[str, str]  # continue / skip / abort, ready to paste


def _key(manifest: str | Path) -> str:
    from forkctl.digests import sha256_hex

    return sha256_hex(str(Path(manifest).resolve()).encode())[:24]


def _pointer_path(manifest: str | Path) -> Path:
    return cache_root() / "in-progress" / f"{_key(manifest)}.json"


def remember(manifest: str, git_dir: Path, repo: Path) -> None:
    """Point the checkout of `manifest` at the state in `git_dir` (`repo`: the repository as given)."""
    with contextlib.suppress(OSError, BadInput):  # a cache that cannot be written loses only the pointer
        in_cache = git_dir.resolve().is_relative_to((cache_root() / "repos").resolve())
        pointer = Pointer(git_dir=str(git_dir), repo=None if in_cache else str(repo))
        atomic_write_text(_pointer_path(manifest), msgspec.json.encode(pointer).decode() + "\n")


def forget(manifest: str, git_dir: Path) -> None:
    """Remove the pointer of `manifest`'s checkout when it points at `git_dir`."""
    with contextlib.suppress(OSError, BadInput, msgspec.DecodeError):
        path = _pointer_path(manifest)
        if path.is_file():
            pointer = msgspec.json.decode(path.read_bytes(), type=Pointer)
            if Path(pointer.git_dir).resolve() == git_dir.resolve():
                path.unlink()


def _read_state(git_dir: Path) -> dict[str, Any] | None:
    try:
        data = msgspec.json.decode(state_file(git_dir).read_bytes())
    except (OSError, msgspec.DecodeError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _unresolved(worktree: Path, paths: list[str]) -> list[str]:
    left = []
    for rel in paths:
        target = worktree / rel
        with contextlib.suppress(OSError):
            if target.is_file() and CONFLICT_MARKER_RE.search(target.read_bytes()):
                left.append(rel)
    return left


def repo_words(repo: str | None) -> str:
    """` --repo PATH` (absolute, quoted for a shell) for a clone named with --repo; "" for the cache clone."""
    return f" --repo {shlex.quote(str(Path(repo).absolute()))}" if repo else ""


def port_on(upstream_repo: str | None) -> tuple[str, dict[str, str]]:
    """What a printed port and its --continue / --skip carry to run on the objects a run used that was
    lent `--upstream-repo` (`sync`): ` --repo PATH` for a local clone, nothing for a URL (the cache clone
    of the manifest's URL); and the port's ways on with it."""
    local = (
        upstream_repo
        if upstream_repo and "://" not in upstream_repo and Path(upstream_repo).is_dir()
        else None
    )
    return repo_words(local), ways_on("port", True, local)


def ways_on(
    operation: str,
    stopped: bool,
    repo: str | None = None,
    manifest: str | None = None,
    reverted: bool = False,
    upstream_repo: str | None = None,
) -> dict[str, str]:
    """The ways on, each a command that works as printed: with the `--repo` (None: the cache clone, the
    default) and the `--manifest` (None: the one found from the checkout) the stopped run was given,
    as absolute paths, so a shell in another folder runs them too (a stop is found by its repository and
    its manifest); an apply that ran in the cache clone of `--upstream-repo` names that too. --skip only
    for a port stopped at a patch (one writing its results has none); at a pick of a reverted upstream
    commit, --reapply-reverted instead of --continue."""
    where = repo_words(repo)
    if upstream_repo and not repo:  # a local path as an absolute one; a URL as given
        local = "://" not in upstream_repo and Path(upstream_repo).exists()
        where += (
            f" --upstream-repo {shlex.quote(str(Path(upstream_repo).absolute()) if local else upstream_repo)}"
        )
    where += f" --manifest {shlex.quote(str(Path(manifest).absolute()))}" if manifest else ""
    verbs = ("continue", "skip", "abort") if operation == "port" and stopped else ("continue", "abort")
    if reverted and stopped:
        verbs = ("reapply-reverted", "skip", "abort")
    return {verb: f"forkctl {operation} --{verb}{where}" for verb in verbs}


def _summary(state: dict[str, Any], pointer: Pointer, manifest: Path) -> InProgress | None:
    try:
        operation, files, index = str(state["operation"]), list(state["files"]), int(state["conflict_index"])
        paths = [str(path) for path in state.get("conflict_paths", [])]
        worktree = str(state.get("worktree", ""))
    except (KeyError, TypeError, ValueError):
        return None
    stopped = 0 <= index < len(files)
    return InProgress(
        operation=operation,
        git_dir=pointer.git_dir,
        file=str(files[index]) if stopped else None,
        parent=str(state.get("conflict_parent", "")),
        paths=paths if stopped else [],
        unresolved=_unresolved(Path(worktree), paths) if stopped else [],
        worktree=worktree,
        # The manifest it was found by: the commands then work from any folder.
        commands=ways_on(operation, stopped, pointer.repo, str(manifest), reverted=_reverted(state)),
    )


def _reverted(state: dict[str, Any]) -> bool:
    """Is the port stopped at a pick of an upstream commit that upstream reverted (a decision)?"""
    port = state.get("port")
    return isinstance(port, dict) and bool(port.get("reverted"))


def find(manifest: Path, repo_path: Path | None = None) -> InProgress | None:
    """The port or apply that `manifest`'s checkout left stopped: found through its pointer, or in
    `repo_path` (a clone status was given) when an operation started from this manifest is there."""
    candidates: list[Pointer] = []
    with contextlib.suppress(OSError, BadInput, msgspec.DecodeError):
        path = _pointer_path(manifest)
        if path.is_file():
            candidates.append(msgspec.json.decode(path.read_bytes(), type=Pointer))
    if repo_path is not None:
        for git_dir in (repo_path / ".git", repo_path):
            candidates.append(Pointer(git_dir=str(git_dir), repo=str(repo_path)))
    for pointer in candidates:
        state = _read_state(Path(pointer.git_dir))
        if state is not None and Path(str(state.get("manifest", ""))).resolve() == manifest.resolve():
            return _summary(state, pointer, manifest)
    return None
