"""What a pull request that moves the chain says, as facts: the fork head and its base, the series with
provenance, what was dropped since the last pin, and the range-diff against the fork head pinned before.

Facts only: forkctl/report/pullrequest.py writes the Markdown. Every part that cannot be had (offline, a
consumer that does not answer, a previous pin that is not a fork head) stays None with a sentence in
`missing`, so a body can always be written from the manifest alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from forkctl.chain.bump import BumpPlan, plan_bump
from forkctl.chain.checks import chain_way_forward
from forkctl.chain.forkhead import ForkContext, fork_context
from forkctl.chain.model import Progress, WayForward
from forkctl.errors import ForkctlError
from forkctl.git import clonecache
from forkctl.git.repo import GitRepo
from forkctl.manifest import Manifest
from forkctl.manifest.schema import DroppedEntry
from forkctl.series import Patch, listed_provenance, load_series

if TYPE_CHECKING:
    from forkctl.git.history import History


class SeriesRow(msgspec.Struct, frozen=True):
    file: str
    subject: str
    provenance: str | None  # the commits the manifest names, else the patch's `cherry picked from` lines


class MoveFacts(msgspec.Struct):
    """Everything a pull-request body tells; None where it could not be found out (see `missing`)."""

    base: str
    series: list[SeriesRow]
    dropped: list[DroppedEntry]
    dropped_since: str | None = None  # the base of the previous pin the dropped list was cut at
    fork_head: str | None = None
    base_subject: str | None = None
    base_date: str | None = None
    previous_fork_head: str | None = None
    previous_base: str | None = None
    range_diff: str | None = None
    plan: BumpPlan | None = None
    # The upstream commit the chain wants the fork on, and why: the manifest base, or the newer one the
    # consumers already build on (then the move is `forkctl port --onto` it, not a bump), by the one
    # rule check-pins and sync follow (chain/wayforward.py); None when the pins diverge.
    wanted_base: str | None = None
    wanted_because: str | None = None
    way_forward: WayForward | None = None
    missing: list[str] = msgspec.field(default_factory=list)


def manifest_facts(manifest: Manifest, patches: list[Patch]) -> MoveFacts:
    """The facts the manifest and the patch files give without any repository."""
    rows = [
        SeriesRow(entry.file, patch.subject, ", ".join(listed_provenance(entry) or patch.provenance) or None)
        for entry, patch in zip(manifest.series, patches, strict=True)
    ]
    return MoveFacts(base=manifest.upstream.base, series=rows, dropped=list(manifest.model.dropped))


def gather(manifest: Manifest, upstream_location: str | None, last: int, progress: Progress) -> MoveFacts:
    """The facts for moving consumers 0..last to the fork head: built, planned (objects only, no ref
    moves, as `bump-bridge --dry-run`), and compared with what the first consumer pins now."""
    facts = manifest_facts(manifest, load_series(manifest).patches)
    try:
        fork = fork_context(manifest, upstream_location, progress)
    except ForkctlError as exc:
        facts.missing.append(f"the fork head (apply(series, base)) is not available: {exc.message}")
        return facts
    plan = None
    if not manifest.consumers:
        facts.missing.append("the chain is not available: the manifest lists no consumers")
    else:
        try:
            plan = plan_bump(manifest, fork, last, {}, progress)
        except ForkctlError as exc:
            facts.missing.append(f"the chain (the consumers' pins) is not available: {exc.message}")
    complete(facts, manifest, fork, plan, progress)
    return facts


def complete(
    facts: MoveFacts, manifest: Manifest, fork: ForkContext, plan: BumpPlan | None, progress: Progress
) -> None:
    """Add what the fork context and the plan tell: the head, the base's subject and date, the pin the
    first consumer holds now and, when that is a fork head, the range-diff and the dropped cut."""
    facts.fork_head, facts.plan = fork.head, plan
    try:
        info = fork.upstream_repo.commits.commit_info(fork.base)
        facts.base_subject, facts.base_date = info.subject, info.author.date
    except ForkctlError:
        facts.missing.append(f"the base commit's subject and date are not available ({fork.base[:12]})")
    if plan is None or not plan.steps:
        facts.missing.append("the base the chain wants is not known: the consumers' pins are unknown")
        facts.missing.append("the range-diff is not available: the consumers' pins are unknown")
        return
    _wanted_base(facts, manifest, fork, progress)
    previous = plan.steps[0].old
    facts.previous_fork_head = previous
    if previous is None or previous == fork.head:
        facts.missing.append("the range-diff is skipped: no previous fork head (the pin does not change)")
        return
    try:
        _previous_series(facts, manifest, fork, previous, progress)
    except ForkctlError as exc:
        facts.missing.append(f"the range-diff is not available: {exc.message}")


def _wanted_base(facts: MoveFacts, manifest: Manifest, fork: ForkContext, progress: Progress) -> None:
    """The base the chain wants, as check-pins finds it over every consumer's pins: the one way
    forward (the manifest base when no pin builds past it), or why there is none."""
    try:
        way = chain_way_forward(manifest, fork, progress)
    except ForkctlError as exc:
        facts.missing.append(f"the base the chain wants is not known: the consumers' pins: {exc.message}")
        return
    facts.way_forward, facts.wanted_base, facts.wanted_because = way, way.target, way.because
    if way.command is not None:
        facts.wanted_because = (
            f"{way.because}: move the fork there first with `{way.command}`; bumping to this fork head "
            "would take those commits away"
        )


def _previous_series(
    facts: MoveFacts, manifest: Manifest, fork: ForkContext, previous: str, progress: Progress
) -> None:
    """The previous fork head's base, the dropped entries since it, and the range-diff old vs new."""
    upstream_repo = fork.upstream_repo
    tip = fork.upstream_tip(manifest.upstream.branch)  # full upstream history first: no shallow boundary
    progress(f"fetching the previously pinned fork head {previous[:12]} from {manifest.fork.url}")
    if not clonecache.fetch_sha(upstream_repo, manifest.fork.url, previous, depth=None):
        facts.missing.append(
            f"the range-diff is not available: the previous pin {previous[:12]} is not fetchable from "
            f"{manifest.fork.url}"
        )
        return
    previous_base = _own_base(upstream_repo.history, previous, fork.base, tip)
    if previous_base is None:
        facts.missing.append(f"the range-diff is skipped: {previous[:12]} shares no history with upstream")
        return
    if previous_base == previous or upstream_repo.history.is_ancestor(previous, fork.base):
        facts.missing.append(
            f"the range-diff is skipped: no previous fork head (the pin {previous[:12]} is a plain upstream "
            "commit)"
        )
        return
    facts.previous_base = previous_base
    facts.dropped, facts.dropped_since = (
        _dropped_since(upstream_repo, facts.dropped, previous_base),
        previous_base,
    )
    blobs = upstream_repo.diffs.blobs_in_range(previous_base, previous) + upstream_repo.diffs.blobs_in_range(
        fork.base, fork.head
    )
    clonecache.fetch_objects(upstream_repo, manifest.fork.url, blobs)
    facts.range_diff = upstream_repo.patches.series_range_diff(
        (previous_base, previous), (fork.base, fork.head)
    )
    if facts.range_diff is None:
        facts.missing.append("the range-diff is not available: git range-diff failed")


def _own_base(history: History, previous: str, base: str, tip: str | None) -> str | None:
    """The upstream commit the previous pin stands on: the newest of its merge-bases with the manifest
    base and with upstream's branch tip. Its merge-base with the manifest base alone would count the
    upstream commits between the two bases as the previous series' patches (removed in the range-diff)."""
    found = [
        b
        for upstream in dict.fromkeys([base, *([tip] if tip else [])])
        for b in history.merge_bases(previous, upstream)[:1]
    ]
    if not found:
        return None
    newest = found[0]
    for candidate in found[1:]:
        if history.is_ancestor(newest, candidate):
            newest = candidate
    return newest


def _dropped_since(
    upstream_repo: GitRepo, dropped: list[DroppedEntry], previous_base: str
) -> list[DroppedEntry]:
    """The entries dropped after the previous pin's base: those whose base is not at or before it (an
    entry whose base this repository does not know is kept)."""
    kept = []
    for entry in dropped:
        at = upstream_repo.objects.resolve_commit(entry.base)
        if at is None or not (at == previous_base or upstream_repo.history.is_ancestor(at, previous_base)):
            kept.append(entry)
    return kept
