"""A repository's git dir, the way to run git in it, and what it has answered: what every part of
`GitRepo` reads through.

`GitRepo` is a `GitDir` that hands out its parts (`repo.history`, `repo.refs`, ...): each a `Part`
holding the `GitDir` it reads, and the functions that take a repository ask for the narrowest part they
use. How a `GitDir` is found or made (rev-parse, init) is `repo.GitRepo`'s business.

A repository object owns its answers. What cannot change while it is open (an object is here, a full
commit's tree entries, "A is an ancestor of B" between full SHAs, the sections of a `.gitmodules`
blob) is kept on it, so a command that holds it asks git once; a later command opens the repository
again and asks again (or reads what a cache repository recorded on disk, `facts.py`). Nothing in the
git layer remembers anything at module level: there is no per-run state to clear.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from forkctl.git.runner import Completed, git

if TYPE_CHECKING:
    from forkctl.git.batch import ObjectReader
    from forkctl.git.facts import Facts
    from forkctl.git.objects import TreeEntry
    from forkctl.git.submodules import SubmoduleEntry
    from forkctl.git.treeedit import Item


class GitDir:
    """Runs git against one git dir (`--git-dir`): never its working tree or index, unless asked."""

    git_dir: Path
    path: Path  # the working tree's root; the git dir itself for a bare repository
    # git says so (core.bare): no main working tree, so no branch is checked out but in a linked one.
    bare: bool
    # A cache repository's answers recorded for later runs (git/facts.py); None for a user's clone.
    facts: Facts | None

    def __init__(self, git_dir: Path, path: Path | None = None, bare: bool = False) -> None:
        self.git_dir = git_dir
        self.path = git_dir if path is None else path
        self.bare = bare
        self.facts = None
        # Answers that cannot change while forkctl runs (objects are added, never taken away):
        self.present: set[str] = set()  # object names (and `<sha>^{commit}`) known to be here
        self.entries_of: dict[tuple[str, tuple[str, ...]], dict[str, TreeEntry]] = {}  # (full sha, paths)
        self.ancestry: set[tuple[str, str]] = set()  # (older, newer) full SHAs known to be ancestry
        self.sections_of: dict[str, list[SubmoduleEntry]] = {}  # `.gitmodules` blob -> its sections
        self.refused: dict[str, str] = {}  # `.gitmodules` blobs git's submodule code dies on -> why
        # Settings only forkctl writes (a cache's promisor remotes), once read or written.
        self.configured_remotes: set[str] = set()
        self.reader: ObjectReader | None = None  # one `cat-file --batch` for every object read
        self.trees_read: dict[str, list[Item]] = {}  # tree id -> its entries (git/treeedit.py)
        self.loose_objects: Path | None = None  # where loose objects go, once asked (git/commits.py)

    def git(
        self,
        args: list[str],
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
        timeout: float | None = None,
        check: bool = True,
    ) -> Completed:
        """`git --git-dir <this> <args>` (runner.git: GitFailed on failure unless `check=False`).

        Run from inside the git dir: git takes the current directory for the working tree of a non-bare
        repository addressed by `--git-dir`, and would read a `.gitattributes` found where forkctl was
        started (`* -diff` turns every exported hunk into a binary patch). In the git dir there is none,
        so every object-level answer is the one a bare clone gives."""
        return git(
            ["--git-dir", str(self.git_dir), *args],
            cwd=self.git_dir,
            env=env,
            stdin=stdin,
            timeout=timeout,
            check=check,
        )


class Part:
    """One concern of a repository (`GitRepo.history`, `.refs`, ...): the git dir it reads and nothing of
    its own. What it learns is kept on the `GitDir`, which every part of that repository shares."""

    def __init__(self, repo: GitDir) -> None:
        self.repo = repo
