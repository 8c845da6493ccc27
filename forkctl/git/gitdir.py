"""A repository's git dir and the two ways to run git in it: what every part of `GitRepo` builds on.

The per-concern parts of `GitRepo` (objects, commits, history, refs, index, worktree, patches) derive
from `GitDir`, and the functions that take a repository ask for the narrowest part they use. How a
`GitDir` is found or made (rev-parse, init) is `repo.GitRepo`'s business.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from forkctl.git.runner import run, try_run

if TYPE_CHECKING:
    from forkctl.git.facts import Facts


class GitDir:
    """Runs git against one git dir (`--git-dir`): never its working tree or index, unless asked."""

    git_dir: Path
    path: Path  # the working tree's root; the git dir itself for a bare repository
    # git says so (core.bare): no main working tree, so no branch is checked out but in a linked one.
    bare: bool = False
    # A cache repository's answers recorded for later runs (git/facts.py); None for a user's clone.
    facts: Facts | None = None

    def git(
        self,
        args: list[str],
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
        timeout: float | None = None,
    ) -> str:
        return run(["--git-dir", str(self.git_dir), *args], env=env, stdin=stdin, timeout=timeout)

    def try_git(
        self,
        args: list[str],
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
        timeout: float | None = None,
    ) -> tuple[int, str, str]:
        return try_run(["--git-dir", str(self.git_dir), *args], env=env, stdin=stdin, timeout=timeout)
