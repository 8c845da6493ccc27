"""The walk over a series that the port's run, its preview (`status --onto`, `sync`) and the bisection
of a first break share: each patch judged on the head the patches before it made, what applies
committed there, a drop or a conflict leaving the head as it was (`walk`, one `Judged` per patch; the
run stops at the first conflict, the preview goes on past it); and the old series it picks from
(`old_series`: each patch's commit on the old base).

Along the walk, the clean path without a git process per patch: a pick that git's merge has nothing to
decide in is made in this process.

Picking the patch's old commit C (parent P) onto the head H is the 3-way merge of H and C with base P.
Where a file is the same in H as in P, git's merge takes C's version; where C leaves a file as in P,
it takes H's. So when C only modifies files (no file added, deleted or turned into a folder: no
rename or folder rename can be detected on C's side) and each of those files is the same in H as in P
(so none is a rename source on H's side either), the merge is H with those files replaced by C's:
clean, and nothing else moves. That is what `Aligned.pick` writes (`git/treeedit.py`: the changed
trees as loose objects), and what `git merge-tree` and `git rebase` give (tests/test_port_quick.py
compares every commit with rebase's).

"The same in H as in P" is known without reading the files: `differ` holds every path where the head
may differ from the parent of the next patch. It starts as the paths that differ between the first
patch's parent and the head (`git diff --name-only`, one process: upstream's changes on a fresh port);
after each patch it grows by the patch's own files (its parent moves on by them) and by whatever the
head changed beyond a plain replacement (a merge by git, a partial, an own-lines pick); a pick made
here changes the head exactly at the patch's files, where head and parent then agree again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Protocol

import msgspec

from forkctl.git.merge import MergeResult
from forkctl.git.repo import GitRepo
from forkctl.git.sha import Sha, TreeSha
from forkctl.git.treeedit import GITLINK_MODE, Change
from forkctl.ops import replay
from forkctl.ops.replay import CommitBatch
from forkctl.series import Patch, Series

if TYPE_CHECKING:  # the judge uses the picks made here: it imports this module, not the other way
    from forkctl.ops.port.judge import PatchVerdict


def old_series(
    repo: GitRepo, old_base: str, series: Series, branch_tip: str | None = None
) -> tuple[list[str | None], str | None]:
    """apply(old base, series): the old commit of each patch (None past a failure) and the old head.
    When `branch_tip` already is that (the usual case: the branch forkctl built), it is taken as is."""
    reused = replay.existing_build(repo, old_base, series.patches, branch_tip) if branch_tip else None
    if reused is not None:
        return [a.commit for a in reused], reused[-1].commit if reused else old_base
    old = replay.build_series(repo, Sha(old_base), series.patches)  # State.old_base: checked on load
    commits: list[str | None] = [a.commit for a in old.applied]
    commits += [None] * (len(series.patches) - len(commits))
    return commits, (old.head if old.complete else None)


class Aligned:
    """The paths where the head and the next patch's parent may differ, kept along one port run."""

    def __init__(self, repo: GitRepo, parent: str, head: str, known: set[str] | None = None) -> None:
        """`parent`: the old commit the next patch was built on; `head`: what it is picked onto;
        `known`: the paths that differ between them when the caller has them already."""
        self.repo = repo
        self.differ = set(known) if known is not None else repo.diffs.changed_paths(parent, head)

    def changes(self, parent_tree: TreeSha, old_tree: TreeSha) -> list[Change]:
        """What the patch's old commit changes (tree of its parent to its own tree)."""
        return self.repo.trees.tree_changes(parent_tree, old_tree)

    def pick(self, changes: list[Change], head_tree: TreeSha) -> TreeSha | None:
        """The merged tree when git's merge has nothing to decide (see the module), else None."""
        if not changes:
            return None  # an empty commit: the judge's merge decides what it means
        replaced = {}
        for change in changes:
            if change.old is None or change.new is None or change.path in self.differ:
                return None
            if GITLINK_MODE in (change.old.mode, change.new.mode):
                return None  # a gitlink: git's merge has its own rules for submodules
            replaced[change.path] = change.new
        return self.repo.trees.replace_files(head_tree, replaced)

    def advance(self, changes: list[Change], head_tree: TreeSha, new_head_tree: TreeSha, quick: bool) -> None:
        """After a patch: the parent moved on by `changes`; the head from `head_tree` to
        `new_head_tree` (`quick`: by `pick`, exactly at those files, where both now agree)."""
        if quick:
            return
        self.differ.update(change.path for change in changes)
        if new_head_tree != head_tree:
            self.differ.update(
                change.path for change in self.repo.trees.tree_changes(head_tree, new_head_tree)
            )


