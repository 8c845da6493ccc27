"""Can a fresh recursive clone fetch a pin? The URL that `.gitmodules` names must answer now (a listing
recorded when it last answered is no proof), and the SHA must be reachable from one of its branches or
tags, or the clone fails (the commit may exist only on someone's machine).

History questions are answered in commit-graph caches (commits only, no trees); the fork's graph borrows
upstream's, so that only the fork's own commits cross the network.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from forkctl.chain.model import LinkResult, Status
from forkctl.chain.sources import Remotes, Source
from forkctl.errors import BadInput
from forkctl.git import clonecache, remote
from forkctl.git import graph as gitgraph
from forkctl.git.graph import CommitGraph
from forkctl.git.repo import GitRepo
from forkctl.manifest import Manifest


class CommitGraphs(msgspec.Struct):
    """The commit-graph caches of the chain's URLs, each opened once and held for the check: a graph
    object keeps what it answered (branch tips, ancestry) and writes its facts when the check drops it."""

    manifest: Manifest
    upstream_url: str  # where the fork head was built from: the manifest's URL or --upstream-repo
    remotes: Remotes
    # The repository holding the manifest base's commit object: a new graph starts a little before it.
    base_repo: GitRepo | None = None
    base: str | None = None
    _bound: list[int | None] = msgspec.field(default_factory=list)
    _open: dict[str, CommitGraph] = msgspec.field(default_factory=dict)  # by URL

    def since(self) -> int | None:
        """Where a new commit graph starts (a Unix time): a month before the manifest base's commit
        date, read once a run and only when a graph is fetched (clonecache.py bounds and deepens)."""
        if not self._bound:
            repo, base = self.base_repo, self.base
            self._bound.append(gitgraph.bound_before(repo, base) if repo and base else None)
        return self._bound[0]

    def for_url(self, url: str) -> CommitGraph:
        """The commit-graph cache to answer `url`'s history questions in. The fork shares upstream's
        history: its graph borrows the upstream graph's objects (alternates) once that holds upstream's
        branch, so that the fork's fetch tells the server it has them and only the fork's own commits
        arrive."""
        if not remote.same_repo(url, self.manifest.fork.url) or remote.same_repo(url, self.upstream_url):
            return self._graph(url)
        lender = self.upstream()
        # A bounded lender would hand over commits whose parents this graph cannot know are cut off.
        lent = [lender.git_dir] if lender is not None and not (lender.git_dir / "shallow").is_file() else None
        return self._graph(url, lent)

    def _graph(self, url: str, alternates: list[Path] | None = None) -> CommitGraph:
        if url not in self._open or alternates:
            self._open[url] = clonecache.graph_for(url, alternates=alternates)
        return self._open[url]

    def upstream(self) -> CommitGraph | None:
        """The upstream commit graph holding the upstream branch as listed now (None: not listable)."""
        url = self.upstream_url
        try:
            refs = self.remotes.refs(url)
        except BadInput:
            return None
        ref = f"refs/heads/{self.manifest.upstream.branch}"
        graph = self._graph(url)
        if ref in refs and gitgraph.fetch_graph(graph, url, {ref: refs[ref]}, self.since):
            return graph
        return None


def check_reachable(
    link: LinkResult,
    url: str,
    sha: str,
    likely: tuple[str, ...],
    graphs: CommitGraphs,
    pending: dict[str, list[str]],
    merged_fix: str = "",
) -> None:
    """Add the link's `reachable` finding: `sha` is a tip this bump is about to push (`pending`), or is
    reachable from a listed branch or tag of `url` (the `likely` branches asked first). `merged_fix`,
    for a pin of a consumer's commit, is the way forward when that consumer merged it by squash or
    rebase and deleted its branch (the usual way a pin is stranded)."""
    for tip in pending.get(remote.normalise_url(url), []):
        if tip == sha:
            link.add(
                "reachable", Status.OK, "pending", f"{sha[:12]} is the tip of a branch this bump creates"
            )
            return
    try:
        listing = graphs.remotes.listing(url)
    except BadInput as exc:
        link.add("reachable", Status.UNREACHABLE, "no-remote", exc.message, exc.hint or "")
        return
    if listing.recorded_at:
        # A record may only speed a check up: the clone this check vouches for asks the URL now, and
        # a repository that is gone or silent fails it, whatever it answered before.
        link.add(
            "reachable",
            Status.UNREACHABLE,
            "cannot-reach",
            f"cannot reach {url} now: a fresh clone would fail ({listing.why}; its branches and tags "
            f"were last listed at {listing.recorded_at})",
            f"check the URL and the network, or pin a repository that answers (git ls-remote {url})",
        )
        return
    refs = listing.refs
    result = clonecache.tip_reachability(sha, refs) or clonecache.reachability(
        graphs.for_url(url), url, sha, refs, likely=likely, since=graphs.since
    )
    if result.reachable:
        link.add(
            "reachable", Status.OK, "ok", _reachable_from(sha, url, result, refs, likely, graphs.remotes)
        )
    else:
        link.add(
            "reachable",
            Status.UNREACHABLE,
            "unreachable",
            f"pinned {sha[:12]} is not reachable from any branch or tag of {url}: a fresh recursive clone "
            "cannot check it out (it may exist only on someone's machine)",
            (f"{merged_fix}; else " if merged_fix else "")
            + f"push it to a branch of {url} (git push {url} {sha[:12]}:refs/heads/<branch>), or pin a "
            "pushed commit",
        )


def _short(ref: str) -> str:
    return ref.removeprefix("refs/heads/").removeprefix("refs/tags/")


def _reachable_from(
    sha: str,
    url: str,
    found: clonecache.Reachability,
    listed: dict[str, str],
    likely: tuple[str, ...],
    remotes: Remotes,
) -> str:
    """Which ref the pin is reachable from, the one a reader would look at first (the branch the
    manifest names, else the URL's default branch), and, when every ref was searched, how many hold it."""
    named = found.refs[0]
    if len(found.refs) > 1:
        default = remotes.default_branch(url)
        wanted = [f"refs/heads/{b}" for b in (*likely, *([default] if default else []))]
        named = next((ref for ref in wanted if ref in found.refs), named)
        is_default = default is not None and named == f"refs/heads/{default}"
    else:
        is_default = False
    role = (
        " (the branch the manifest names)"
        if _short(named) in likely
        else " (its default branch)"
        if is_default
        else ""
    )
    said = f"{sha[:12]} is {'the tip of' if found.how == 'tip' else 'reachable from'} {_short(named)}{role} of {url}"
    if found.how == "likely":
        return said + " (asked first; its other branches were not searched)"
    if found.how == "tip":  # read from the listing: which other refs hold it was not asked
        return said + (f"; the tip of {len(found.refs)} of its refs" if len(found.refs) > 1 else "")
    return f"{said}; {_counted(found.refs, listed)}"


def _counted(refs: list[str], listed: dict[str, str]) -> str:
    """'6 of its 7 branches hold it' (and its tags, when it has any)."""
    branches = sum(ref.startswith("refs/heads/") for ref in listed)
    tags = len(listed) - branches
    held_branches = sum(ref.startswith("refs/heads/") for ref in refs)
    said = f"{held_branches} of its {branches} branches"
    if tags:
        said += f" and {len(refs) - held_branches} of its {tags} tags"
    return said + " hold it"


def recorded_branch_finding(source: Source, remotes: Remotes, link: LinkResult) -> None:
    """A consumer branch read at its URL from the listing recorded when the URL last answered is
    a finding: the URL does not answer now, so nobody can clone that branch (and its tip may have
    moved since)."""
    if source.local is not None or not link.role.startswith("branch "):
        return
    listing = remotes.listing(source.fetch_url)
    if listing.recorded_at:
        link.add(
            "reachable",
            Status.UNREACHABLE,
            "branch-recorded",
            f"cannot reach {source.fetch_url} now: {link.role.removeprefix('branch ')} is as recorded "
            f"at {listing.recorded_at} ({listing.why}); a fresh clone of it would fail",
            f"check the URL and the network (git ls-remote {source.fetch_url})",
        )


def base_unfetched(base: str, where: str, why: str, location_flag: str) -> BadInput:
    """The base could not be had: a server that was not reached is not one that lacks the commit."""
    if why and not remote.object_refused(why):
        return BadInput(
            f"could not reach {where} to fetch the manifest base {base[:12]}: {why}",
            hint=f"check the URL, the network and your access (git ls-remote must work), or pass "
            f"{location_flag} PATH to a local clone that has the base",
        )
    return BadInput(  # the server answered: it does not hand out that commit
        f"the manifest base {base} is not in {where}" + (f" (git: {why})" if why else ""),
        hint=f"pass {location_flag} PATH to a clone that has it (git fetch origin), or write the full SHA",
    )
