"""The series as a branch to edit with git's own tools (`gbp pq import`), turned back into files by export.

`start` builds apply(base, series) (one commit per patch: the patch's message, author and date, the
committer the same, so nothing but the person's edits will differ), puts it on a new branch and checks
that branch out in a new worktree: under the git dir (`<git-dir>/forkctl/edit/<branch>`, a path
forkctl owns) or where the person says. There they amend, reorder, split or add commits (`git rebase
-i` on the base); `forkctl export --branch <branch>` writes the files back, and an unchanged branch
exports to the same bytes. The person's own checkout, branches and index are never touched: an
existing branch or a path that holds files is refused, never reused.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from pathlib import Path

import msgspec

from forkctl import locking
from forkctl.errors import BadInput
from forkctl.git.refs import check_branch_name
from forkctl.git.repo import GitRepo
from forkctl.git.sha import Sha
from forkctl.ops import replay
from forkctl.series import Series

EDIT_DIR = Path("forkctl") / "edit"


class Editing(msgspec.Struct, frozen=True):
    branch: str
    worktree: Path
    base: str
    commits: list[str]  # one per patch, in order

    @property
    def head(self) -> str:
        return self.commits[-1] if self.commits else self.base


def default_worktree(repo: GitRepo, branch: str) -> Path:
    return repo.git_dir / EDIT_DIR / re.sub(r"[^A-Za-z0-9._-]+", "-", branch)


def _refuse_existing(repo: GitRepo, branch: str, worktree: Path) -> None:
    tip = repo.refs.branch_sha(branch)
    if tip is not None:
        holder = repo.worktrees.checked_out_branches().get(branch)
        where = f", checked out in {holder}" if holder else ""
        raise BadInput(
            f"branch {branch} already exists at {tip[:12]}{where}: forkctl edit never reuses a branch",
            hint=f"if you edited it, write it back with forkctl export --branch {shlex.quote(branch)}; then "
            f"remove it (git worktree remove {shlex.quote(str(holder)) if holder else 'PATH'}; git branch -D "
            f"{shlex.quote(branch)}), or pass --branch OTHER",
        )
    if worktree.exists() and (not worktree.is_dir() or any(worktree.iterdir())):
        raise BadInput(
            f"{worktree} already exists and is not an empty folder",
            hint="pass --worktree with a new or empty folder",
        )


@locking.repository_locked
def start(repo: GitRepo, series: Series, base: Sha, branch: str, worktree: Path | None) -> Editing:
    check_branch_name(branch)
    path = worktree if worktree is not None else default_worktree(repo, branch)
    _refuse_existing(repo, branch, path)
    built = replay.build_series(repo, base, series.patches)
    if built.conflict is not None:
        raise BadInput(
            f"{built.conflict.patch.path.name} does not apply as written on the base {base[:12]}: "
            "the series has no branch to edit",
            hint=replay.stale_fix(base),
        )
    made = _absent_folders(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        repo.worktrees.add_branch_worktree(path, branch, built.head)
    except (BadInput, OSError) as exc:
        _take_back(repo, branch, built.head, path, made)
        said = exc.message if isinstance(exc, BadInput) else f"{exc.strerror}: {exc.filename}"
        raise BadInput(
            f"cannot check the series out as branch {branch} in {path}: {said}; the branch and the folders "
            "edit made were removed",
            hint="pass --worktree with a folder on a file system that can hold every path of the series, "
            "or fix the patch that adds the path git could not write",
        ) from None
    return Editing(branch=branch, worktree=path, base=base, commits=[a.commit for a in built.applied])


def _absent_folders(path: Path) -> list[Path]:
    """`path` and those of its parents that do not exist yet, outermost first: what edit would make."""
    absent = []
    for folder in [path, *path.parents]:
        if os.path.lexists(folder):
            break
        absent.append(folder)
    return absent[::-1]


def _take_back(repo: GitRepo, branch: str, head: str, path: Path, made: list[Path]) -> None:
    """Undo what a failed `start` made, and only that: the worktree's registration, the branch (only
    while it is still the commit edit made it at: it did not exist before), the folders it created."""
    repo.worktrees.remove_worktree(path)
    if repo.refs.branch_sha(branch) == head:
        repo.refs.delete_ref(f"refs/heads/{branch}", head)
    if made:
        shutil.rmtree(made[0], ignore_errors=True)
