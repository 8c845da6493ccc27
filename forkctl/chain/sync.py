"""What `forkctl sync` does on a target, as facts: the port on objects, the ported series as `forkctl
port` would write it, its fork head, how it would be published, the range-diff, and for each patch that
conflicts the upstream commit that first breaks it; plus the early warning on upstream's branch tip.

Nothing moves here but commit objects in the upstream repository: pushing, pull requests and the dashboard
are the command's. The ported head is apply(ported series, target), built from the patch files port
would write, so it is the fork head the toolkit gets once that port lands, whatever the merges made.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import msgspec

from forkctl.chain.forkhead import ForkContext
from forkctl.chain.model import Progress
from forkctl.chain.ownfiles import own_files
from forkctl.chain.publish import PublishPlan, plan_publish
from forkctl.chain.synctarget import SyncTarget
from forkctl.errors import Unexpected
from forkctl.files import atomic_write
from forkctl.git.repo import GitRepo
from forkctl.git.sha import Sha
from forkctl.manifest import Manifest
from forkctl.ops import export, replay
from forkctl.ops.port.bisect import FirstBreak, FirstBreaks
from forkctl.ops.port.preview import port_objects, preview
from forkctl.ops.port.walk import Judged
from forkctl.series import Patch, Series, parse_patches


class TipBreak(msgspec.Struct, frozen=True):
    """A patch that ports onto the target but breaks further up upstream's branch."""

    position: int
    subject: str
    found: FirstBreak
    ahead: int  # upstream commits from the target to the breaking commit (inclusive)


class TipPreview(msgspec.Struct, frozen=True):
    """The series judged on upstream's branch tip, ahead of the target."""

    tip: str
    ahead: int  # upstream commits target..tip
    entries: list[Judged]
    warnings: list[TipBreak]


class SyncPlan(msgspec.Struct):
    target: SyncTarget
    base: str
    old_head: str
    entries: list[Judged]
    breaks: dict[int, FirstBreak] = msgspec.field(default_factory=dict)  # conflicting position -> culprit
    head: Sha | None = None  # apply(ported series, target); None on a conflict
    ported: list[Patch] = msgspec.field(default_factory=list)
    files: list[str] = msgspec.field(default_factory=list)  # the ported series' file names
    digest: str | None = None  # the ported series' digest (what GPU evidence must name)
    publish: PublishPlan | None = None
    range_diff: str | None = None
    tip: TipPreview | None = None
    # The words a local port needs to run on the objects this sync used (` --repo PATH` for a local
    # --upstream-repo; "" for the cache clone), and the port's ways on with them: printed, they work.
    where: str = ""
    ways: dict[str, str] = msgspec.field(default_factory=dict)

    @property
    def conflicts(self) -> list[Judged]:
        return [entry for entry in self.entries if entry.verdict.kind == "conflict"]

    @property
    def absorbed(self) -> list[Judged]:
        return [entry for entry in self.entries if entry.verdict.kind == "absorbed"]


def plan_sync(manifest: Manifest, fork: ForkContext, target: SyncTarget, progress: Progress) -> SyncPlan:
    """Port the series onto the target on objects; clean: the ported head and its publish plan
    (onto the fork branch's sync branch, nothing pushed); a conflict: the first break of each patch."""
    upstream_repo, series = fork.upstream_repo, Series(base=fork.base, patches=fork.patches)
    progress(f"porting {len(fork.patches)} patches onto {target.commit[:12]} (objects only)")
    ported = port_objects(upstream_repo, series, fork.base, target.commit)
    plan = SyncPlan(target=target, base=fork.base, old_head=fork.head, entries=ported.entries)
    search = _breaks_on(upstream_repo, series, fork.base, target.commit, ported.entries)
    for entry in plan.conflicts:
        progress(
            f"bisecting {fork.base[:12]}..{target.commit[:12]} for what first breaks {entry.patch.subject}"
        )
        found = search.find(entry.position)
        if found is not None:
            plan.breaks[entry.position] = found
    if not plan.conflicts:
        _ported_head(manifest, fork, plan, ported.commits)
        assert plan.head is not None  # _ported_head built it (or raised)
        onto = Sha(target.commit)  # a full SHA: synctarget resolved it
        head_fork = ForkContext(
            upstream_repo,
            fork.upstream_url,
            fork.upstream_local,
            onto,
            plan.head or onto,
            plan.ported,
            own_files(manifest, target.commit),
        )
        plan.publish = plan_publish(
            manifest, head_fork, manifest.fork.branch, manifest.fork.url, progress, True, fork.patches
        )
        if plan.head != fork.head and plan.ported:
            plan.range_diff = upstream_repo.patches.series_range_diff(
                (fork.base, fork.head), (target.commit, plan.head)
            )
    return plan


def _ported_head(manifest: Manifest, fork: ForkContext, plan: SyncPlan, commits: list[str]) -> None:
    """The ported series as port would export it, and apply(that series, target)."""
    exported = export.render(fork.upstream_repo, manifest, commits)
    with tempfile.TemporaryDirectory(prefix="forkctl-sync-") as scratch:
        paths = []
        for patch in exported:
            path = Path(scratch) / Path(patch.file).name
            atomic_write(path, patch.content)
            paths.append(path)
        plan.ported = parse_patches(paths)
    plan.files = [patch.file for patch in exported]
    built = replay.build_series(
        fork.upstream_repo, Sha(plan.target.commit), plan.ported
    )  # synctarget resolved it
    if built.conflict is not None:  # the exported patches are the ported commits' own diffs
        raise Unexpected(f"the ported series does not apply on {plan.target.commit[:12]} as exported")
    plan.head = built.head
    plan.digest = Series(base=plan.target.commit, patches=plan.ported).digest


def preview_tip(
    manifest: Manifest, fork: ForkContext, plan: SyncPlan, progress: Progress
) -> TipPreview | None:
    """The early warning: the series on upstream's branch tip when it is ahead of the target, and for
    each patch that conflicts there but not on the target, the upstream commit that first breaks it."""
    tip = fork.upstream_tip(manifest.upstream.branch)
    upstream_repo, target = fork.upstream_repo, plan.target.commit
    if tip is None or tip == target or not upstream_repo.history.is_ancestor(target, tip):
        return None
    progress(f"previewing the series on upstream's tip {tip[:12]} (early warning)")
    series = Series(base=fork.base, patches=fork.patches)
    entries = preview(upstream_repo, series, fork.base, tip)
    on_target = {entry.position for entry in plan.conflicts}
    warnings = []
    search = _breaks_on(upstream_repo, series, fork.base, tip, entries)
    for entry in entries:
        if entry.verdict.kind != "conflict" or entry.position in on_target:
            continue
        found = search.find(entry.position)
        if found is not None:
            ahead = upstream_repo.history.count(f"{target}..{found.commit}")
            warnings.append(TipBreak(entry.position, entry.patch.subject, found, ahead))
    return TipPreview(
        tip=tip, ahead=upstream_repo.history.count(f"{target}..{tip}"), entries=entries, warnings=warnings
    )


def _breaks_on(
    upstream_repo: GitRepo, series: Series, base: str, target: str, entries: list[Judged]
) -> FirstBreaks:
    """One bisection of base..target for every conflicting patch, seeded with the merges already made
    on the target (as `status --onto --first-break` does): no candidate is merged twice."""
    search = FirstBreaks(upstream_repo, series, base, target)
    search.know_target(entries)
    return search
