"""The nested pin chain: upstream -> fork -> consumer 1 -> consumer 2 ..., verified from objects.

The fork link is a SHA comparison: the nearest consumer must pin exactly `apply(series, base)` (built
reproducibly by forkctl.build), and when it does not, `diagnose_fork_pin` says why in the fork's own
terms (another base, a missing / edited / extra patch, a plain upstream commit). Every further link
pins a commit of the previous consumer that itself passes. Gitlinks and `.gitmodules` are read from
commit objects (`ls-tree`, `config --blob`), never from a checkout, so shallow and uninitialised
submodules are fine; a pinned SHA must also be reachable from a branch or tag of the URL that
`.gitmodules` names, or a fresh recursive clone would fail.

The second half moves the chain: `plan_bump` makes the consumer commits that pin the fork head (one
gitlink changed in a private index, `.gitmodules` pointed at the fork when it still names upstream).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path

from forkctl import git
from forkctl.chain import forkbase
from forkctl.errors import BadInput
from forkctl.git import GitRepo, SubmoduleEntry, remote
from forkctl.manifest import Consumer, Manifest
from forkctl.ops import replay as build
from forkctl.redact import without_credentials
from forkctl.report import Level, Problem, Report, Table
from forkctl.series import Patch, Series, load_series

Progress = Callable[[str], None]
BUILT_REFS = "refs/forkctl/built/"  # + sha256(base, patch bytes): the fork head built from them
MAX_LISTED_COMMITS = 50  # beyond this many fork commits the diagnosis lists a count, not each one


class Status(StrEnum):
    OK = "OK"
    MISMATCH = "MISMATCH"
    UNREACHABLE = "UNREACHABLE"


@dataclass(frozen=True)
class Finding:
    check: str  # pin, url, reachable, fork-base, nested
    status: Status
    kind: str  # a stable machine code: ok, unpatched-upstream, wrong-base, missing-patch, ...
    message: str
    fix: str = ""


@dataclass
class LinkResult:
    """One consumer commit and the gitlink it holds."""

    consumer: str
    index: int  # position in the chain, 0 = nearest consumer
    commit: str
    role: str  # "branch farai/main", "HEAD of /path", "pinned by nemo-rl"
    gitlink: str
    target: str  # what the gitlink should pin: the fork, or the previous consumer
    pinned: str | None = None
    url: str | None = None
    expected: str | None = None  # the fork link's expected SHA
    findings: list[Finding] = field(default_factory=list)

    @property
    def status(self) -> Status:
        for status in (Status.UNREACHABLE, Status.MISMATCH):
            if any(f.status == status for f in self.findings):
                return status
        return Status.OK

    @property
    def ok(self) -> bool:
        return self.status == Status.OK

    def add(self, check: str, status: Status, kind: str, message: str, fix: str = "") -> None:
        self.findings.append(Finding(check, status, kind, message, fix))

    def first_failure(self) -> Finding | None:
        """The most telling failure: about the pin itself first, then URL, reachability, files."""
        failures = [f for f in self.findings if f.status != Status.OK]
        return next((f for f in failures if f.check in ("pin", "nested")), failures[0] if failures else None)


@dataclass
class ChainResult:
    base: str
    expected_head: str
    patches: list[Patch]
    links: list[LinkResult]
    fork_branch_notes: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(link.ok for link in self.links) and all(
            f.status == Status.OK for f in self.fork_branch_notes
        )


# --- where objects come from ----------------------------------------------------------------------


@dataclass
class Store:
    """A repository's objects: a local clone first (read only), then the cache for its URL."""

    url: str
    local: GitRepo | None = None
    _cache: GitRepo | None = None

    def cache(self) -> GitRepo:
        if self._cache is None:
            self._cache = remote.cache_repo_for(self.url)
        return self._cache

    def ensure_blobs(self, repo: GitRepo, blobs: list[str]) -> None:
        """Make the blobs `blobs` of `repo` readable: one explicit fetch for those the cache lacks
        (never git's lazy fetch: one round trip per blob, through a URL without credentials). A local
        clone is read as it is."""
        if blobs and repo is self._cache:
            remote.fetch_objects(repo, self.url, blobs)

    def repo_with(self, sha: str, extra_urls: tuple[str, ...] = ()) -> GitRepo | None:
        """A repository that holds commit `sha`, fetching it (depth 1) when none does yet."""
        if self.local is not None and self.local.has_object(f"{sha}^{{commit}}"):
            return self.local
        cache = self.cache()
        for url in (self.url, *extra_urls):
            if remote.fetch_sha(cache, url, sha):
                return cache
        return None


@dataclass
class Source:
    """Where to find one consumer: its manifest entry, and optionally a local checkout and revision."""

    consumer: Consumer
    local: Path | None = None
    rev: str | None = None
    url: str | None = None  # overrides consumer.url as the place to fetch from (not as its identity)
    label: str | None = None  # how the report names the commit (default: its rev or branch)

    @property
    def fetch_url(self) -> str:
        return self.url or self.consumer.url


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


# --- the fork head ----------------------------------------------------------------------------------


@dataclass
class ForkContext:
    """The upstream object store with the base, the reproducible head built in it, and the series."""

    store: GitRepo
    upstream_url: str
    upstream_local: GitRepo | None
    base: str
    head: str
    patches: list[Patch]
    _upstream_tip: str | None = None
    _history_fetched: bool = False

    def upstream_tip(self, branch: str) -> str | None:
        """The upstream branch tip, with its history in `store` (fetched on first need only)."""
        if self._upstream_tip is not None:
            return self._upstream_tip
        if self.upstream_local is not None:
            for ref in (
                f"refs/heads/{branch}",
                f"refs/remotes/origin/{branch}",
                f"refs/remotes/upstream/{branch}",
            ):
                sha = self.upstream_local.ref_sha(ref)
                if sha:
                    self._upstream_tip = sha
                    return sha
            return None
        if not self._history_fetched:
            listed = remote.listed_refs(self.upstream_url).refs
            remote.fetch_history(self.store, self.upstream_url, listed)
            self._history_fetched = True
        self._upstream_tip = self.store.ref_sha(f"refs/forkctl/heads/{branch}")
        return self._upstream_tip


