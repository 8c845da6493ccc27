"""Where the chain's commits come from: the consumers' sources, their object stores, their branches.

A consumer is found in a local clone (read only) or at its URL (through the cache, fetched one commit at
a time); which consumers to check is given (`--consumer`) or the manifest's (a consumer checkout we run
in is judged on its own instead: chain/undertest.py). Both the check and the bump start from a consumer
commit named here: the check from what a source names (a clone's HEAD or REV, a URL's branch or SHA),
the bump from the consumer branch itself.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from forkctl.chain.model import Progress
from forkctl.errors import BadInput
from forkctl.git import clonecache, remote
from forkctl.git.repo import GitRepo
from forkctl.git.sha import is_full_sha
from forkctl.git.submodules import SubmoduleEntry
from forkctl.manifest import Consumer, Manifest

if TYPE_CHECKING:
    from forkctl.git.refs import Refs


class CloneOrCache(msgspec.Struct):
    """A repository's objects: a local clone first (read only), then the cache for its URL."""

    url: str
    local: GitRepo | None = None
    _cache: GitRepo | None = None
    why: str = ""  # git's reason when `repo_with` last found nothing ("Could not resolve host", ...)

    def cache(self) -> GitRepo:
        if self._cache is None:
            self._cache = clonecache.cache_repo_for(self.url)
        return self._cache

    def ensure_blobs(self, repo: GitRepo, blobs: list[str]) -> None:
        """Make the blobs `blobs` of `repo` readable: one explicit fetch for those the cache lacks
        (never git's lazy fetch: one round trip per blob, through a URL without credentials). A local
        clone is read as it is."""
        if blobs and repo is self._cache:
            clonecache.fetch_objects(repo, self.url, blobs)

    def gitmodules(self, repo: GitRepo, blob: str) -> list[SubmoduleEntry]:
        """The sections of the `.gitmodules` blob `blob` of `repo`: as parsed before (this run, or
        recorded by an earlier one), else parsed, the cache's blob fetched first when it lacks it."""
        recorded = repo.submodules.recorded_gitmodules(blob)
        if recorded is not None:
            return recorded
        self.ensure_blobs(repo, [blob])
        return repo.submodules.parse_gitmodules(blob)

    def prefetch(self, shas: list[str]) -> None:
        """Fetch those of the commits `shas` that neither the local clone nor the cache holds, in one
        request (each arrives once, however many trees they share); `repo_with` then finds them."""
        if self.local is not None:
            shas = self.local.objects.missing_commits(shas)  # one process for them all
        if shas:  # a local clone that holds them all needs no cache repository
            clonecache.fetch_commits(self.cache(), self.url, shas)

    def holding(self, sha: str) -> GitRepo | None:
        """The local clone or the cache when it already holds commit `sha` (nothing is fetched)."""
        if self.local is not None and self.local.objects.has_object(f"{sha}^{{commit}}"):
            return self.local
        cache = self.cache()
        return cache if cache.objects.has_object(f"{sha}^{{commit}}") else None

    def repo_with(self, sha: str, extra_urls: tuple[str, ...] = ()) -> GitRepo | None:
        """A repository that holds commit `sha`, fetching it (depth 1) when none does yet."""
        if self.local is not None and self.local.objects.has_object(f"{sha}^{{commit}}"):
            return self.local
        cache = self.cache()
        reasons = []
        for url in (self.url, *extra_urls):
            why = clonecache.fetch_sha_why(cache, url, sha)
            if why is None:
                return cache
            reasons.append(f"{url}: {why}" if extra_urls else why)
        self.why = "; ".join(reasons)
        return None


class Remotes(msgspec.Struct):
    """Each URL's branches and tags, listed once a run (or, when the URL does not answer, as recorded)."""

    progress: Progress
    _listings: dict[str, remote.Listing] = msgspec.field(default_factory=dict)
    _defaults: dict[str, str | None] = msgspec.field(default_factory=dict)

    def default_branch(self, url: str) -> str | None:
        """The branch `HEAD` of `url` names (None: the server does not say), asked once a run."""
        key = remote.normalise_url(url)
        if key not in self._defaults:
            self._defaults[key] = remote.default_branch(url)
        return self._defaults[key]

    def listing(self, url: str) -> remote.Listing:
        key = remote.normalise_url(url)
        if key not in self._listings:
            self.progress(f"listing the branches and tags of {url}")
            listing = remote.listed_refs(url)
            if listing.recorded_at:
                self.progress(
                    f"{url} did not answer ({listing.why}); using its branches and tags as recorded "
                    f"at {listing.recorded_at}"
                )
            self._listings[key] = listing
        return self._listings[key]

    def refs(self, url: str) -> dict[str, str]:
        return self.listing(url).refs


class Source(msgspec.Struct):
    """Where to find one consumer: its manifest entry, and optionally a local checkout and revision."""

    consumer: Consumer
    local: Path | None = None
    rev: str | None = None
    url: str | None = None  # overrides consumer.url as the place to fetch from (not as its identity)
    label: str | None = None  # how the report names the commit (default: its rev or branch)

    @property
    def fetch_url(self) -> str:
        return self.url or self.consumer.url

    def objects(self) -> CloneOrCache:
        return CloneOrCache(url=self.fetch_url, local=GitRepo(self.local) if self.local else None)


