"""Repositories addressed by path, read and written as objects and refs only.

`GitRepo` is found (or made) here and composed from one part per concern, each in its own module:
objects (existence, tree entries, blobs), commits (fixed identities, computed objects), history
(ancestry, ranges), refs (compare-and-swap), index (private index files), worktree (scratch worktrees
for conflicts), patches (format-patch, diffs, patch-ids), treeedit (trees read, compared and written in
process). Every command goes through the hermetic
runner (`runner.py`); nothing here touches a user's checkout, index or files.
"""

from __future__ import annotations

import weakref
from pathlib import Path
from typing import TypeVar

from forkctl.errors import BadInput
from forkctl.git.commits import Commits, commit_object
from forkctl.git.gitdir import GitDir
from forkctl.git.history import History
from forkctl.git.index import Indexes
from forkctl.git.objects import ObjectReads
from forkctl.git.patches import Diffs, Patches
from forkctl.git.refs import Refs
from forkctl.git.runner import git
from forkctl.git.submodules import Submodules
from forkctl.git.treeedit import TreeEdits
from forkctl.git.worktree import Worktrees

# `commit_object` is imported from here by callers written before the split (ops.replay).
__all__ = ["GitRepo", "commit_object", "repo_holding", "toplevel"]

Repo = TypeVar("Repo", bound="GitRepo")
# The cache repositories open now, by (class, git dir): everyone who asks for one while a command holds
# it gets the same object, with what it has answered so far. Held weakly: when the command drops it, it
# writes its facts and closes its reader, and the next command opens it afresh.
_OPEN_CACHES: weakref.WeakValueDictionary[tuple[type, Path], GitRepo] = weakref.WeakValueDictionary()


class GitRepo(Submodules, TreeEdits, ObjectReads, Commits, History, Refs, Indexes, Worktrees, Patches, Diffs):
    """A repository addressed by path; bare or not. No method touches its working tree or index."""

    def __init__(self, path: Path) -> None:
        # One process: rev-parse prints the git dir and bareness, then the top level of the working
        # tree; where there is none (a bare repository, a path inside a git dir) it stops there and exits
        # non-zero, the first two answers already printed.
        status, out, _ = git(
            ["rev-parse", "--absolute-git-dir", "--is-bare-repository", "--show-toplevel"],
            cwd=path,
            check=False,
        ).parts()
        lines = out.splitlines()
        if not Path(path).is_dir() or len(lines) not in (2, 3) or (len(lines) == 3 and status != 0):
            raise BadInput(f"{path} is not a git repository", hint="pass the path of a clone")
        git_dir = Path(lines[0])
        # A bare repository, or a path inside a git dir, is addressed by its git dir.
        bare = lines[1] == "true"
        by_git_dir = bare or len(lines) == 2 or not lines[2].strip()
        super().__init__(git_dir, git_dir if by_git_dir else Path(lines[2].strip()), bare)
        if Path(path).resolve() not in (self.path.resolve(), self.git_dir.resolve()):
            raise BadInput(
                f"{path} is not a git repository (it is inside {self.path})",
                hint="pass the root of a clone",
            )

    @classmethod
    def addressed(cls: type[Repo], git_dir: Path, path: Path | None = None, bare: bool = False) -> Repo:
        """The repository at `git_dir` (working tree `path`) as git already said it is: no question."""
        repo = cls.__new__(cls)
        GitDir.__init__(repo, git_dir, path, bare)
        return repo

    @classmethod
    def cache_at(cls: type[Repo], git_dir: Path) -> Repo:
        """A bare repository forkctl made itself (a cache), addressed without asking git again: the one
        object open for it now, or a new one that reads and keeps its recorded facts (git/facts.py),
        written when the object is dropped (or at exit)."""
        key = (cls, Path(git_dir).resolve())
        repo = _OPEN_CACHES.get(key)
        if repo is None:
            from forkctl.git.facts import Facts  # only a cache has facts: a user's clone never reads them

            repo = cls.addressed(key[1], key[1], bare=True)
            repo.facts = Facts(key[1])
            weakref.finalize(repo, repo.facts.save)
            _OPEN_CACHES[key] = repo
        assert isinstance(repo, cls)
        return repo

    @classmethod
    def init_bare(cls, path: Path) -> GitRepo:
        Path(path).mkdir(parents=True, exist_ok=True)
        git(["init", "--quiet", "--bare", "--", str(path)])
        return cls(path)

    def committer_ident(self) -> str | None:
        """`Name <email>` of whoever git would record as committer here (config), or None."""
        status, out, _ = self.git(["var", "GIT_COMMITTER_IDENT"], check=False).parts()
        return out.rsplit(">", 1)[0] + ">" if status == 0 and ">" in out else None

    def set_config(self, key: str, value: str) -> None:
        self.git(["config", "--", key, value])

    def remote_urls(self) -> list[str]:
        """The URLs of this clone's remotes (`remote.<name>.url`), in config order."""
        status, out, _ = self.git(["config", "-z", "--get-regexp", r"^remote\..*\.url$"], check=False).parts()
        if status != 0:
            return []
        return [item.split("\n", 1)[1] for item in out.split("\x00") if "\n" in item]


def repo_holding(repo_path: Path | None, url: str, revs: list[str]) -> GitRepo:
    """The repository to read upstream objects from: `repo_path` as it is, or the cache for `url`.

    A given repository is never fetched into (it is the user's); the cache is filled as needed.
    """
    if repo_path is not None:
        return GitRepo(repo_path)
    # Imported here, not at the top: the cache and its fetch machinery (clonecache, remote, graph, listings,
    # credentials) are only needed without a named clone, so a verb given --repo (a port, a preview)
    # never loads them; and clonecache itself builds on GitRepo.
    from forkctl.git.clonecache import cached_objects

    return cached_objects(url, revs)


def checkout_at(cwd: Path) -> tuple[GitRepo, str | None] | None:
    """(the clone whose working tree holds `cwd`, its HEAD commit or None when unborn), or None outside
    any working tree: one `rev-parse`, where `toplevel` + `GitRepo` + resolving HEAD take four."""
    status, out, _ = git(
        ["rev-parse", "--show-toplevel", "--absolute-git-dir", "HEAD^{commit}"], cwd=cwd, check=False
    ).parts()
    lines = out.splitlines()
    if len(lines) < 2 or not lines[0].strip():
        return None
    repo = GitRepo.addressed(Path(lines[1]), Path(lines[0]))
    head = lines[2] if status == 0 and len(lines) == 3 else None
    return repo, head


def toplevel(cwd: Path) -> Path | None:
    """The root of the working tree that contains `cwd`, or None outside any repository."""
    status, out, _ = git(["rev-parse", "--show-toplevel"], cwd=cwd, check=False).parts()
    return Path(out.strip()) if status == 0 and out.strip() else None