def fork_context(manifest: Manifest, upstream_location: str | None, progress: Progress) -> ForkContext:
    """Build apply(series, base) in the upstream store: `--upstream-repo` (a clone, lent as alternate
    objects, or a URL) or the cache for the manifest's upstream URL."""
    upstream_local: GitRepo | None = None
    url = manifest.upstream.url
    if upstream_location is not None:
        local, _, given_url = parse_location(upstream_location)
        if local is not None:
            upstream_local = GitRepo(local)
        else:
            url = given_url or url
    store = remote.cache_repo_for(url, alternates=[upstream_local.git_dir] if upstream_local else None)
    base = store.resolve_commit(manifest.upstream.base)
    if base is None:
        progress(f"fetching the base {manifest.upstream.base[:12]} from {url}")
        if len(manifest.upstream.base) == 40 and remote.fetch_sha(store, url, manifest.upstream.base):
            base = manifest.upstream.base
    if base is None:
        raise BadInput(
            f"the manifest base {manifest.upstream.base} is not in {upstream_location or url}",
            hint="pass --upstream-repo PATH to a clone that has it (git fetch origin), or write the full SHA",
        )
    patches = load_series(manifest).patches
    # apply(series, base) is a pure function of the base and the patch bytes: a head built before in
    # this store for the same inputs is reused (one ref read instead of ~6 git processes per patch).
    built_ref = BUILT_REFS + Series(base=base, patches=patches).digest
    head = store.ref_sha(built_ref)
    if head is not None and not store.missing_objects([head]):
        return ForkContext(store, url, upstream_local, base, head, patches)
    if upstream_local is None:
        touched = list(dict.fromkeys(path for patch in patches for path in patch.paths))
        at_base = store.tree_entries(base, touched)
        remote.fetch_objects(store, url, [e.sha for e in at_base.values() if e.kind == "blob"])
    progress(f"building the fork head: {manifest.upstream.repo}@{base[:12]} + {len(patches)} patches")
    result = build.build_series(store, base, patches)
    if result.conflict is None:
        store.set_ref(built_ref, result.head, "apply(series, base)")
    if result.conflict is not None:
        raise BadInput(
            f"the series does not apply on the base: {result.conflict.patch.path.name}: "
            f"{result.conflict.message.strip()}",
            hint="run forkctl status --repo <upstream clone>, then fix the patch or port the series",
        )
    return ForkContext(store, url, upstream_local, base, result.head, patches)


# --- diagnosing a pin that is not the fork head --------------------------------------------------


def _relation(repo: GitRepo, commit: str, base: str) -> str:
    """'the manifest base', 'N commits ahead of ...', 'N commits behind ...' or 'diverged from ...'."""
    if commit == base:
        return "the manifest base"
    if repo.is_ancestor(base, commit):
        return f"{repo.count(f'{base}..{commit}')} commits ahead of the manifest base {base[:12]}"
    if repo.is_ancestor(commit, base):
        return f"{repo.count(f'{commit}..{base}')} commits behind the manifest base {base[:12]}"
    return f"diverged from the manifest base {base[:12]}"


def unpatched_upstream(repo: GitRepo, pinned: str, ctx: ForkContext) -> Finding:
    """The finding for a pin on upstream's branch: where it is relative to the base (`repo` holds the
    history of both; commits are enough)."""
    return Finding(
        "pin",
        Status.MISMATCH,
        "unpatched-upstream",
        f"pins an unpatched upstream commit {pinned[:12]}, {_relation(repo, pinned, ctx.base)}, "
        f"with none of the {len(ctx.patches)} patches",
        f"pin the reproducible fork head {ctx.head[:12]}: forkctl bump-bridge",
    )


def diagnose_fork_pin(ctx: ForkContext, pinned: str, branch: str) -> list[Finding]:
    """Why `pinned` is not apply(series, base): one finding per reason, most fundamental first.

    `ctx.store` must hold `pinned` with its history (the caller fetched it from the fork URL).
    """
    repo, base = ctx.store, ctx.base
    fix = f"pin the reproducible fork head {ctx.head[:12]}: forkctl bump-bridge"
    if pinned == base:
        return [
            Finding(
                "pin",
                Status.MISMATCH,
                "unpatched-upstream",
                f"pins the plain upstream base {base[:12]} with none of the {len(ctx.patches)} patches "
                f"(the fork head is {ctx.head[:12]})",
                fix,
            )
        ]
    tip = ctx.upstream_tip(branch)
    if tip is not None and repo.is_ancestor(pinned, tip):
        return [unpatched_upstream(repo, pinned, ctx)]
    not_upstream = [tip, base] if tip else [base]
    own = repo.commits_not_in(pinned, not_upstream)
    bases = repo.merge_bases(pinned, tip or base)
    findings: list[Finding] = []
    if len(bases) > 1:
        findings.append(
            Finding(
                "pin",
                Status.MISMATCH,
                "criss-cross",
                f"has {len(bases)} merge-bases with upstream (criss-cross history)",
                fix,
            )
        )
    pinned_base = bases[0] if bases else None
    if pinned_base is None:
        findings.append(
            Finding(
                "pin", Status.MISMATCH, "unrelated", f"{pinned[:12]} shares no history with upstream", fix
            )
        )
        return findings
    if pinned_base != base:
        findings.append(
            Finding(
                "pin",
                Status.MISMATCH,
                "wrong-base",
                f"is built on another base {pinned_base[:12]}, {_relation(repo, pinned_base, base)}",
                "port the series (forkctl port) or move the manifest base, rebuild, then forkctl bump-bridge",
            )
        )
    findings += _match_patches(repo, own, ctx.patches, fix)
    if not findings:
        findings.append(
            Finding(
                "pin",
                Status.MISMATCH,
                "not-reproducible",
                f"{pinned[:12]} carries exactly the series on the manifest base but is not the reproducible "
                f"commit {ctx.head[:12]} (author, date or message differ)",
                fix,
            )
        )
    return findings


