"""apply(series, base): the fork's commits as a pure function of the base SHA and the patch bytes.

Each patch is applied to a private index loaded with the previous tree and committed with
`commit-tree`, author = committer = the patch's author and date. No checkout, no user index, and the
same inputs give the same SHAs on every machine.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from forkctl.git import GitRepo, Identity
from forkctl.series import Patch


@dataclass(frozen=True)
class AppliedPatch:
    patch: Patch
    commit: str


@dataclass(frozen=True)
class Conflict:
    """A patch that does not apply with `git apply --cached` on top of `parent`."""

    index: int  # position in the series, 0-based
    patch: Patch
    parent: str  # the commit it had to apply on
    message: str  # git apply's own words: which files and hunks failed


@dataclass
class BuildResult:
    base: str
    applied: list[AppliedPatch] = field(default_factory=list)
    conflict: Conflict | None = None

    @property
    def head(self) -> str:
        return self.applied[-1].commit if self.applied else self.base

    @property
    def complete(self) -> bool:
        return self.conflict is None


def identity_of(patch: Patch) -> Identity:
    return Identity(name=patch.author_name, email=patch.author_email, date=patch.date.isoformat())


def commit_patch(repo: GitRepo, parent: str, tree: str, patch: Patch) -> str:
    return repo.commit_tree(tree, [parent], patch.message, identity_of(patch))


def build_series(
    repo: GitRepo,
    base: str,
    patches: list[Patch],
    start: int = 0,
    parent: str | None = None,
    on_patch: Callable[[str], None] | None = None,
) -> BuildResult:
    """Apply `patches[start:]` onto `parent` (default `base`); stop at the first that does not apply."""
    result = BuildResult(base=base)
    head = parent or base
    with repo.private_index(head) as index:
        for position in range(start, len(patches)):
            patch = patches[position]
            ok, message = index.apply(patch.diff)
            if not ok:
                ok, message = index.apply_3way(patch.diff, repo.commit_info(head).tree)
            if not ok:
                result.conflict = Conflict(index=position, patch=patch, parent=head, message=message)
                return result
            head = commit_patch(repo, head, index.write_tree(), patch)
            result.applied.append(AppliedPatch(patch=patch, commit=head))
            if on_patch:
                on_patch(patch.subject)
    return result


def check_series(repo: GitRepo, base: str, patches: list[Patch]) -> list[tuple[Patch, str | None]]:
    """For each patch in order: None if it applies on the base plus the earlier ones, else git's message.

    A patch that fails is skipped, so later patches are still judged (as far as they can be alone).
    """
    verdicts: list[tuple[Patch, str | None]] = []
    with repo.private_index(base) as index:
        for patch in patches:
            ok, message = index.apply(patch.diff)
            verdicts.append((patch, None if ok else message.strip()))
    return verdicts
