"""The fork end of the chain: the nearest consumer's pin against the fork head, and the fork branch.

The common wrong pins (the base, an unpatched upstream commit) are told from the upstream commit graph
alone; anything else is read with its history and trees and diagnosed in forkhead.py.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from forkctl.chain import forkbase
from forkctl.chain.forkhead import ForkContext, diagnose_fork_pin, publish_merge_finding, unpatched_upstream
from forkctl.chain.model import ChainFinding, LinkResult, Status
from forkctl.chain.reachable import CommitGraphs
from forkctl.chain.sources import CloneOrCache, Remotes, local_branch_tip, parse_location
from forkctl.errors import BadInput
from forkctl.git import clonecache, remote
from forkctl.git import graph as gitgraph
from forkctl.git.repo import GitRepo
from forkctl.git.sha import TreeSha
from forkctl.manifest import Manifest


def check_fork_pin(
    link: LinkResult, pinned: str, url: str | None, fork: ForkContext, graphs: CommitGraphs
) -> None:
    """Add the fork link's `pin` finding(s): the pin is the fork head, or why it is not."""
    manifest = graphs.manifest
    link.expected = fork.head
    if pinned == fork.head:
        link.add(
            "pin",
            Status.OK,
            "ok",
            f"pins the fork head {pinned[:12]} = {manifest.upstream.repo}@{fork.base[:12]} + "
            f"{len(fork.patches)} patches",
        )
        return
    upstream = _upstream_finding(pinned, fork, graphs)
    if upstream is not None:
        link.findings.append(upstream)
        return
    fork_cache = _fork_cache_with(pinned, url, fork, manifest)
    if fork_cache is not None:
        link.findings += _judge(
            msgspec.structs.replace(fork, upstream_repo=fork_cache), pinned, fork.head_tree(), manifest
        )
        return
    upstream_repo = fork.upstream_repo
    urls = [u for u in (url, manifest.fork.url) if u]
    reasons = []
    if (
        not upstream_repo.objects.has_object(f"{pinned}^{{commit}}")
        or (upstream_repo.git_dir / "shallow").is_file()
    ):
        fork.upstream_tip(manifest.upstream.branch)  # unshallows the upstream repository first
        for candidate in urls:
            try:
                why = clonecache.fetch_sha_why(upstream_repo, candidate, pinned, depth=None)
            except BadInput as exc:  # a refused URL (e.g. one starting with '-') is a finding
                link.add("pin", Status.MISMATCH, "url-refused", exc.message, exc.hint or "")
                return
            if why is None:
                break
            reasons.append(f"{candidate}: {why}")
    if not upstream_repo.objects.has_object(f"{pinned}^{{commit}}"):
        said = f" ({'; '.join(reasons)})" if reasons else ""
        link.add(
            "pin",
            Status.MISMATCH,
            "unreadable",
            f"pins {pinned[:12]}, which neither {' nor '.join(urls)} hands out{said}; the fork head is "
            f"{fork.head[:12]}",
            "forkctl bump-bridge",
        )
        return
    link.findings += _judge(fork, pinned, fork.head_tree(), manifest)


def _judge(fork: ForkContext, pinned: str, head_tree: TreeSha, manifest: Manifest) -> list[ChainFinding]:
    """The pin, read in `fork.upstream_repo`: the fork head's published merge (forkctl publish), or why not."""
    published = publish_merge_finding(fork.upstream_repo, pinned, fork.head, head_tree, fork.owned)
    return [published] if published is not None else diagnose_fork_pin(fork, pinned, manifest.upstream.branch)


def _upstream_finding(pinned: str, fork: ForkContext, graphs: CommitGraphs) -> ChainFinding | None:
    """The common diagnosis, from the upstream commit graph alone (commits only, no trees): the pin
    is the base or an unpatched upstream commit. None when it is neither (or the graph cannot say):
    the full diagnosis follows, with trees."""
    branch = graphs.manifest.upstream.branch
    if pinned == fork.base:
        return diagnose_fork_pin(fork, pinned, branch)[0]
    if fork.upstream_local is not None:
        return None  # a local clone answers history questions already, without the network
    graph = graphs.upstream()
    tip = gitgraph.held_branch_tip(graph, f"refs/heads/{branch}") if graph else None
    # `reaches` deepens a bounded graph when the bound could hide the commit or the path.
    if graph is None or tip is None or not graph.history.reaches(tip, pinned):
        return None
    # The base is usually on the branch already; a base elsewhere (a release branch) is fetched.
    if not clonecache.fetch_graph_of(graph, fork.upstream_url, fork.base):
        return None
    return unpatched_upstream(graph.history, pinned, fork)