def _match_patches(repo: GitRepo, commits: list[str], patches: list[Patch], fix: str) -> list[Finding]:
    """Compare the fork's own commits with the series by patch-id (and by subject, to spot edits)."""
    findings: list[Finding] = []
    by_id = {p.patch_id: i for i, p in enumerate(patches)}
    by_subject = {p.subject: i for i, p in enumerate(patches)}
    matched: list[int] = []
    extras: list[str] = []
    for sha in commits:
        info = repo.commit_info(sha)
        if len(info.parents) > 1:
            extras.append(f"{sha[:12]} (merge) {info.subject}")
            continue
        position = by_id.get(repo.commit_patch_id(sha))
        if position is not None:
            matched.append(position)
            continue
        position = by_subject.get(info.subject)
        if position is not None and position not in matched:
            matched.append(position)
            findings.append(
                Finding(
                    "pin",
                    Status.MISMATCH,
                    "edited-patch",
                    f"commit {sha[:12]} {info.subject!r} differs from its file {patches[position].path.name} "
                    f"(patch-id {repo.commit_patch_id(sha)[:12]} vs {patches[position].patch_id[:12]})",
                    "export the edit into the patch file (forkctl export) or rebuild from the file, then bump",
                )
            )
            continue
        extras.append(f"{sha[:12]} {info.subject}")
    for position, patch in enumerate(patches):
        if position not in matched:
            findings.append(
                Finding(
                    "pin",
                    Status.MISMATCH,
                    "missing-patch",
                    f"patch missing: {patch.path.name} ({patch.subject})",
                    fix,
                )
            )
    if extras:
        shown = extras[:MAX_LISTED_COMMITS]
        more = f" and {len(extras) - len(shown)} more" if len(extras) > len(shown) else ""
        findings.append(
            Finding(
                "pin",
                Status.MISMATCH,
                "extra-commit",
                f"{len(extras)} extra commit(s) not in the series: {'; '.join(shown)}{more}",
                "add them to the series (forkctl export) or drop them, rebuild, then forkctl bump-bridge",
            )
        )
    if matched != sorted(matched) and not any(f.kind in ("missing-patch",) for f in findings):
        findings.append(
            Finding(
                "pin",
                Status.MISMATCH,
                "patch-order",
                "the patches are applied in another order than the series",
                fix,
            )
        )
    return findings


# --- checking the chain ---------------------------------------------------------------------------


