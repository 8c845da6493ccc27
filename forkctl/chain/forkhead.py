"""The fork head, and why a pin is not it.

The fork link is a SHA comparison: the nearest consumer must pin exactly `apply(series, base)`, built
reproducibly (forkctl.ops.replay) in the upstream repository. When it pins something else,
`diagnose_fork_pin` says why in the fork's own terms: another base, a missing / edited / extra patch,
a plain upstream commit.
"""

from __future__ import annotations

import msgspec

from forkctl.chain.model import ChainFinding, Progress, Status, WantedBase
from forkctl.chain.ownfiles import OwnFiles, checked_own, named, unpublished_paths
from forkctl.chain.reachable import base_unfetched
from forkctl.chain.sources import local_branch_tip, parse_location
from forkctl.errors import BadInput
from forkctl.git import clonecache, remote
from forkctl.git.history import History
from forkctl.git.objects import Objects
from forkctl.git.repo import GitRepo
from forkctl.git.runner import GitFailed
from forkctl.git.sha import Sha, TreeSha, is_full_sha
from forkctl.manifest import Manifest
from forkctl.ops import replay
from forkctl.series import Patch, Series, load_series

# + sha256(base, patch bytes): the fork head built from them. Named apart from the `built/` refs of a
# forkctl that fell back to a 3-way merge, so a head such a version merged is never taken for apply's.
BUILT_REFS = "refs/forkctl/applied/"
MAX_LISTED_COMMITS = 50  # beyond this many fork commits the diagnosis lists a count, not each one


class ForkContext(msgspec.Struct):
    """The upstream repository with the base, the reproducible head built in it, and the series."""

    upstream_repo: GitRepo
    upstream_url: str
    upstream_local: GitRepo | None
    base: Sha  # the manifest's base, resolved
    head: Sha  # apply(series, base)
    patches: list[Patch]
    owned: OwnFiles | None = None  # fork.own_paths: what a published merge carries beside the head
    _upstream_tip: str | None = None
    _history_fetched: bool = False

    def upstream_tip(self, branch: str) -> str | None:
        """The upstream branch tip, with its history in `upstream_repo` (fetched on first need only)."""
        if self._upstream_tip is not None:
            return self._upstream_tip
        if self.upstream_local is not None:
            self._upstream_tip = local_branch_tip(self.upstream_local.refs, branch, ("origin", "upstream"))
            return self._upstream_tip
        if not self._history_fetched:
            listed = remote.listed_refs(self.upstream_url).refs
            clonecache.fetch_history(self.upstream_repo, self.upstream_url, listed)
            self._history_fetched = True
        self._upstream_tip = self.upstream_repo.refs.ref_sha(f"refs/forkctl/heads/{branch}")
        return self._upstream_tip

    @property
    def bump_fix(self) -> str:
        return f"pin the reproducible fork head {self.head[:12]}: forkctl bump-bridge"

    def head_tree(self) -> TreeSha:
        """The tree of the fork head (read in the repository it was built in)."""
        return self.upstream_repo.commits.commit_info(self.head).tree


def _base_and_built_head(
    objects: Objects, given: str, series: Series | None
) -> tuple[Sha | None, Sha | None, bool]:
    """(the commit the manifest base names, the fork head built before for it and the series when
    `objects` holds it, whether that was asked) in one `cat-file --batch-check`: a full base SHA names
    the built ref before it is resolved. An abbreviated base, or a series that does not read, is asked
    alone (and the built ref later, from the resolved base)."""
    base_query = f"{given}^{{commit}}"
    built = BUILT_REFS + Series(base=given, patches=series.patches).digest if series else None
    queries = [base_query, *([built] if built and is_full_sha(given) else [])]
    found = objects.resolve_commits(queries)
    base = found[base_query]
    asked = len(queries) == 2 and base == given
    return base, (found[queries[-1]] if asked else None), asked


