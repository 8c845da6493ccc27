"""Checking the chain: every link pins what it should, and a fresh recursive clone can fetch it.

Nearest consumer first. Gitlinks and `.gitmodules` are read from commit objects (`ls-tree`,
`config --blob`), never from a checkout, so shallow and uninitialised submodules are fine. Each check of
a link is one function that adds its findings to the link: where the gitlink is, its `.gitmodules` URL,
reachability (reachable.py), `.fork-base.json`, and the pin itself: the fork head (forklink.py) or a
commit of the previous consumer that itself passes (checked as a link of its own).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from forkctl.chain import forkbase, pinrecords
from forkctl.chain.declared import (
    check_update,
    check_url,
    declared_modules,
    locate_gitlink,
    pin_target,
    point_at_gitmodules,
)
from forkctl.chain.forkhead import ForkContext, fork_context
from forkctl.chain.forklink import check_fork_pin, fork_branch_notes
from forkctl.chain.model import ChainFinding, ChainResult, LinkResult, Progress, Status, WayForward
from forkctl.chain.reachable import CommitGraphs, check_reachable, recorded_branch_finding
from forkctl.chain.sources import (
    CloneOrCache,
    Remotes,
    Source,
    commit_to_check,
    default_sources,
    planned_commit,
)
from forkctl.chain.wayforward import one_way_forward, pin_bases, point_at, upstream_ancestry
from forkctl.errors import BadInput
from forkctl.git import remote
from forkctl.manifest import Consumer, Manifest

if TYPE_CHECKING:
    from forkctl.git.objects import Objects


class Checker:
    """One walk of the chain: each consumer commit is checked once, however many links pin it.

    A plain class, not a record: it holds the run's remotes and commit graphs and fills its memos as
    the walk goes."""

    def __init__(
        self,
        manifest: Manifest,
        fork: ForkContext,
        sources: list[Source],
        progress: Progress,
        pending: dict[str, list[str]] | None = None,
        fork_location: str | None = None,
        start: int | None = None,
    ) -> None:
        self.manifest = manifest
        self.fork = fork
        self.sources = sources
        self.progress = progress
        # Branch tips that `bump-bridge` is about to push: {normalised url: [sha]}; count as reachable.
        self.pending = pending if pending is not None else {}
        self.fork_location = fork_location  # --fork-repo: a clone or URL of the fork (default: manifest URL)
        # --under-test: check only from this source's commit downward (nothing above or beside it), and
        # point its `.gitmodules` findings at their lines.
        self.start = start
        self._results: dict[tuple[int, str], LinkResult] = {}
        self._objects: dict[int, CloneOrCache] = {}
        self.remotes = Remotes(self.progress)
        self.graphs = CommitGraphs(
            self.manifest, self.fork.upstream_url, self.remotes, self.fork.upstream_repo, self.fork.base
        )

    def objects(self, index: int) -> CloneOrCache:
        if index not in self._objects:
            self._objects[index] = self.sources[index].objects()
        return self._objects[index]

    def run(self) -> ChainResult:
        starts = range(len(self.sources)) if self.start is None else [self.start]
        self._prefetch()
        for index in starts:
            commit, role = commit_to_check(self.sources[index], self.objects(index), self.remotes)
            link = self.check(index, commit, role)
            recorded_branch_finding(self.sources[index], self.remotes, link)
            if self.start is not None:
                point_at_gitmodules(self.objects(index).repo_with(commit), commit, link)
        links = sorted(self._results.values(), key=lambda link: link.index)
        notes = _fork_branch_notes(self)
        ancestry = upstream_ancestry(self.fork, self.graphs)
        way = one_way_forward(self.fork.base, pin_bases(links), ancestry)
        if way.moves:
            point_at(links, way)
        return ChainResult(self.fork.base, self.fork.head, self.fork.patches, links, notes, way)

    def _prefetch(self) -> None:
        """Fetch the consumer commits the check will read, one request per repository, outermost
        consumer first: its commits name (by their gitlinks) the commits of the one it pins, which
        are fetched together with that one's own branch tip. Fetched one at a time, two commits of one
        repository would bring the trees they share twice. What cannot be read here is fetched (and
        its failure told) by the check itself."""
        top = len(self.sources) - 1 if self.start is None else self.start
        pinned: list[str] = []
        for index in range(top, -1, -1):
            source, objects = self.sources[index], self.objects(index)
            try:
                tip = (
                    planned_commit(source, objects, self.remotes)
                    if index == top or self.start is None
                    else None
                )
            except BadInput:
                tip = None  # an unlistable URL: the check says so
            wanted = list(dict.fromkeys([*([tip] if tip else []), *pinned]))
            objects.prefetch(wanted)
            pinned = [] if index == 0 else self._gitlinks(index, wanted)

    def _gitlinks(self, index: int, commits: list[str]) -> list[str]:
        """The commits that the gitlinks of `commits` (of consumer `index`, where held) pin."""
        consumer, objects = self.sources[index].consumer, self.objects(index)
        found = []
        for commit in commits:
            repo = objects.holding(commit)
            if repo is None:
                continue
            entries = repo.objects.tree_entries(commit, _paths_read(consumer))
            entry = entries.get(consumer.gitlink)
            if entry is not None and entry.kind == "commit":
                found.append(entry.sha)
        return found

    def check(self, index: int, commit: str, role: str) -> LinkResult:
        """The link of consumer `index` at `commit`, every check run on it (once per commit)."""
        key = (index, commit)
        if key in self._results:
            return self._results[key]
        consumer = self.sources[index].consumer
        repo = self.objects(index).repo_with(commit)
        if repo is None:
            raise BadInput(f"cannot read commit {commit[:12]} of {consumer.name}: {self.objects(index).why}")
        target = pin_target(self.manifest, self.sources, index)
        link = LinkResult(consumer.name, index, commit, role, consumer.gitlink, target.name)
        self._results[key] = link
        self.progress(f"checking {consumer.name}@{commit[:12]} ({role})")
        entries = repo.objects.tree_entries(commit, _paths_read(consumer))
        files = {path: e.sha for path, e in entries.items() if e.kind == "blob"}
        objects = self.objects(index)
        objects.ensure_blobs(repo, [sha for path, sha in files.items() if path != ".gitmodules"])
        modules = declared_modules(objects, repo, entries.get(".gitmodules"), link)
        if modules is None:
            return link
        gitlink_path, module = locate_gitlink(repo.objects, commit, consumer, modules, target, link, entries)
        if gitlink_path is None:
            return link
        entry = entries.get(gitlink_path) or repo.objects.tree_entry(commit, gitlink_path)
        assert entry is not None
        link.pinned = entry.sha
        url = check_url(module, consumer, target, link)
        check_update(module, link)
        if url is not None:
            merged = merged_fix(self.sources[index - 1].consumer.name, consumer.name) if index else ""
            check_reachable(link, url, entry.sha, target.likely, self.graphs, self.pending, merged)
        check_fork_base(repo.objects, files.get(forkbase.FORK_BASE_FILE), commit, link, self.manifest)
        if index == 0:
            check_fork_pin(link, entry.sha, url, self.fork, self.graphs)
        else:
            self._check_consumer_pin(index, entry.sha, url, link)
        bump = "forkctl bump-bridge" + (f" --through {consumer.name}" if index else "")
        pinrecords.check_records(link, repo.objects, consumer, entries, entry.sha, bump, self.start == index)
        return link

    def _check_consumer_pin(self, index: int, pinned: str, url: str | None, link: LinkResult) -> None:
        """A pin of the previous consumer passes when the commit it pins passes (checked as its link)."""
        previous = self.objects(index - 1)
        extra = tuple(u for u in (url,) if u and not remote.same_repo(u, previous.url))
        if previous.repo_with(pinned, extra) is None:
            link.add(
                "nested",
                Status.MISMATCH,
                "unreadable",
                f"pins {self.sources[index - 1].consumer.name}@{pinned[:12]}, which cannot be fetched "
                f"({previous.why})",
                f"{merged_fix(self.sources[index - 1].consumer.name, link.consumer)}; else pin a pushed commit",
            )
            return
        _judge_nested(link, self.check(index - 1, pinned, f"pinned by {link.consumer}"), pinned)


def _judge_nested(link: LinkResult, inner: LinkResult, pinned: str) -> None:
    """The consumer's pin passes when the commit it pins (`inner`, checked as its own link) passes."""
    failure = inner.first_failure()
    if failure is None:
        link.add("nested", Status.OK, "ok", f"pins {inner.consumer}@{pinned[:12]}, which passes")
        return
    link.add(
        "nested",
        Status.MISMATCH,
        "pins-failing-commit",
        # Its own link says why, with its fix: named here, not said again.
        f"pins {inner.consumer}@{pinned[:12]}, which itself fails its {failure.check} check "
        f"(see {inner.consumer}@{pinned[:12]})",
        f"fix {inner.consumer} first, then bump this pin (forkctl bump-bridge --through {link.consumer})",
    )