@dataclass
class Checker:
    manifest: Manifest
    fork: ForkContext
    sources: list[Source]
    progress: Progress
    # Branch tips that `bump-bridge` is about to push: {normalised url: [sha]}; count as reachable.
    pending: dict[str, list[str]] = field(default_factory=dict)
    fork_location: str | None = None  # --fork-repo: a clone or URL of the fork (default: manifest URL)
    _refs: dict[str, remote.Listing] = field(default_factory=dict)
    _results: dict[tuple[int, str], LinkResult] = field(default_factory=dict)
    _stores: dict[int, Store] = field(default_factory=dict)

    def store(self, index: int) -> Store:
        if index not in self._stores:
            source = self.sources[index]
            local = GitRepo(source.local) if source.local else None
            self._stores[index] = Store(url=source.fetch_url, local=local)
        return self._stores[index]

    def remote_refs(self, url: str) -> dict[str, str]:
        return self.listing(url).refs

    def listing(self, url: str) -> remote.Listing:
        key = remote.normalise_url(url)
        if key not in self._refs:
            self.progress(f"listing the branches and tags of {url}")
            listing = remote.listed_refs(url)
            if listing.recorded_at:
                self.progress(
                    f"{url} did not answer ({listing.why}); using its branches and tags as recorded "
                    f"at {listing.recorded_at}"
                )
            self._refs[key] = listing
        return self._refs[key]

    def start_commit(self, index: int) -> tuple[str, str]:
        """(commit, role) to check for consumer `index`: --consumer PATH@REV / HEAD, else its branch tip."""
        source = self.sources[index]
        store = self.store(index)
        if store.local is not None:
            rev = source.rev or "HEAD"
            sha = store.local.resolve_commit(rev)
            if sha is None:
                raise BadInput(
                    f"{source.local}: {rev!r} is not a commit", hint="give PATH@REV with an existing rev"
                )
            return sha, source.label or f"{rev} of {source.local}"
        branch = source.consumer.branch
        if source.rev and len(source.rev) == 40 and store.repo_with(source.rev):
            return source.rev, source.label or source.rev[:12]
        branch = source.rev or branch
        refs = self.remote_refs(source.fetch_url)
        sha = refs.get(f"refs/heads/{branch}")
        if sha is None:
            raise BadInput(
                f"{source.fetch_url} has no branch {branch!r} (consumer {source.consumer.name})",
                hint="fix consumers[].branch in the manifest, or pass --consumer PATH to a local checkout",
            )
        if store.repo_with(sha) is None:
            raise BadInput(f"cannot fetch {sha[:12]} from {source.fetch_url}")
        return sha, f"branch {branch}"

    def run(self) -> ChainResult:
        for index in range(len(self.sources)):
            commit, role = self.start_commit(index)
            self.check(index, commit, role)
        links = sorted(self._results.values(), key=lambda link: link.index)
        return ChainResult(self.fork.base, self.fork.head, self.fork.patches, links, self.fork_branch_notes())

    def fork_branch_notes(self) -> list[Finding]:
        """The fork branch itself: is it the reproducible head, and does its .fork-base.json agree?"""
        branch = self.manifest.fork.branch
        local, _, url = parse_location(self.fork_location) if self.fork_location else (None, None, None)
        url = url or self.manifest.fork.url
        try:
            if local is not None:
                repo: GitRepo | None = GitRepo(local)
                head = _branch_head(repo, branch) if repo else None
            else:
                head = self.remote_refs(url).get(f"refs/heads/{branch}")
                # The reproducible head is already in the upstream store (built there): nothing to fetch.
                built = head == self.fork.head
                store = Store(self.fork.upstream_url, _cache=self.fork.store) if built else Store(url)
                repo = store.repo_with(head) if head else None
                if repo is not None and head is not None:
                    record = repo.tree_entry(head, forkbase.FORK_BASE_FILE)
                    store.ensure_blobs(repo, [record.sha] if record and record.kind == "blob" else [])
        except BadInput as exc:
            return [Finding("fork-branch", Status.OK, "skipped", f"fork branch not read: {exc.message}")]
        if head is None or repo is None:
            return [Finding("fork-branch", Status.OK, "skipped", f"the fork has no branch {branch}")]
        notes = []
        if head == self.fork.head:
            notes.append(
                Finding("fork-branch", Status.OK, "ok", f"{branch} is the reproducible head {head[:12]}")
            )
        else:
            notes.append(
                Finding(
                    "fork-branch",
                    Status.OK,
                    "behind",
                    f"{branch} is {head[:12]}, not the reproducible head {self.fork.head[:12]} "
                    "(consumers must pin the latter)",
                )
            )
        raw = repo.read_blob(head, forkbase.FORK_BASE_FILE)
        if raw is not None:
            where = f"{self.manifest.fork.repo}@{branch}:{forkbase.FORK_BASE_FILE}"
            try:
                problems = forkbase.cross_check(forkbase.parse(raw, where), self.manifest)
            except BadInput as exc:
                problems = [exc.message]
            if problems:
                notes.append(
                    Finding(
                        "fork-base",
                        Status.MISMATCH,
                        "fork-base-mismatch",
                        f"{where} disagrees with the manifest: {'; '.join(problems)}",
                        f"rewrite {forkbase.FORK_BASE_FILE} on {branch} from the manifest",
                    )
                )
            else:
                notes.append(Finding("fork-base", Status.OK, "ok", f"{where} agrees with the manifest"))
        return notes

    # one consumer commit -------------------------------------------------------------------------

    def check(self, index: int, commit: str, role: str) -> LinkResult:
        key = (index, commit)
        if key in self._results:
            return self._results[key]
        consumer = self.sources[index].consumer
        repo = self.store(index).repo_with(commit)
        if repo is None:
            raise BadInput(f"cannot read commit {commit[:12]} of {consumer.name}")
        if index == 0:
            target_url, target_upstream, target = self.manifest.fork.url, self.manifest.upstream.url, "fork"
        else:
            previous = self.sources[index - 1].consumer
            target_url, target_upstream, target = previous.url, previous.upstream_url, previous.name
        link = LinkResult(consumer.name, index, commit, role, consumer.gitlink, target)
        self._results[key] = link
        self.progress(f"checking {consumer.name}@{commit[:12]} ({role})")
        entries = repo.tree_entries(commit, [".gitmodules", forkbase.FORK_BASE_FILE, consumer.gitlink])
        files = {path: e.sha for path, e in entries.items() if e.kind == "blob"}
        self.store(index).ensure_blobs(repo, list(files.values()))
        modules = git.parse_gitmodules(repo, files[".gitmodules"]) if ".gitmodules" in files else []
        gitlink_path, module = self._locate(
            repo, commit, consumer, modules, target_url, target_upstream, link, entries
        )
        if gitlink_path is None:
            return link
        entry = entries.get(gitlink_path) or repo.tree_entry(commit, gitlink_path)
        assert entry is not None
        link.pinned = entry.sha
        url = self._check_url(module, consumer, target_url, target_upstream, target, link)
        if url is not None:
            # The branches a pin is usually on: the fork's branch and its mirror of upstream, or the
            # previous consumer's branch.
            fork = self.manifest.fork
            likely = (
                (fork.branch, fork.mirror_branch)
                if index == 0
                else (self.sources[index - 1].consumer.branch,)
            )
            self._check_reachable(url, entry.sha, link, likely)
        self._check_fork_base(repo, files.get(forkbase.FORK_BASE_FILE), commit, link)
        if index == 0:
            self._check_fork_pin(entry.sha, url, link)
        else:
            self._check_consumer_pin(index, entry.sha, url, link)
        return link

    def _locate(
        self,
        repo: GitRepo,
        commit: str,
        consumer: Consumer,
        modules: list[SubmoduleEntry],
        target_url: str,
        target_upstream: str | None,
        link: LinkResult,
        entries: dict[str, git.TreeEntry],
    ) -> tuple[str | None, SubmoduleEntry | None]:
        """The gitlink path: the manifest's, or (nested submodules move) the one whose URL is the target."""
        entry = entries.get(consumer.gitlink)
        path = consumer.gitlink if entry is not None and entry.kind == "commit" else None
        if path is None:
            wanted = [u for u in (target_url, target_upstream) if u]
            for module in modules:
                if (
                    module.url
                    and module.path
                    and any(remote.same_repo(self._absolute(module.url, consumer), u) for u in wanted)
                ):
                    found = repo.tree_entry(commit, module.path)
                    if found is not None and found.kind == "commit":
                        path = module.path
                        link.gitlink = path
                        link.add(
                            "gitlink",
                            Status.OK,
                            "moved",
                            f"no gitlink at {consumer.gitlink}; found the submodule by URL at {path}",
                        )
                        break
        if path is None:
            link.add(
                "gitlink",
                Status.MISMATCH,
                "no-gitlink",
                f"has no gitlink at {consumer.gitlink} and no submodule whose URL is {target_url}",
                f"add the submodule at {consumer.gitlink}, or fix consumers[].gitlink in the manifest",
            )
            return None, None
        module = next((m for m in modules if m.path == path), None)
        return path, module

    def _absolute(self, url: str, consumer: Consumer) -> str:
        return remote.resolve_relative_url(url, consumer.url)

    def _check_url(
        self,
        module: SubmoduleEntry | None,
        consumer: Consumer,
        target_url: str,
        target_upstream: str | None,
        target: str,
        link: LinkResult,
    ) -> str | None:
        if module is None or not module.url:
            link.add(
                "url",
                Status.MISMATCH,
                "no-gitmodules-entry",
                f".gitmodules has no entry with path = {link.gitlink}: a fresh clone cannot fetch the pin",
                f"add [submodule] path = {link.gitlink}, url = {target_url}",
            )
            return None
        url = self._absolute(module.url, consumer)
        link.url = url
        if remote.same_repo(url, target_url):
            link.add("url", Status.OK, "ok", f".gitmodules url is {module.url}")
        elif target_upstream and remote.same_repo(url, target_upstream):
            link.add(
                "url",
                Status.MISMATCH,
                "url-upstream",
                f".gitmodules url for {link.gitlink} still points upstream ({module.url}), not at {target_url}",
                f"git config -f .gitmodules submodule.{module.name}.url {target_url} (forkctl bump-bridge does it)",
            )
        else:
            link.add(
                "url",
                Status.MISMATCH,
                "url-other",
                f".gitmodules url for {link.gitlink} is {module.url}, expected {target_url}",
                f"git config -f .gitmodules submodule.{module.name}.url {target_url}",
            )
        return url

    def _graph(self, url: str) -> GitRepo:
        """The commit-graph cache to answer `url`'s history questions in. The fork shares upstream's
        history: its graph borrows the upstream graph's objects (alternates) once that holds upstream's
        branch, so that the fork's fetch tells the server it has them and only the fork's own commits
        arrive."""
        upstream_url = self.fork.upstream_url
        if not remote.same_repo(url, self.manifest.fork.url) or remote.same_repo(url, upstream_url):
            return remote.cache_repo_for(url, graph=True)
        lender = self._upstream_graph()
        return remote.cache_repo_for(url, alternates=[lender.git_dir] if lender else None, graph=True)

    def _upstream_graph(self) -> GitRepo | None:
        """The upstream commit graph holding the upstream branch as listed now (None: not listable)."""
        url = self.fork.upstream_url
        try:
            refs = self.remote_refs(url)
        except BadInput:
            return None
        ref = f"refs/heads/{self.manifest.upstream.branch}"
        graph = remote.cache_repo_for(url, graph=True)
        if ref in refs and remote.fetch_graph(graph, url, {ref: refs[ref]}):
            return graph
        return None

    def _check_reachable(self, url: str, sha: str, link: LinkResult, likely: tuple[str, ...]) -> None:
        for tip in self.pending.get(remote.normalise_url(url), []):
            if tip == sha:
                link.add(
                    "reachable", Status.OK, "pending", f"{sha[:12]} is the tip of a branch this bump creates"
                )
                return
        try:
            listing = self.listing(url)
        except BadInput as exc:
            link.add("reachable", Status.UNREACHABLE, "no-remote", exc.message, exc.hint or "")
            return
        refs = listing.refs
        if listing.recorded_at:
            link.add(
                "reachable",
                Status.OK,
                "offline",
                f"{url} did not answer: its branches and tags are those recorded at {listing.recorded_at}",
            )
        result = remote.tip_reachability(sha, refs) or remote.reachability(
            self._graph(url), url, sha, refs, likely=likely
        )
        if result.reachable:
            shown = ", ".join(
                r.removeprefix("refs/heads/").removeprefix("refs/tags/") for r in result.refs[:3]
            )
            link.add("reachable", Status.OK, "ok", f"{sha[:12]} is reachable from {shown} of {url}")
        else:
            link.add(
                "reachable",
                Status.UNREACHABLE,
                "unreachable",
                f"pinned {sha[:12]} is not reachable from any branch or tag of {url}: a fresh recursive clone "
                "cannot check it out (it may exist only on someone's machine)",
                f"push it to a branch of {url} (git push {url} {sha[:12]}:refs/heads/<branch>), or pin a "
                "pushed commit",
            )

    def _check_fork_base(self, repo: GitRepo, blob: str | None, commit: str, link: LinkResult) -> None:
        if blob is None:
            return
        raw = repo.blob_bytes(blob)
        try:
            recorded = forkbase.parse(raw, f"{link.consumer}@{commit[:12]}:{forkbase.FORK_BASE_FILE}")
        except BadInput as exc:
            link.add("fork-base", Status.MISMATCH, "fork-base-invalid", exc.message, exc.hint or "")
            return
        problems = forkbase.cross_check(recorded, self.manifest)
        if problems:
            link.add(
                "fork-base",
                Status.MISMATCH,
                "fork-base-mismatch",
                f"{forkbase.FORK_BASE_FILE} disagrees with the manifest: {'; '.join(problems)}",
                f"rewrite {forkbase.FORK_BASE_FILE} from the manifest (upstream_base "
                f"{self.manifest.upstream.base[:12]}), or fix the manifest",
            )
        else:
            link.add("fork-base", Status.OK, "ok", f"{forkbase.FORK_BASE_FILE} agrees with the manifest")

    def _check_fork_pin(self, pinned: str, url: str | None, link: LinkResult) -> None:
        link.expected = self.fork.head
        if pinned == self.fork.head:
            link.add(
                "pin",
                Status.OK,
                "ok",
                f"pins the fork head {pinned[:12]} = {self.manifest.upstream.repo}@{self.fork.base[:12]} + "
                f"{len(self.fork.patches)} patches",
            )
            return
        upstream = self._upstream_finding(pinned)
        if upstream is not None:
            link.findings.append(upstream)
            return
        fork_cache = self._fork_cache_with(pinned, url)
        if fork_cache is not None:
            diagnosis = replace(self.fork, store=fork_cache)
            link.findings += diagnose_fork_pin(diagnosis, pinned, self.manifest.upstream.branch)
            return
        store = self.fork.store
        urls = [u for u in (url, self.manifest.fork.url) if u]
        if not store.has_object(f"{pinned}^{{commit}}") or (store.git_dir / "shallow").is_file():
            self.fork.upstream_tip(self.manifest.upstream.branch)  # unshallows the store first
            for candidate in urls:
                try:
                    if remote.fetch_sha(store, candidate, pinned, depth=None):
                        break
                except BadInput as exc:  # a refused URL (e.g. one starting with '-') is a finding
                    link.add("pin", Status.MISMATCH, "url-refused", exc.message, exc.hint or "")
                    return
        if not store.has_object(f"{pinned}^{{commit}}"):
            link.add(
                "pin",
                Status.MISMATCH,
                "unreadable",
                f"pins {pinned[:12]}, which neither {' nor '.join(urls)} hands out; the fork head is "
                f"{self.fork.head[:12]}",
                "forkctl bump-bridge",
            )
            return
        link.findings += diagnose_fork_pin(self.fork, pinned, self.manifest.upstream.branch)

    def _upstream_finding(self, pinned: str) -> Finding | None:
        """The common diagnosis, from the upstream commit graph alone (commits only, no trees): the pin
        is the base or an unpatched upstream commit. None when it is neither (or the graph cannot say):
        the full diagnosis follows, with trees."""
        if pinned == self.fork.base:
            return diagnose_fork_pin(self.fork, pinned, self.manifest.upstream.branch)[0]
        if self.fork.upstream_local is not None:
            return None  # a local clone answers history questions already, without the network
        graph = self._upstream_graph()
        tip = graph.ref_sha(f"refs/forkctl/heads/{self.manifest.upstream.branch}") if graph else None
        if graph is None or tip is None or not graph.has_object(f"{pinned}^{{commit}}"):
            return None
        if not graph.is_ancestor(pinned, tip):
            return None
        # The base is usually on the branch already; a base elsewhere (a release branch) is fetched.
        if not remote.fetch_graph_of(graph, self.fork.upstream_url, self.fork.base):
            return None
        return unpatched_upstream(graph, pinned, self.fork)

    def _fork_cache_with(self, pinned: str, url: str | None) -> GitRepo | None:
        """The fork's cache when the reachability check fetched its history there (borrowing upstream's
        objects) and it holds `pinned`, the base and upstream's tip: the diagnosis reads it there rather
        than fetching the fork's own commits a second time, into the upstream store."""
        if url is None or not remote.same_repo(url, self.manifest.fork.url):
            return None
        cache = remote.cache_repo_for(url)
        if cache.git_dir == self.fork.store.git_dir or (cache.git_dir / "shallow").is_file():
            return None
        if cache.missing_objects([pinned]):
            return None
        tip = self.fork.upstream_tip(self.manifest.upstream.branch)
        return None if cache.missing_objects([self.fork.base, *([tip] if tip else [])]) else cache

    def _check_consumer_pin(self, index: int, pinned: str, url: str | None, link: LinkResult) -> None:
        previous = self.store(index - 1)
        extra = tuple(u for u in (url,) if u and not remote.same_repo(u, previous.url))
        if previous.repo_with(pinned, extra) is None:
            link.add(
                "nested",
                Status.MISMATCH,
                "unreadable",
                f"pins {self.sources[index - 1].consumer.name}@{pinned[:12]}, which cannot be fetched",
                "pin a pushed commit",
            )
            return
        inner = self.check(index - 1, pinned, f"pinned by {link.consumer}")
        failure = inner.first_failure()
        if failure is None:
            link.add("nested", Status.OK, "ok", f"pins {inner.consumer}@{pinned[:12]}, which passes")
        else:
            link.add(
                "nested",
                Status.MISMATCH,
                "pins-failing-commit",
                f"pins {inner.consumer}@{pinned[:12]}, which itself fails: {failure.message}",
                f"fix {inner.consumer} first, then bump this pin (forkctl bump-bridge --through {link.consumer})",
            )