def fork_context(
    manifest: Manifest,
    upstream_location: str | None,
    progress: Progress,
    location_flag: str = "--upstream-repo",
) -> ForkContext:
    """Build apply(series, base) in the upstream repository: `--upstream-repo` (a clone, lent as alternate
    objects, or a URL) or the cache for the manifest's upstream URL. `location_flag` is the option
    that names `upstream_location` in the calling verb, for the hints."""
    upstream_local: GitRepo | None = None
    url = manifest.upstream.url
    if upstream_location is not None:
        local, _, given_url = parse_location(upstream_location)
        if local is not None:
            upstream_local = GitRepo(local)
        else:
            url = given_url or url
    repo = clonecache.cache_repo_for(url, alternates=[upstream_local.git_dir] if upstream_local else None)
    try:
        series: Series | None = load_series(manifest)
    except BadInput:
        series = None  # told after the base, as ever: a missing base is the first thing to fix
    base, head, asked = _base_and_built_head(repo.objects, manifest.upstream.base, series)
    why = ""
    if base is None:
        progress(f"fetching the base {manifest.upstream.base[:12]} from {url}")
        if is_full_sha(manifest.upstream.base):
            why = clonecache.fetch_sha_why(repo, url, manifest.upstream.base) or ""
            base = None if why else manifest.upstream.base
    if base is None:
        raise base_unfetched(manifest.upstream.base, upstream_location or url, why, location_flag)
    patches = (series or load_series(manifest)).patches
    # apply(series, base) is a pure function of the base and the patch bytes: a head built before in
    # this repository for the same inputs is reused (one ref read instead of ~6 git processes per patch).
    built_ref = BUILT_REFS + Series(base=base, patches=patches).digest
    if not asked:
        head = repo.refs.ref_sha(built_ref)
        head = head if head is not None and not repo.objects.missing_objects([head]) else None
    if head is not None:
        owned = checked_own(manifest, repo.objects, base, head, patches)
        return ForkContext(repo, url, upstream_local, base, head, patches, owned)
    if upstream_local is None:
        touched = list(dict.fromkeys(path for patch in patches for path in patch.paths))
        at_base = repo.objects.tree_entries(base, touched)
        clonecache.fetch_objects(repo, url, [e.sha for e in at_base.values() if e.kind == "blob"])
    progress(f"building the fork head: {manifest.upstream.repo}@{base[:12]} + {len(patches)} patches")
    result = replay.build_series(repo, base, patches)
    if result.conflict is None:
        repo.refs.set_ref(built_ref, result.head, "apply(series, base)")
    if result.conflict is not None:
        # No 3-way head: the fork head is apply(series, base) or nothing, in every repository alike.
        raise BadInput(
            f"the series is stale on its base {base[:12]}: {result.conflict.patch.path.name} does not "
            f"apply as written, so there is no fork head to check pins against: "
            f"{result.conflict.message.strip()}",
            hint=replay.stale_fix(base),
        )
    owned = checked_own(manifest, repo.objects, base, result.head, patches)
    return ForkContext(repo, url, upstream_local, base, result.head, patches, owned)


# --- why a pin is not the fork head ---------------------------------------------------------------


class Relation(msgspec.Struct, frozen=True):
    """Where a commit lies relative to the manifest base."""

    where: str  # "base", "ahead", "behind" or "diverged"
    count: int  # commits ahead (or behind); "diverged": those the base lacks (-1: not known)
    base: str

    @property
    def text(self) -> str:
        """'the manifest base', 'N commits ahead of ...', 'N commits behind ...' or 'diverged from ...'."""
        if self.where == "base":
            return "the manifest base"
        if self.where == "diverged":
            return f"diverged from the manifest base {self.base[:12]}"
        side = "ahead of" if self.where == "ahead" else "behind"
        return f"{self.count} commits {side} the manifest base {self.base[:12]}"

    def wants(self, commit: str) -> WantedBase | None:
        """The base the chain wants when `commit` holds upstream commits the manifest base lacks."""
        if self.where not in ("ahead", "diverged"):
            return None
        return WantedBase(commit, self.count, descends=self.where == "ahead")


def relation(history: History, commit: str, base: str) -> Relation:
    """Where `commit` lies relative to `base` (`history` holds the history of both; commits are enough)."""
    if commit == base:
        return Relation("base", 0, base)
    counts = history.ahead_behind(base, commit)  # one rev-list where asking ancestry, then counting, took two
    if counts is None:  # git could not walk them: asked one question at a time, as before
        return _relation_apart(history, commit, base)
    ahead, behind = counts
    if behind == 0:
        return Relation("ahead", ahead, base)
    if ahead == 0:
        return Relation("behind", behind, base)
    return Relation("diverged", ahead, base)


def _relation_apart(history: History, commit: str, base: str) -> Relation:
    """`relation` from an ancestry question each way, then a count (git's lazy fetch allowed, as
    every history question in `history` is)."""
    if history.is_ancestor(base, commit):
        return Relation("ahead", history.count(f"{base}..{commit}"), base)
    if history.is_ancestor(commit, base):
        return Relation("behind", history.count(f"{commit}..{base}"), base)
    try:
        lacks = history.count(f"{base}..{commit}")
    except GitFailed:  # a commit git cannot walk: how many it has is not known
        lacks = -1
    return Relation("diverged", lacks, base)