def _fork_cache_with(pinned: str, url: str | None, fork: ForkContext, manifest: Manifest) -> GitRepo | None:
    """The fork's cache when the reachability check fetched its history there (borrowing upstream's
    objects) and it holds `pinned`, the base and upstream's tip: the diagnosis reads it there rather
    than fetching the fork's own commits a second time, into the upstream repository."""
    if url is None or not remote.same_repo(url, manifest.fork.url):
        return None
    cache = clonecache.cache_repo_for(url)
    if cache.git_dir == fork.upstream_repo.git_dir or (cache.git_dir / "shallow").is_file():
        return None
    if cache.objects.missing_objects([pinned]):
        return None
    tip = fork.upstream_tip(manifest.upstream.branch)
    return None if cache.objects.missing_objects([fork.base, *([tip] if tip else [])]) else cache


# --- the fork branch ------------------------------------------------------------------------------


def fork_branch_notes(
    manifest: Manifest, fork: ForkContext, remotes: Remotes, fork_location: str | None
) -> list[ChainFinding]:
    """The fork branch itself: is it the reproducible head, and does its .fork-base.json agree?"""
    branch = manifest.fork.branch
    local, _, url = parse_location(fork_location) if fork_location else (None, None, None)
    try:
        repo, head = _fork_branch(manifest, fork, remotes, local, url or manifest.fork.url)
    except BadInput as exc:
        return [ChainFinding("fork-branch", Status.OK, "skipped", f"fork branch not read: {exc.message}")]
    if head is None or repo is None:
        return [ChainFinding("fork-branch", Status.OK, "skipped", f"the fork has no branch {branch}")]
    published = _published_note(repo, head, fork) if head != fork.head else None
    if head == fork.head:
        notes = [
            ChainFinding("fork-branch", Status.OK, "ok", f"{branch} is the reproducible head {head[:12]}")
        ]
    elif published is not None:
        notes = [ChainFinding("fork-branch", Status.OK, "ok", f"{branch} is {published}")]
    else:
        notes = [
            ChainFinding(
                "fork-branch",
                Status.OK,
                "behind",
                f"{branch} is {head[:12]}, not the reproducible head {fork.head[:12]} "
                "(consumers must pin the latter)",
            )
        ]
    raw = repo.objects.read_blob(head, forkbase.FORK_BASE_FILE)
    if raw is not None:
        notes.append(_fork_base_note(raw, manifest))
    return notes


def _published_note(repo: GitRepo, head: str, fork: ForkContext) -> str | None:
    """'<tip>, the published merge of the reproducible head <R>' when the branch tip is that (else None)."""
    found = publish_merge_finding(repo, head, fork.head, fork.head_tree(), fork.owned)
    if found is None or found.status != Status.OK:
        return None
    return f"{head[:12]}, the published merge of the reproducible head {fork.head[:12]} (forkctl publish)"


def _fork_branch(
    manifest: Manifest, fork: ForkContext, remotes: Remotes, local: Path | None, url: str
) -> tuple[GitRepo | None, str | None]:
    """(repository holding it, tip) of the fork branch: in the --fork-repo clone, else at the URL, with
    its .fork-base.json readable."""
    branch = manifest.fork.branch
    if local is not None:
        repo = GitRepo(local)
        return repo, local_branch_tip(repo.refs, branch)
    head = remotes.refs(url).get(f"refs/heads/{branch}")
    # The reproducible head is already in the upstream repository (built there): nothing to fetch.
    objects = (
        CloneOrCache(fork.upstream_url, _cache=fork.upstream_repo) if head == fork.head else CloneOrCache(url)
    )
    found = objects.repo_with(head) if head else None
    if found is not None and head is not None:
        record = found.objects.tree_entry(head, forkbase.FORK_BASE_FILE)
        objects.ensure_blobs(found, [record.sha] if record and record.kind == "blob" else [])
    return found, head


def _fork_base_note(raw: bytes, manifest: Manifest) -> ChainFinding:
    """The fork branch's .fork-base.json against the manifest."""
    branch = manifest.fork.branch
    where = f"{manifest.fork.repo}@{branch}:{forkbase.FORK_BASE_FILE}"
    try:
        problems = forkbase.cross_check(forkbase.parse(raw, where), manifest)
    except BadInput as exc:
        problems = [exc.message]
    if not problems:
        return ChainFinding("fork-base", Status.OK, "ok", f"{where} agrees with the manifest")
    return ChainFinding(
        "fork-base",
        Status.MISMATCH,
        "fork-base-mismatch",
        f"{where} disagrees with the manifest: {'; '.join(problems)}",
        f"in a checkout of {branch}: forkctl fork-base --write, then commit and push the file",
    )