def _paths_read(consumer: Consumer) -> list[str]:
    """The paths a link's check reads from a consumer commit's tree (one `ls-tree`, asked the same way
    by the prefetch and the check so the second finds the first's answer)."""
    return [".gitmodules", forkbase.FORK_BASE_FILE, consumer.gitlink, *pinrecords.paths(consumer)]


def merged_fix(previous: str, consumer: str) -> str:
    """The fix for a pin of `previous`'s commit that no branch reaches: a bump whose pull request
    `previous` squash- or rebase-merged (deleting its branch) lives on as the merged commit, and
    bump-bridge pins `consumer` there."""
    return (
        f"if {previous} merged it (squash or rebase, its branch deleted), pin {consumer} at the merged "
        f"commit: forkctl bump-bridge --through {consumer}"
    )


def _fork_branch_notes(checker: Checker) -> list[ChainFinding]:
    """The fork branch's notes, left out under test: the branch is beside the chain of the commit under
    test (which ends at the fork head computed from the manifest), and a pull request cannot change it."""
    if checker.start is not None:
        return []
    return fork_branch_notes(checker.manifest, checker.fork, checker.remotes, checker.fork_location)


def check_fork_base(
    objects: Objects, blob: str | None, commit: str, link: LinkResult, manifest: Manifest
) -> None:
    """Add the `fork-base` finding when the commit carries a .fork-base.json: it agrees with the manifest."""
    if blob is None:
        return
    raw = objects.blob_bytes(blob)
    try:
        recorded = forkbase.parse(raw, f"{link.consumer}@{commit[:12]}:{forkbase.FORK_BASE_FILE}")
    except BadInput as exc:
        link.add("fork-base", Status.MISMATCH, "fork-base-invalid", exc.message, exc.hint or "")
        return
    problems = forkbase.cross_check(recorded, manifest)
    if problems:
        link.add(
            "fork-base",
            Status.MISMATCH,
            "fork-base-mismatch",
            f"{forkbase.FORK_BASE_FILE} disagrees with the manifest: {'; '.join(problems)}",
            f"rewrite {forkbase.FORK_BASE_FILE} from the manifest (upstream_base "
            f"{manifest.upstream.base[:12]}), or fix the manifest",
        )
    else:
        link.add("fork-base", Status.OK, "ok", f"{forkbase.FORK_BASE_FILE} agrees with the manifest")


def check_chain(
    manifest: Manifest,
    sources: list[Source],
    upstream_location: str | None = None,
    progress: Progress = lambda _: None,
    pending: dict[str, list[str]] | None = None,
    fork: ForkContext | None = None,
    fork_location: str | None = None,
    start: int | None = None,
) -> ChainResult:
    """Check every link of the chain given by `sources` (nearest consumer first); with `start`, only
    the commit of `sources[start]` and, recursively, what it pins."""
    fork = fork or fork_context(manifest, upstream_location, progress)
    checker = Checker(
        manifest, fork, sources, progress, pending=pending or {}, fork_location=fork_location, start=start
    )
    return checker.run()


def chain_way_forward(manifest: Manifest, fork: ForkContext, progress: Progress) -> WayForward:
    """Where the pins of every consumer's branch (and what they pin, recursively) want the fork: the
    one way forward check-pins prints, for describe and sync to name the same target."""
    result = check_chain(manifest, default_sources(manifest, []), progress=progress, fork=fork)
    assert result.way_forward is not None  # a whole check always decides it
    return result.way_forward