def _relation(history: History, commit: str, base: str) -> str:
    return relation(history, commit, base).text


def _relation_asked_apart(history: History, commit: str, base: str) -> str:
    return _relation_apart(history, commit, base).text


def _mismatch(kind: str, message: str, fix: str, wants: WantedBase | None = None) -> ChainFinding:
    return ChainFinding("pin", Status.MISMATCH, kind, message, fix, wants=wants)


def follow_the_consumer(wants: WantedBase, head: str) -> tuple[str, str]:
    """(what to add to the finding's message, its fix) for a pin on a base the manifest base lacks:
    the chain follows the consumer, so the fork moves there; a bump would take commits away."""
    many = f"{wants.lacks} upstream commits" if wants.lacks >= 0 else "upstream commits"
    said = (
        f": the consumer already builds on {wants.commit[:12]}, which has {many} "
        f"the manifest base lacks, so the chain wants the fork on {wants.commit[:12]} (bumping the pin "
        f"to the fork head {head[:12]} would take those commits away)"
    )
    if not wants.descends:
        said += "; it does not descend from the manifest base, so the port is a backport"
    return said, f"move the fork onto that base: {wants.port_command}, then forkctl bump-bridge"


def unpatched_upstream(history: History, pinned: str, ctx: ForkContext) -> ChainFinding:
    """The finding for a pin on upstream's branch: where it is relative to the base (`history` holds the
    history of both; commits are enough). A pin the base lacks commits of says where the chain wants
    the fork (`forkctl port --onto` it), not a bump that would go back."""
    where = relation(history, pinned, ctx.base)
    message = (
        f"pins an unpatched upstream commit {pinned[:12]}, {where.text}, "
        f"with none of the {len(ctx.patches)} patches"
    )
    wants = where.wants(pinned)
    if wants is None:
        return _mismatch("unpatched-upstream", message, ctx.bump_fix)
    said, fix = follow_the_consumer(wants, ctx.head)
    return _mismatch("unpatched-upstream", message + said, fix, wants)


def publish_merge_finding(
    repo: GitRepo, pinned: str, head: str, head_tree: TreeSha, owned: OwnFiles | None = None
) -> ChainFinding | None:
    """A pinned merge commit judged as what `forkctl publish` makes on a fork branch: a merge that has
    the fork head among its parents and exactly the published tree (the head's, with the fork-owned
    paths of `owned` as its first parent has them: ownfiles.published_tree) is the fork head,
    published (OK). When only one of the two holds, the finding says which; None for a commit that is
    no merge, or a merge with neither (the usual diagnosis then says what it is). `repo` holds the
    commit object."""
    tree, parents = repo.commits.recorded_parents(pinned)
    if len(parents) < 2:
        return None
    if owned is not None:
        off = unpublished_paths(repo.objects, tree, parents[0], head_tree, owned)
    else:
        off = [] if tree == head_tree else [f"tree {tree[:12]} vs {head_tree[:12]}"]
    has_head, same_tree = head in parents, not off
    carried = "" if tree == head_tree else " plus the fork's own files of its first parent"
    if has_head and same_tree:
        return ChainFinding(
            "pin",
            Status.OK,
            "published-merge",
            f"pins {pinned[:12]}, the published merge of the fork head {head[:12]} (the head's tree{carried}; "
            "forkctl publish)",
        )
    fix = f"pin the fork head {head[:12]} or its published merge (forkctl publish), then forkctl bump-bridge"
    if has_head:
        message = (
            f"pins {pinned[:12]}, a merge of the fork head {head[:12]} whose tree is not the published one "
            f"(the head's, with fork.own_paths as its first parent {parents[0][:12]} has them): it "
            f"differs in {named(off)}"
        )
        return _mismatch("publish-merge-tree", message, fix)
    if same_tree:
        shown = ", ".join(p[:12] for p in parents)
        message = (
            f"pins {pinned[:12]}, a merge with the fork head's tree{carried} whose parents ({shown}) do not "
            f"include the fork head {head[:12]}"
        )
        return _mismatch("publish-merge-parents", message, fix)
    return None