def parse_location(value: str) -> tuple[Path | None, str | None, str | None]:
    """`PATH`, `PATH@REV` or a URL -> (local path, rev, url)."""
    if "@" in value:
        head, _, rev = value.rpartition("@")
        if head and Path(head).exists():
            return Path(head), rev or None, None
        if "://" in head and rev and ":" not in rev:
            return None, rev, head  # URL@BRANCH or URL@SHA
    if Path(value).exists():
        return Path(value), None, None
    if "://" in value or ":" in value:
        return None, None, value
    raise BadInput(
        f"{value!r} is neither an existing path nor a URL", hint="give a clone's path, PATH@REV or a URL"
    )


# --- the commit a check or a bump starts from ---------------------------------------------------------


def local_branch_tip(refs: Refs, branch: str, remotes: tuple[str, ...] = ("origin",)) -> str | None:
    """`branch` in a local clone: its own branch, else its remote-tracking copy (first remote first)."""
    for ref in (f"refs/heads/{branch}", *(f"refs/remotes/{name}/{branch}" for name in remotes)):
        sha = refs.ref_sha(ref)
        if sha:
            return sha
    return None


def _fetched_tip(objects: CloneOrCache, refs: dict[str, str], branch: str) -> str | None:
    """The tip of `branch` among a URL's listed `refs`, fetched into the objects (None: no such branch)."""
    sha = refs.get(f"refs/heads/{branch}")
    if sha is not None and objects.repo_with(sha) is None:
        raise BadInput(f"cannot fetch {sha[:12]} from {objects.url}: {objects.why}")
    return sha


def planned_commit(source: Source, objects: CloneOrCache, remotes: Remotes) -> str | None:
    """The commit `commit_to_check` will start from when it is at the source's URL (a full SHA given,
    else the branch tip as listed), without fetching it; None for a local clone or an unlisted branch."""
    if objects.local is not None:
        return None
    if is_full_sha(source.rev):
        return source.rev
    return remotes.refs(source.fetch_url).get(f"refs/heads/{source.rev or source.consumer.branch}")


def commit_to_check(source: Source, objects: CloneOrCache, remotes: Remotes) -> tuple[str, str]:
    """(commit, role) a check starts from: what --consumer names (a clone's REV, else its HEAD: what is
    checked out is what is tested; a URL's SHA or BRANCH), else the consumer branch at its URL."""
    if objects.local is not None:
        rev = source.rev or "HEAD"
        sha = objects.local.objects.resolve_commit(rev)
        if sha is None:
            raise BadInput(
                f"{source.local}: {rev!r} is not a commit", hint="give PATH@REV with an existing rev"
            )
        return sha, source.label or f"{rev} of {source.local}"
    if is_full_sha(source.rev) and objects.repo_with(source.rev):
        return source.rev, source.label or source.rev[:12]
    branch = source.rev or source.consumer.branch
    tip = _fetched_tip(objects, remotes.refs(source.fetch_url), branch)
    if tip is None:
        raise BadInput(
            f"{source.fetch_url} has no branch {branch!r} (consumer {source.consumer.name})",
            hint="fix consumers[].branch in the manifest, or pass --consumer PATH to a local checkout",
        )
    return tip, f"branch {branch}"


def branch_to_bump(source: Source, progress: Progress) -> tuple[GitRepo, str]:
    """(repository to commit in, head of the consumer branch) a bump starts from: the branch in a local
    clone, else at the URL (fetched into its cache)."""
    branch = source.consumer.branch
    objects = source.objects()
    if objects.local is not None:
        head = local_branch_tip(objects.local.refs, branch)
        if head is None:
            raise BadInput(
                f"{source.local} has no branch {branch!r} (nor origin/{branch})",
                hint=f"{shlex.join(['git', 'fetch', 'origin', branch])} in that clone, or pass PATH@REV",
            )
        return objects.local, head
    progress(f"fetching {branch} of {source.fetch_url}")
    listing = remote.listed_refs(source.fetch_url)
    if listing.recorded_at:
        progress(
            f"{source.fetch_url} did not answer ({listing.why}); using its branch {branch} as recorded "
            f"at {listing.recorded_at}"
        )
    head = _fetched_tip(objects, listing.refs, branch)
    if head is None:
        raise BadInput(
            f"{source.fetch_url} has no branch {branch!r}", hint="fix consumers[].branch in the manifest"
        )
    return objects.cache(), head


# --- which consumers ------------------------------------------------------------------------------


def default_sources(manifest: Manifest, locations: list[str]) -> list[Source]:
    """--consumer values (nearest first), else every consumer's branch at its manifest URL."""
    consumers = manifest.consumers
    if not consumers:
        raise BadInput("the manifest lists no consumers", hint="add consumers: to manifest.yaml")
    if locations:
        if len(locations) > len(consumers):
            raise BadInput(
                f"{len(locations)} --consumer values but the manifest lists {len(consumers)} consumers"
            )
        sources = []
        for consumer, value in zip(consumers, locations, strict=False):
            local, rev, url = parse_location(value)
            sources.append(Source(consumer, local=local, rev=rev, url=url))
        return sources
    return [Source(c) for c in consumers]
