"""Refs: resolving them, and moving them with compare-and-swap (a ref is never moved blindly
unless it is forkctl's own bookkeeping); which names may become branches."""

from __future__ import annotations

import re

from forkctl.errors import BadInput
from forkctl.git.gitdir import Part
from forkctl.git.runner import git
from forkctl.git.sha import Sha, parse_full_sha

ZERO_SHA = "0" * 40
# A name git's ref rules certainly accept as a branch (check-ref-format --branch), with no git process:
# components of letters, digits, `_`, `-` and `.` that start with a letter, digit or `_`, joined by
# single slashes, none ending in `.` or `.lock`, no `..` (see the test that holds it to git's answer).
_PLAIN_BRANCH_RE = re.compile(
    r"(?!.*\.\.)(?!.*\.(?:lock)?(?:/|$))[A-Za-z0-9_][A-Za-z0-9_.-]*(?:/[A-Za-z0-9_][A-Za-z0-9_.-]*)*"
)


def check_branch_name(name: str) -> str:
    """`name` when git accepts it as a new branch name and it cannot be mistaken for anything else.

    git's own rule (`check-ref-format --branch`) plus: no `@`, no leading `-`, no `refs/` prefix (which
    would create refs/heads/refs/heads/...), nothing a shell or terminal would treat specially.
    A plain name (`_PLAIN_BRANCH_RE`) is accepted without asking git.
    """
    if _PLAIN_BRANCH_RE.fullmatch(name) and name != "HEAD" and not name.startswith("refs/"):
        return name
    status, out, _ = git(["check-ref-format", "--branch", name], check=False).parts()
    if (
        status != 0
        or out.strip() != name
        or name in ("@", "HEAD")
        or name.startswith(("-", "refs/"))
        or any(ord(c) < 32 for c in name)
    ):
        raise BadInput(
            f"{name!r} is not a usable branch name",
            hint="pick a plain name such as farai/main (git check-ref-format --branch NAME must accept it)",
        )
    return name


class Refs(Part):
    """Reading and moving refs."""

    def ref_sha(self, ref: str) -> Sha | None:
        status, out, _ = self.repo.git(
            ["rev-parse", "--verify", "--quiet", "--end-of-options", ref], check=False
        ).parts()
        return parse_full_sha(out.strip()) if status == 0 else None

    def branch_sha(self, branch: str) -> Sha | None:
        return self.ref_sha(f"refs/heads/{branch}")

    def branch_tips(self, branch: str) -> list[Sha]:
        """Where a branch of this name points here: the local branch and each remote's tracking branch
        (`refs/heads/B`, `refs/remotes/<remote>/B`)."""
        out = self.repo.git(
            ["for-each-ref", "--format=%(objectname)", f"refs/heads/{branch}", f"refs/remotes/*/{branch}"]
        ).text
        return [sha for line in out.split() if (sha := parse_full_sha(line)) is not None]

    def refs_containing(self, commit: str, patterns: list[str]) -> list[str]:
        """The refs matching `patterns` (for-each-ref's prefixes) whose history holds `commit`."""
        out = self.repo.git(["for-each-ref", "--format=%(refname)", f"--contains={commit}", *patterns]).text
        return out.split()

    def update_ref(self, ref: str, new: str, old: str | None, reason: str) -> None:
        """Move `ref` to `new` only if it still points at `old` (ZERO_SHA/None: must not exist)."""
        self.repo.git(["update-ref", "-m", f"forkctl: {reason}", ref, new, old or ZERO_SHA])

    def set_ref(self, ref: str, new: str, reason: str) -> None:
        """Point `ref` at `new` whatever it held (for forkctl's own bookkeeping refs in its cache)."""
        self.repo.git(["update-ref", "-m", f"forkctl: {reason}", ref, new])

    def delete_ref(self, ref: str, old: str) -> None:
        self.repo.git(["update-ref", "-d", ref, old])

    def set_head(self, ref: str) -> None:
        self.repo.git(["symbolic-ref", "HEAD", ref])