def check_chain(
    manifest: Manifest,
    sources: list[Source],
    upstream_location: str | None = None,
    progress: Progress = lambda _: None,
    pending: dict[str, list[str]] | None = None,
    fork: ForkContext | None = None,
    fork_location: str | None = None,
) -> ChainResult:
    """Check every link of the chain given by `sources` (nearest consumer first)."""
    fork = fork or fork_context(manifest, upstream_location, progress)
    checker = Checker(manifest, fork, sources, progress, pending=pending or {}, fork_location=fork_location)
    return checker.run()


def detect_checkout(manifest: Manifest, cwd: Path) -> tuple[int, Path] | None:
    """(consumer index, repo root) when `cwd` is inside a consumer's checkout: a .gitmodules entry at HEAD
    whose path is that consumer's gitlink."""
    root = git.toplevel(cwd)
    if root is None:
        return None
    repo = GitRepo(root)
    head = repo.resolve_commit("HEAD")
    if head is None:
        return None
    modules = git.read_gitmodules(repo, head) or []
    paths = {m.path for m in modules}
    for index, consumer in enumerate(manifest.consumers):
        if consumer.gitlink in paths:
            return index, root
    return None


def default_sources(manifest: Manifest, locations: list[str], cwd: Path) -> list[Source]:
    """--consumer values (nearest first), else the checkout we are in, else the manifest's URLs."""
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
    detected = detect_checkout(manifest, cwd)
    if detected is not None:
        index, root = detected
        return [Source(c) for c in consumers[:index]] + [Source(consumers[index], local=root)]
    return [Source(c) for c in consumers]


