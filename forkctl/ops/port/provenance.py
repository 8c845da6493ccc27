"""A pick's provenance proved against the upstream commit U it names, and U's revert in the range.

A name alone never decides (an amended pick carries more than U, and upstream may have rewritten U's
lines since): the pick's change is compared with U's own. Equal when their patch-ids are (`git patch-id
--stable`), or when U picked onto the pick's own parent gives the pick's tree (the interdiff is empty:
the pick is U as git merges it there, whatever context the older base had). Then the new base, which
holds U, holds the pick's change: `git rebase <new base>` would drop it the same way, by patch-id.
Otherwise, when U picks cleanly there, the pick's own lines are the rest (U's tree on the parent ->
the pick's tree): the interdiff, what a port carries.

U was reverted when, after it in the range the port crosses, a commit makes U's reverse change (the
patch-id of U's reversed diff) or says "This reverts commit U" and is `git revert U` on its parent; a
later commit making U's change again lands it anew. A reverted U is never proof, and a pick of it is
never re-applied without the person saying so.
"""

from __future__ import annotations

import msgspec

from forkctl.git.merge import cherry_pick, pick_change
from forkctl.git.repo import GitRepo
from forkctl.git.sha import TreeSha


class PickProof(msgspec.Struct, frozen=True):
    """What comparing a pick with the upstream commit its provenance names showed."""

    upstream_commit: str
    # The proof that the pick's change is U's ("patch-id: ...", "interdiff: ..."); "" when it is not.
    proof: str = ""
    # An amended pick: (U picked onto the pick's parent, the pick's tree), the change that is its own.
    own: tuple[TreeSha, TreeSha] | None = None
    own_lines: str = ""  # that change as a zero-context diff, for a person to read
    reverted_by: str | None = None  # the commit of the range that reverts U, when nothing re-lands it


def prove_pick(
    repo: GitRepo, upstream_commit: str, pick: str, pick_parent: str, pick_id: str, crossed: str
) -> PickProof | None:
    """Compare the pick (commit `pick` on `pick_parent`, patch-id `pick_id`) with upstream commit
    `upstream_commit`, and look for its revert in `crossed` (old base..target). None: U is a merge or
    a root commit, which no `-x` pick is compared with."""
    upstream = repo.commits.commit_info(upstream_commit)
    if len(upstream.parents) != 1:
        return None
    parent = upstream.parents[0]
    u_id, reverse_id = repo.patches.change_and_reverse_ids(upstream_commit, parent)
    reverted_by = _reverted_by(repo, (upstream_commit, parent, upstream.tree), (u_id, reverse_id), crossed)
    if pick_id and pick_id == u_id:
        return PickProof(
            upstream_commit, f"patch-id: the patch's equals {upstream_commit}'s", reverted_by=reverted_by
        )
    on_parent = cherry_pick(repo, upstream_commit, parent, pick_parent)
    pick_tree = repo.commits.commit_info(pick).tree
    if not on_parent.clean:
        return PickProof(upstream_commit, reverted_by=reverted_by)
    if on_parent.tree == pick_tree:
        proof = f"interdiff: {upstream_commit} picked onto the patch's parent gives the patch's tree"
        return PickProof(upstream_commit, proof, reverted_by=reverted_by)
    own_lines = repo.diffs.changed_lines_text(on_parent.tree, pick_tree)
    return PickProof(
        upstream_commit, own=(on_parent.tree, pick_tree), own_lines=own_lines, reverted_by=reverted_by
    )


def _reverted_by(
    repo: GitRepo, upstream: tuple[str, str, TreeSha], ids: tuple[str, str], crossed: str
) -> str | None:
    """The commit of `crossed` that last reverted U (`upstream`: U, its parent, its tree; `ids`: U's
    patch-id and its reverse's), None when none did or a later commit (or U itself) made U's change."""
    commit, parent, _ = upstream
    u_id, reverse_id = ids
    paths = sorted(repo.diffs.changed_paths(parent, commit))
    if not paths:
        return None
    said = repo.history.commits_saying_they_revert(commit, crossed)
    reverted_by: str | None = None
    for later, later_id in repo.patches.commit_patch_ids(crossed, touching=paths).items():
        if later == commit or later_id == u_id:
            reverted_by = None
        elif later_id == reverse_id or (later in said and _is_revert(repo, upstream, later)):
            reverted_by = later
    return reverted_by


def _is_revert(repo: GitRepo, upstream: tuple[str, str, TreeSha], later: str) -> bool:
    """Is `later` `git revert U` made on its own parent (the reverse of U merged there, 3-way)?"""
    commit, parent, tree = upstream
    info = repo.commits.commit_info(later)
    if len(info.parents) != 1:
        return False
    date = (info.committer or info.author).date
    reverse = pick_change(repo, (tree, repo.commits.commit_info(parent).tree), commit, info.parents[0], date)
    return reverse.clean and reverse.tree == info.tree
