"""The clean path of a port without a git process per patch: a pick that git's merge has nothing to
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

from forkctl.git.merge import MergeResult
from forkctl.git.repo import GitRepo
from forkctl.git.sha import TreeSha
from forkctl.git.treeedit import GITLINK_MODE, Change


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