# --- moving the chain -------------------------------------------------------------------------------


@dataclass
class BumpStep:
    """One consumer commit that moves one gitlink."""

    consumer: Consumer
    repo: GitRepo
    push_url: str
    parent: str  # the consumer branch head the new branch starts from
    gitlink: str
    old: str | None
    new: str
    commit: str
    branch: str
    url_changed: tuple[str, str] | None  # (old, new) .gitmodules URL when it pointed upstream
    existing: str | None  # what the branch points at already (None: it does not exist)


def _branch_head(repo: GitRepo, branch: str) -> str | None:
    for ref in (f"refs/heads/{branch}", f"refs/remotes/origin/{branch}"):
        sha = repo.ref_sha(ref)
        if sha:
            return sha
    return None


def consumer_repo(source: Source, progress: Progress) -> tuple[GitRepo, str]:
    """(repository to commit in, head of the consumer branch): a local clone, else the URL's cache."""
    branch = source.consumer.branch
    if source.local is not None:
        repo = GitRepo(source.local)
        head = repo.resolve_commit(source.rev) if source.rev else _branch_head(repo, branch)
        if head is None:
            raise BadInput(
                f"{source.local} has no branch {branch!r} (nor origin/{branch})",
                hint=f"git fetch origin {branch} in that clone, or pass PATH@REV",
            )
        return repo, head
    progress(f"fetching {branch} of {source.fetch_url}")
    listing = remote.listed_refs(source.fetch_url)
    if listing.recorded_at:
        progress(
            f"{source.fetch_url} did not answer ({listing.why}); using its branch {branch} as recorded "
            f"at {listing.recorded_at}"
        )
    head = listing.refs.get(f"refs/heads/{branch}")
    if head is None:
        raise BadInput(
            f"{source.fetch_url} has no branch {branch!r}", hint="fix consumers[].branch in the manifest"
        )
    cache = remote.cache_repo_for(source.fetch_url)
    if not remote.fetch_sha(cache, source.fetch_url, head):
        raise BadInput(f"cannot fetch {head[:12]} from {source.fetch_url}")
    return cache, head


