"""Repositories addressed by path, read and written as objects and refs only.

`GitRepo` is found (or made) here. It is a `GitDir` (the git dir, how git runs in it, what it has
answered: `gitdir.py`) that hands out one part per concern, each a small class in its own module that
holds the `GitDir` it reads (and the sibling parts it builds on). Grouped by what they answer:

- which objects are here and what they hold: `objects` (`objects.Objects`: existence, resolution of
  names, tree entries, blobs read and written), `trees` (`treeedit.TreeEdits`: trees read, compared and
  written in process), `submodules` (`submodules.Submodules`: `.gitmodules` blobs read by git's parser);
- commits and their graph: `commits` (`commits.Commits`: commits made with fixed identities, computed
  commit objects, what a commit records), `history` (`history.History`: ancestry, merge bases, ranges);
- changes between commits: `patches` (`patches.Patches`: format-patch mails, patch-ids, range-diff),
  `diffs` (`patches.Diffs`: the paths, lines and blobs changed);
- names and places: `refs` (`refs.Refs`: resolving refs, moving them with compare-and-swap),
  `indexes` (`index.Indexes`: private index files), `worktrees` (`worktree.Worktrees`: linked worktrees);
- the repository's own settings: `committer_ident`, `set_config`, `remote_urls` (methods of `GitRepo`).

A function that uses one concern asks for that part (`def relation(history: History, ...)`, called
`relation(repo.history, ...)`); one that uses several takes the `GitRepo`. A part keeps nothing of its
own (what it learns is kept on the `GitDir`), so it is made on each access and the repository does not
hold it: no reference cycle, and a dropped repository closes its reader and writes its facts at once.
Its module is imported on first access: a command that never reads `.gitmodules` never loads
`submodules.py`. Every command goes through the hermetic runner (`runner.py`); nothing here touches a
user's checkout, index or files.
"""

from __future__ import annotations

import weakref
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from forkctl.errors import BadInput
from forkctl.git.gitdir import GitDir
from forkctl.git.runner import git

if TYPE_CHECKING:
    from forkctl.git.commits import Commits
    from forkctl.git.history import History
    from forkctl.git.index import Indexes
    from forkctl.git.objects import Objects
    from forkctl.git.patches import Diffs, Patches
    from forkctl.git.refs import Refs
    from forkctl.git.submodules import Submodules
    from forkctl.git.treeedit import TreeEdits
    from forkctl.git.worktree import Worktrees

__all__ = ["GitRepo", "repo_holding", "toplevel"]

Repo = TypeVar("Repo", bound="GitRepo")
# The cache repositories open now, by (class, git dir): everyone who asks for one while a command holds
# it gets the same object, with what it has answered so far. Held weakly: when the command drops it, it
# writes its facts and closes its reader, and the next command opens it afresh.
_OPEN_CACHES: weakref.WeakValueDictionary[tuple[type, Path], GitRepo] = weakref.WeakValueDictionary()


class GitRepo(GitDir):
    """A repository addressed by path; bare or not, made of its parts (the module docstring). No part
    touches its working tree or index."""

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

    # The parts, made on each access (they keep nothing: see the module docstring), their modules
    # imported on the first.
    @property
    def objects(self) -> Objects:
        from forkctl.git.objects import Objects

        return Objects(self)

    @property
    def trees(self) -> TreeEdits:
        from forkctl.git.treeedit import TreeEdits

        return TreeEdits(self, self.objects, self.commits)

    @property
    def submodules(self) -> Submodules:
        from forkctl.git.submodules import Submodules

        return Submodules(self, self.objects)

    @property
    def commits(self) -> Commits:
        from forkctl.git.commits import Commits

        return Commits(self)

    @property
    def history(self) -> History:
        from forkctl.git.history import History

        return History(self)

    @property
    def patches(self) -> Patches:
        from forkctl.git.patches import Patches

        return Patches(self)

    @property
    def diffs(self) -> Diffs:
        from forkctl.git.patches import Diffs

        return Diffs(self)

    @property
    def refs(self) -> Refs:
        from forkctl.git.refs import Refs

        return Refs(self)

    @property
    def indexes(self) -> Indexes:
        from forkctl.git.index import Indexes

        return Indexes(self)

    @property
    def worktrees(self) -> Worktrees:
        from forkctl.git.worktree import Worktrees

        return Worktrees(self)

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
