"""Where a bump step starts: the consumer branch, or the bump branch already made from it.

Consumers merge a bump's pull request their own way: a merge commit, a squash or a rebase, the source
branch deleted or not (the Bridge squashes and deletes). Whichever they chose, the consumer branch then
pins the new commit itself, and that branch commit is what the next consumer must pin: a bump commit
on the deleted branch is reachable from nothing any more. So a step whose commit would change nothing
on the consumer branch is done (no commit, no branch; the next consumer pins the branch head).

Otherwise the bump branch may exist already (pushed by an earlier run: at the URL; in a user's clone:
its own branch). When it is built on the consumer branch head, the step builds on it (one commit on
top, or none when it already pins the new commit), so an open pull request moves forward and nothing
is ever forced; a branch made from an older consumer head is the user's to update or delete. forkctl's
cache is never the place a branch is looked up: its local branches are forkctl's bookkeeping, set from
what the URL holds, so a branch the URL deleted is simply made again.
"""

from __future__ import annotations

import msgspec

from forkctl.chain import forward
from forkctl.chain.reachable import CommitGraphs
from forkctl.chain.sources import Source
from forkctl.git import clonecache
from forkctl.git.repo import GitRepo
from forkctl.manifest import Consumer


class BranchStart(msgspec.Struct, frozen=True):
    """Where the bump branch is now (`existing`, None: nowhere) and whether the step builds on it."""

    existing: str | None
    builds_on_existing: bool  # `existing` contains the consumer branch head: one commit on top of it
    in_cache: bool  # the repository committed in is forkctl's cache (its branch is the URL's)


def bump_branch_now(
    source: Source, repo: GitRepo, head: str, branch: str, graphs: CommitGraphs
) -> BranchStart:
    """The bump `branch` where the step will make its commit: in a user's clone its own branch, else at
    the consumer's URL (fetched into the cache); whether it is built on the consumer branch `head`."""
    ref = f"refs/heads/{branch}"
    existing: str | None
    if source.local is not None:
        existing = repo.refs.ref_sha(ref)
        contained = existing is not None and forward.contains(
            repo, source.fetch_url, branch, existing, head, graphs
        )
        return BranchStart(existing, bool(contained), in_cache=False)
    existing = graphs.remotes.refs(source.fetch_url).get(ref)
    if existing is None or existing == head:
        return BranchStart(existing, existing is not None, in_cache=True)
    if clonecache.fetch_sha_why(repo, source.fetch_url, existing) is not None:
        return BranchStart(existing, False, in_cache=True)  # apply_step refuses it, naming the branch
    contained = forward.contains(repo, source.fetch_url, branch, existing, head, graphs)
    return BranchStart(existing, bool(contained), in_cache=True)


def merged_bump(
    previous: Consumer, repo: GitRepo, url: str, head: str, pinned: str, graphs: CommitGraphs
) -> bool:
    """Is `pinned`, the `previous` consumer's commit a later consumer pins now, a bump that the branch
    head `head` holds as its squash or rebase merge? It is when its one parent is in the branch's
    history, it changes nothing but the gitlink (and `.gitmodules`), and the branch pins what it pins:
    then moving on from it to the branch loses nothing, although no branch reaches it. False when
    that cannot be read (the forward rule then judges it as any other pin)."""
    if repo.objects.missing_commits([pinned]):
        return False
    parents = repo.commits.commit_info(pinned).parents
    if len(parents) != 1 or repo.objects.missing_commits(parents):
        return False
    gitlink = previous.gitlink
    pins = [repo.objects.tree_entries(commit, [gitlink]).get(gitlink) for commit in (pinned, head)]
    if pins[0] is None or pins[1] is None or pins[0].sha != pins[1].sha:
        return False
    if not repo.diffs.changed_paths(parents[0], pinned) <= {gitlink, ".gitmodules"}:
        return False
    return bool(forward.contains(repo, url, previous.branch, head, parents[0], graphs))