def diagnose_fork_pin(ctx: ForkContext, pinned: str, branch: str) -> list[ChainFinding]:
    """Why `pinned` is not apply(series, base): one finding per reason, most fundamental first.

    `ctx.upstream_repo` must hold `pinned` with its history (the caller fetched it from the fork URL).
    """
    repo, base, fix = ctx.upstream_repo, ctx.base, ctx.bump_fix
    if pinned == base:
        message = (
            f"pins the plain upstream base {base[:12]} with none of the {len(ctx.patches)} patches "
            f"(the fork head is {ctx.head[:12]})"
        )
        return [_mismatch("unpatched-upstream", message, fix)]
    tip = ctx.upstream_tip(branch)
    if tip is not None and repo.history.is_ancestor(pinned, tip):
        return [unpatched_upstream(repo.history, pinned, ctx)]
    own = repo.history.commits_not_in(pinned, [tip, base] if tip else [base])
    bases = repo.history.merge_bases(pinned, tip or base)
    findings = _base_findings(repo.history, pinned, bases, base, ctx.head, fix)
    if not bases:
        return findings
    findings += _match_patches(repo, own, ctx.patches, fix)
    if not findings:
        message = (
            f"{pinned[:12]} carries exactly the series on the manifest base but is not the reproducible "
            f"commit {ctx.head[:12]} (author, date or message differ)"
        )
        findings.append(_mismatch("not-reproducible", message, fix))
    return findings


def _base_findings(
    history: History, pinned: str, bases: list[str], base: str, head: str, fix: str
) -> list[ChainFinding]:
    """What the pin's merge-bases with upstream say: criss-cross history, no shared history, another base."""
    findings: list[ChainFinding] = []
    if len(bases) > 1:
        message = f"has {len(bases)} merge-bases with upstream (criss-cross history)"
        findings.append(_mismatch("criss-cross", message, fix))
    if not bases:
        findings.append(_mismatch("unrelated", f"{pinned[:12]} shares no history with upstream", fix))
    elif bases[0] != base:
        where = relation(history, bases[0], base)
        message = f"is built on another base {bases[0][:12]}, {where.text}"
        wants = where.wants(bases[0])
        if wants is not None:
            said, follow = follow_the_consumer(wants, head)
            findings.append(_mismatch("wrong-base", message + said, follow, wants))
        else:  # an older base: the fork head is newer, and the bump moves the consumer forward
            findings.append(_mismatch("wrong-base", message, fix))
    return findings


def _match_patches(repo: GitRepo, commits: list[str], patches: list[Patch], fix: str) -> list[ChainFinding]:
    """Compare the fork's own commits with the series by patch-id (and by subject, to spot edits)."""
    matched, extras, findings = _sort_commits(repo, commits, patches)
    findings += [
        _mismatch("missing-patch", f"patch missing: {patch.path.name} ({patch.subject})", fix)
        for position, patch in enumerate(patches)
        if position not in matched
    ]
    if extras:
        shown = extras[:MAX_LISTED_COMMITS]
        more = f" and {len(extras) - len(shown)} more" if len(extras) > len(shown) else ""
        findings.append(
            _mismatch(
                "extra-commit",
                f"{len(extras)} extra commit(s) not in the series: {'; '.join(shown)}{more}",
                "add them to the series (forkctl export) or drop them, rebuild, then forkctl bump-bridge",
            )
        )
    if matched != sorted(matched) and not any(f.kind in ("missing-patch",) for f in findings):
        findings.append(
            _mismatch("patch-order", "the patches are applied in another order than the series", fix)
        )
    return findings


def _sort_commits(
    repo: GitRepo, commits: list[str], patches: list[Patch]
) -> tuple[list[int], list[str], list[ChainFinding]]:
    """(series positions matched, in commit order; extra commits; edited-patch findings): a commit is a
    patch when its patch-id matches, an edit of one when only its subject does, else an extra."""
    by_id = {p.patch_id: i for i, p in enumerate(patches)}
    by_subject = {p.subject: i for i, p in enumerate(patches)}
    matched: list[int] = []
    extras: list[str] = []
    edited: list[ChainFinding] = []
    for sha in commits:
        info = repo.commits.commit_info(sha)
        if len(info.parents) > 1:
            extras.append(f"{sha[:12]} (merge) {info.subject}")
            continue
        position = by_id.get(repo.patches.commit_patch_id(sha))
        if position is not None:
            matched.append(position)
            continue
        position = by_subject.get(info.subject)
        if position is not None and position not in matched:
            matched.append(position)
            patch = patches[position]
            edited.append(
                _mismatch(
                    "edited-patch",
                    f"commit {sha[:12]} {info.subject!r} differs from its file {patch.path.name} "
                    f"(patch-id {repo.patches.commit_patch_id(sha)[:12]} vs {patch.patch_id[:12]})",
                    "export the edit into the patch file (forkctl export) or rebuild from the file, then bump",
                )
            )
            continue
        extras.append(f"{sha[:12]} {info.subject}")
    return matched, extras, edited