def bump_step(
    source: Source,
    repo: GitRepo,
    parent: str,
    new: str,
    target_url: str,
    target_upstream: str | None,
    branch: str,
    message_body: str,
) -> BumpStep:
    """Make (but do not reference) the commit that moves the consumer's gitlink to `new`."""
    consumer = source.consumer
    entries = repo.tree_entries(parent, [consumer.gitlink, ".gitmodules"])
    entry = entries.get(consumer.gitlink)
    if entry is None or entry.kind != "commit":
        raise BadInput(
            f"{consumer.name}@{parent[:12]} has no gitlink at {consumer.gitlink}",
            hint="fix consumers[].gitlink in the manifest",
        )
    modules_entry = entries.get(".gitmodules")
    if modules_entry is not None and modules_entry.kind != "blob":
        modules_entry = None
    if modules_entry is not None and source.local is None:
        # The cache's .gitmodules: the one file a bump reads, fetched explicitly (no lazy fetch).
        remote.fetch_objects(repo, source.fetch_url, [modules_entry.sha])
    modules = git.parse_gitmodules(repo, modules_entry.sha) if modules_entry else []
    module = next((m for m in modules if m.path == consumer.gitlink), None)
    if module is None or modules_entry is None:
        raise BadInput(f"{consumer.name}@{parent[:12]}: .gitmodules has no entry for {consumer.gitlink}")
    url_changed = None
    info = repo.commit_info(parent)
    tree_sha = info.tree
    with repo.private_index(tree_sha) as index:
        git.index_set_entry(index, "160000", new, consumer.gitlink)
        if (
            module.url
            and target_upstream
            and remote.same_repo(remote.resolve_relative_url(module.url, consumer.url), target_upstream)
        ):
            # Credentials in a manifest URL are for fetching; they never go into a consumer's history.
            public_url = without_credentials(target_url)
            blob = git.gitmodules_with(repo, modules_entry.sha, module.name, "url", public_url)
            git.index_set_entry(index, modules_entry.mode, blob, ".gitmodules")
            url_changed = (without_credentials(module.url), public_url)
        tree = index.write_tree()
    old = entry.sha
    subject = f"build: pin {consumer.gitlink} at {new[:12]} (forkctl bump)"
    lines = [subject, "", f"{consumer.gitlink}: {old} -> {new}", ""]
    if url_changed:
        lines += [f".gitmodules submodule.{module.name}.url: {url_changed[0]} -> {url_changed[1]}", ""]
    message = "\n".join(lines) + message_body
    commit = git.commit_with_identity(repo, tree, [parent], message)
    return BumpStep(
        consumer,
        repo,
        source.fetch_url,
        parent,
        consumer.gitlink,
        old,
        new,
        commit,
        branch,
        url_changed,
        repo.ref_sha(f"refs/heads/{branch}"),
    )


def series_description(manifest: Manifest, fork: ForkContext) -> str:
    lines = [
        f"The fork head {fork.head} is {manifest.upstream.repo}@{fork.base}",
        f"+ {len(fork.patches)} patches:",
    ]
    lines += [f"  {i:>2}. {patch.subject}" for i, patch in enumerate(fork.patches, start=1)]
    return "\n".join(lines) + "\n"


def apply_step(step: BumpStep) -> None:
    """Create the step's branch (compare-and-swap: it must not exist, or already be this commit)."""
    if step.existing == step.commit:
        return
    if step.existing is not None:
        raise BadInput(
            f"branch {step.branch} already exists in {step.repo.path} at {step.existing[:12]}",
            hint=f"delete it (git branch -D {step.branch}) or pass another --fork-commit",
        )
    step.repo.update_ref(f"refs/heads/{step.branch}", step.commit, None, f"bump {step.gitlink}")


def push_step(step: BumpStep, protected: set[str]) -> None:
    """Push the new branch, never forced, never onto a protected (default or consumer) branch."""
    if step.branch in protected:
        raise BadInput(f"refusing to push to {step.branch}: it is the default or consumer branch")
    remote.push_branch(step.repo, step.push_url, step.commit, step.branch)


BUMP_BRANCH_PREFIX = "forkctl/bump-megatron-"


@dataclass
class BumpPlan:
    """Every consumer's new commit up to the last one bumped, and the check of the chain they make."""

    branch: str
    steps: list[BumpStep]
    check: ChainResult


def plan_bump(
    manifest: Manifest,
    fork: ForkContext,
    last: int,
    local_repos: dict[int, Path | None],
    progress: Progress,
) -> BumpPlan:
    """Plan consumers 0..last: each pins the new commit of the one before it (the first pins the fork
    head). Commits are made (objects only, no ref moves); then the planned chain is checked, with the
    planned commits counted as reachable because they are not pushed yet."""
    branch = f"{BUMP_BRANCH_PREFIX}{fork.head[:12]}"
    body = series_description(manifest, fork)
    steps: list[BumpStep] = []
    sources: list[Source] = []
    new_pin, target_url, target_upstream = fork.head, manifest.fork.url, manifest.upstream.url
    for index in range(last + 1):
        consumer = manifest.consumers[index]
        source = Source(consumer, local=local_repos.get(index))
        repo, head = consumer_repo(source, progress)
        progress(f"{consumer.name}: moving {consumer.gitlink} to {new_pin[:12]} on {branch}")
        step = bump_step(source, repo, head, new_pin, target_url, target_upstream, branch, body)
        steps.append(step)
        sources.append(
            Source(
                consumer,
                local=repo.git_dir,
                rev=step.commit,
                url=source.fetch_url,
                label=f"new branch {branch}",
            )
        )
        body = f"It pins {consumer.name} {step.commit} ({branch}), which pins the fork head.\n\n" + body
        new_pin, target_url, target_upstream = step.commit, consumer.url, consumer.upstream_url
    pending: dict[str, list[str]] = {}
    for step in steps:
        pending.setdefault(remote.normalise_url(step.consumer.url), []).append(step.commit)
    check = check_chain(manifest, sources, progress=progress, pending=pending, fork=fork)
    return BumpPlan(branch=branch, steps=steps, check=check)