class QuickPicks:
    """The in-process picks of one port run over the old commits (None past a patch that was not
    built on the old base: from there on git merges every patch)."""

    def __init__(self, repo: GitRepo, aligned: Aligned, old_base: str, old_commits: list[str | None]) -> None:
        self.repo, self.aligned = repo, aligned
        self.old_base, self.old_commits = old_base, old_commits
        self._changes: dict[int, list[Change]] = {}
        self._picked: dict[int, TreeSha] = {}  # position -> the tree picked here

    def changes(self, position: int) -> list[Change] | None:
        """What the old commit at `position` changes, None when there is none (or no parent)."""
        old = self.old_commits[position]
        parent = self.old_commits[position - 1] if position > 0 else self.old_base
        if old is None or parent is None:
            return None
        if position not in self._changes:
            trees = self.repo.trees.commit_tree_id(parent), self.repo.trees.commit_tree_id(old)
            self._changes[position] = self.aligned.changes(*trees)
        return self._changes[position]

    def pick(self, position: int, head_tree: TreeSha) -> MergeResult | None:
        """The patch at `position` merged onto `head_tree` here, when git's merge has nothing to decide."""
        changes = self.changes(position)
        tree = self.aligned.pick(changes, head_tree) if changes is not None else None
        if tree is None:
            self._picked.pop(position, None)
            return None
        self._picked[position] = tree
        return MergeResult(tree=tree, clean=True)

    def picked(self, position: int, tree: TreeSha | None) -> bool:
        """Whether the patch at `position` was picked here as `tree`: its files on the head were its
        parent's, so it also applies there as written (plain `git apply`)."""
        return tree is not None and self._picked.get(position) == tree

    def advance(self, position: int, head_tree: TreeSha, new_head_tree: TreeSha) -> bool:
        """Account for the patch at `position` having moved the head from `head_tree` to
        `new_head_tree`; False once the picks here cannot go on (a patch with no old commit)."""
        changes = self.changes(position)
        if changes is None:
            return False
        quick = self._picked.get(position) == new_head_tree != head_tree
        self.aligned.advance(changes, head_tree, new_head_tree, quick)
        return True


class Judging(Protocol):
    """What the walk asks of a judge (`judge.Judge`, started by `judge.walk_series`; or the bisection's
    merges alone, `bisect.MergesOnly`)."""

    repo: GitRepo
    quick: QuickPicks | None  # the in-process picks along this walk, None when git merges every patch

    def judge(self, position: int, patch: Patch, head: str, head_tree: TreeSha) -> PatchVerdict: ...


class Judged(msgspec.Struct, frozen=True):
    """One patch of a walk: its verdict on the head the patches before it made, and the head after it."""

    position: int
    patch: Patch
    verdict: PatchVerdict
    head: str  # the commit the next patch meets: this one's when it applied (and the walk commits)
    head_tree: TreeSha  # that head's tree: the patch's when it applied, else the one it was judged on
    plain: bool = False  # applied, and applies as written there too (plain `git apply`; asked: `walk`)


Tell = Callable[[int, Patch], None]  # told each patch (its position) before it is judged


def walk(
    judge: Judging,
    patches: list[Patch],
    start: int,
    head: tuple[str, TreeSha],
    batch: CommitBatch | None = None,
    plain: bool = False,
    tell: Tell | None = None,
) -> Iterator[Judged]:
    """Judge `patches[start:]` in order on `head` (commit, tree) and what the ones before made of it.

    What applies is committed on the head with the patch's own message and identity, in `batch`
    (written when the caller flushes it, before anything names them); without a batch only the tree
    moves and every patch is merged onto the same commit (the bisection's questions). A drop or a
    conflict leaves the head as it was: the conflicting patch is left out of what the later ones meet.
    `plain`: also ask whether each applied patch applies as written (one `git apply --check` where the
    pick was not made in this process)."""
    commit, tree = head
    for position in range(start, len(patches)):
        patch = patches[position]
        if tell is not None:
            tell(position, patch)
        verdict = judge.judge(position, patch, commit, tree)
        moved = verdict.tree if verdict.kind == "applied" and verdict.tree is not None else tree
        applies = plain and judge.quick is not None and judge.quick.picked(position, verdict.tree)
        if judge.quick is not None and not judge.quick.advance(position, tree, moved):
            judge.quick = None  # a patch with no old commit: git merges every patch from here on
        if verdict.kind == "applied":
            if plain and not applies:
                with judge.repo.indexes.private_index(tree) as index:
                    applies = index.apply_check(patch.diff)
            commit = batch.make(commit, moved, patch) if batch is not None else commit
        tree = moved
        yield Judged(position, patch, verdict, commit, tree, plain=applies)