def push_steps(steps: list[BumpStep], progress: Progress) -> None:
    """Push every new branch, never forced, never onto the consumer's own or default branch."""
    for step in steps:
        progress(f"pushing {step.branch} to {step.push_url}")
        push_step(step, {step.consumer.branch, remote.default_branch(step.push_url) or "main"})


# --- pictures of the chain -------------------------------------------------------------------------


def _head_links(result: ChainResult) -> list[LinkResult]:
    """One link per consumer for the picture: the commit checked first (its branch head / given rev)."""
    seen: dict[int, LinkResult] = {}
    for link in result.links:
        if link.index not in seen or not link.role.startswith("pinned by"):
            seen.setdefault(link.index, link)
    return [seen[i] for i in sorted(seen)]


def mermaid(manifest: Manifest, result: ChainResult) -> str:
    """The chain as a mermaid `graph LR` block: upstream base -> fork head -> consumers, edges = pins."""
    lines = ["```mermaid", "graph LR"]
    lines.append(f'  U["{manifest.upstream.repo}<br/>base {result.base[:12]}"]')
    lines.append(f'  F["{manifest.fork.repo}<br/>fork head {result.expected_head[:12]}"]')
    lines.append(f'  U -- "+{len(result.patches)} patches" --> F')
    previous = "F"
    for link in _head_links(result):
        node = f"C{link.index}"
        lines.append(f'  {node}["{link.consumer}<br/>{link.commit[:12]}"]')
        pinned = link.pinned[:12] if link.pinned else "no pin"
        lines.append(f'  {previous} -- "{link.status.value}: pinned {pinned}" --> {node}')
        colour = "#2da44e" if link.ok else "#cf222e"
        lines.append(f"  style {node} stroke:{colour},stroke-width:3px")
        previous = node
    lines.append("```")
    return "\n".join(lines)


def text_diagram(manifest: Manifest, result: ChainResult) -> list[str]:
    """The same chain in plain text, one line per node, the pin status on the arrow."""
    lines = [
        f"{manifest.upstream.repo}@{result.base[:12]}",
        f"  └─(+{len(result.patches)} patches)─> {manifest.fork.repo}@{result.expected_head[:12]} (fork head)",
    ]
    # Each consumer pins the one before it, so each is drawn one level under it (NeMo-RL under the
    # Bridge, not beside it).
    for depth, link in enumerate(_head_links(result)):
        pinned = link.pinned[:12] if link.pinned else "none"
        indent = "    " * (depth + 1) + "  "
        lines.append(
            f"{indent}└─[{link.status.value}: pins {pinned}]─ {link.consumer}@{link.commit[:12]} ({link.role})"
        )
    return lines


def chain_report(command: str, manifest: Manifest, result: ChainResult) -> Report:
    """The chain result as a Report: one table per link, problems with fixes, JSON, and the diagram."""
    out = Report(command=command)
    for link in result.links:
        pinned = link.pinned[:12] if link.pinned else "-"
        title = (
            f"{link.consumer}@{link.commit[:12]} ({link.role}) pins {link.target} at {link.gitlink}: "
            f"{pinned} -> {link.status.value}"
        )
        rows = [[f.check, f.status.value, f.message, f.fix] for f in link.findings]
        out.tables.append(Table(title=title, columns=["check", "status", "detail", "fix"], rows=rows))
        for finding in link.findings:
            if finding.status != Status.OK:
                out.fail(
                    Problem(
                        f"{link.consumer}@{link.commit[:12]}: {finding.status.value}: {finding.message}",
                        hint=finding.fix or None,
                    )
                )
    if result.fork_branch_notes:
        out.tables.append(
            Table(
                title=f"fork branch {manifest.fork.repo} {manifest.fork.branch}",
                columns=["check", "status", "detail", "fix"],
                rows=[[f.check, f.status.value, f.message, f.fix] for f in result.fork_branch_notes],
            )
        )
        for finding in result.fork_branch_notes:
            if finding.status != Status.OK:
                out.fail(Problem(finding.message, hint=finding.fix or None))
            elif finding.kind == "behind":
                out.problems.append(Problem(finding.message, level=Level.NOTICE))
    out.lines += text_diagram(manifest, result)
    verdict = (
        "the chain is consistent" if out.ok else f"{sum(not link.ok for link in result.links)} link(s) fail"
    )
    out.lines.append(f"check-pins: {'OK' if out.ok else 'FAILED'}: {verdict}")
    out.summary_markdown = mermaid(manifest, result)
    out.data = {
        "base": result.base,
        "expected_fork_head": result.expected_head,
        "patches": [p.subject for p in result.patches],
        "links": [
            {
                "consumer": link.consumer,
                "commit": link.commit,
                "role": link.role,
                "gitlink": link.gitlink,
                "target": link.target,
                "pinned": link.pinned,
                "url": link.url,
                "expected": link.expected,
                "status": link.status.value,
                "findings": [
                    {
                        "check": f.check,
                        "status": f.status.value,
                        "kind": f.kind,
                        "message": f.message,
                        "fix": f.fix,
                    }
                    for f in link.findings
                ],
            }
            for link in result.links
        ],
        "fork_branch": [
            {"check": f.check, "status": f.status.value, "kind": f.kind, "message": f.message}
            for f in result.fork_branch_notes
        ],
    }
    return out
