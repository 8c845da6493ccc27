"""The port itself: judge each patch on the new base plus the patches already ported, commit what
applies, record what was absorbed; stop on a conflict in the scratch worktree (--continue, --skip,
--abort); write the result as one transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import cast

import msgspec

from forkctl import locking
from forkctl.errors import BadInput
from forkctl.git.refs import check_branch_name
from forkctl.git.repo import GitRepo
from forkctl.manifest import Manifest
from forkctl.manifest.schema import DroppedEntry, DropReason
from forkctl.ops import export, replay
from forkctl.ops import state as session
from forkctl.ops.port import transaction
from forkctl.ops.port.judge import Judge, PatchVerdict, walk_series
from forkctl.ops.port.walk import Judged, old_series
from forkctl.series import Patch, Series

Tell = Callable[[str], None]  # told what the port does, a line per patch and per phase (progress)


class PortOutcome(msgspec.Struct):
    state: session.State
    conflict: session.ConflictReport | None = None
    range_diff: str = ""
    exported: list[export.ExportedPatch] | None = None


def _message(patch: Patch) -> str:
    """The ported commit's message: the patch's as it is, every provenance line kept and none added
    (`ops/export.py` says why)."""
    return patch.message


Skipped = tuple[str, str, str | None]  # skipped by hand: (by whom, when, the revert of what it picks)


def _absorbed(
    state: session.State, position: int, patch: Patch, verdict: PatchVerdict, skipped: Skipped | None = None
) -> None:
    """Record the drop of the patch at `position` as it will go under `dropped:`: the verdict's evidence,
    and for a patch skipped by hand who skipped it, when, and the revert of the commit it picks."""
    by, at, reverted_by = skipped or (None, None, None)
    evidence = DroppedEntry(
        subject=patch.subject,
        file=state.files[position],
        reason=cast(DropReason, verdict.reason),  # an absorbed verdict's reason is a drop rule
        upstream_commit=verdict.upstream_commit,
        proof=verdict.proof,
        base=state.base,
        provenance=list(patch.provenance),
        skipped_by=by,
        skipped_at=at,
        reverted_by=reverted_by,
    )
    state.steps.append(session.Step(file=state.files[position], commit=None, absorbed=evidence))


def _judge(repo: GitRepo, state: session.State) -> Judge:
    data = state.port_data
    return Judge(repo, data.old_base, state.base, data.old_commits, reapply_reverted=data.reapply_reverted)


def _quiet(_: str) -> None:
    """No progress wanted."""


def _run(
    repo: GitRepo, series: Series, state: session.State, start: int, tell: Tell = _quiet
) -> session.ConflictReport | None:
    """Walk the series from the patch at `start` on the head so far, recording each step; stop at the
    first conflict (or pick of a reverted upstream commit) in the scratch worktree."""

    def told(position: int, patch: Patch) -> None:
        tell(f"patch {position + 1}/{len(series.patches)}: {patch.subject}")

    batch = replay.CommitBatch(repo)  # written together, before anything names them
    for step in walk_series(_judge(repo, state), series.patches, start, state.head, batch, tell=told):
        verdict = step.verdict
        if verdict.kind == "absorbed":
            _absorbed(state, step.position, step.patch, verdict)
        elif verdict.kind == "applied":
            partial, reapplied = verdict.partial, verdict.reapplied
            file = state.files[step.position]
            state.steps.append(
                session.Step(file=file, commit=step.head, partial=partial, reapplied=reapplied)
            )
        else:
            batch.flush()
            return _stop(repo, state, step)
    batch.flush()
    return None


def _stop(repo: GitRepo, state: session.State, step: Judged) -> session.ConflictReport:
    """Stop at a conflict, or at a pick of an upstream commit upstream reverted (a decision)."""
    verdict = step.verdict
    if verdict.reverted_by is not None and verdict.upstream_commit is not None:
        state.port_data.reverted = (verdict.upstream_commit, verdict.reverted_by)
    stopped = session.open_conflict(repo, state, step.position, step.patch, step.head, verdict.merged)
    return msgspec.structs.replace(
        stopped,
        upstream_commit=verdict.upstream_commit,
        named_by=verdict.reason,
        own_lines=verdict.own_lines or "",
        reverted_by=verdict.reverted_by,
    )


def _finish(repo: GitRepo, manifest: Manifest, state: session.State, tell: Tell = _quiet) -> PortOutcome:
    tell(f"writing the patch files, the manifest and {state.branch}")
    exported, shown = transaction.finish(repo, manifest, state)
    return PortOutcome(state=state, range_diff=shown, exported=exported)


@locking.repository_locked
def start(
    repo: GitRepo,
    manifest: Manifest,
    series: Series,
    old_base: str,
    new_base: str,
    branch: str,
    backport: bool = False,
    tell: Tell = _quiet,
    reapply_reverted: bool = False,
) -> PortOutcome:
    check_branch_name(branch)
    session.refuse_if_in_progress(repo)
    session.remove_leftovers(repo)
    session.refuse_checked_out(repo, branch)
    descends = repo.history.is_ancestor(old_base, new_base)
    if not descends and not backport:
        raise BadInput(
            f"{new_base[:12]} does not descend from the current base {old_base[:12]}",
            hint="to carry the series to an older line (e.g. a release branch), pass --backport",
        )
    old_tip = repo.refs.branch_sha(branch)
    tell(f"rebuilding the series on the old base {old_base[:12]}")
    old_commits, old_head = old_series(repo, old_base, series, old_tip)
    state = session.State(
        operation="port",
        manifest=str(manifest.path),
        base=new_base,
        series_digest=series.digest,
        files=[entry.file for entry in manifest.series],
        branch=branch,
        force=True,
        old_tip=old_tip,
        worktree=str(session.worktree_path(repo)),
        port=session.PortData(
            old_base=old_base,
            old_commits=old_commits,
            old_head=old_head,
            backport=not descends,
            reapply_reverted=reapply_reverted,
        ),
    )
    conflict = _run(repo, series, state, 0, tell)
    if conflict is not None:
        return PortOutcome(state=state, conflict=conflict)
    return _finish(repo, manifest, state, tell)


def _resumable(repo: GitRepo, manifest: Manifest, series: Series) -> session.State:
    state = session.require(repo, "port", manifest.path)
    if series.digest != state.series_digest:
        raise BadInput("the patch series changed since the port stopped", hint="run forkctl port --abort")
    return state


@locking.repository_locked
def resume(
    repo: GitRepo,
    manifest: Manifest,
    load_series: Callable[[], Series],
    tell: Tell = _quiet,
    reapply_reverted: bool = False,
) -> PortOutcome:
    """Go on after a conflict was resolved, or finish a port that was killed while writing its results
    (then the series files may be half rewritten: they are not read, the state has everything).
    At a pick of a reverted upstream commit, only `reapply_reverted` goes on (with the worktree's
    tree: the pick merged again, or what the person made of it)."""
    state = session.require(repo, "port", manifest.path)
    if transaction.is_finishing(state):
        return _finish(repo, manifest, state, tell)
    series = load_series()
    state = _resumable(repo, manifest, series)
    _decided(state, reapply_reverted)
    index = state.conflict_index
    patch = series.patches[index]
    message = _message(patch)
    commit = session.commit_resolution(repo, state, patch, message)
    reverted = state.port_data.reverted
    reapplied = session.Reapplied(upstream_commit=reverted[0], reverted_by=reverted[1]) if reverted else None
    state.steps.append(
        session.Step(file=state.files[index], commit=commit, resolved=True, reapplied=reapplied)
    )
    return _go_on(repo, manifest, series, state, index, tell)


def _decided(state: session.State, reapply_reverted: bool) -> None:
    """A stop at a reverted pick goes on only with the person's decision; --reapply-reverted is that
    decision, and nothing else."""
    reverted = state.port_data.reverted
    if reverted is not None and not reapply_reverted:
        raise BadInput(
            f"{Path(state.files[state.conflict_index]).name} picks upstream {reverted[0][:12]}, which "
            f"upstream reverted in {reverted[1][:12]}: --continue does not re-apply it",
            hint="pass --reapply-reverted to apply it again, or --skip to drop it (recorded under dropped:)",
        )
    if reverted is None and reapply_reverted:
        raise BadInput(
            "--reapply-reverted: the port did not stop at a pick of a reverted upstream commit",
            hint="run forkctl port --continue once the conflict is resolved",
        )


@locking.repository_locked
def skip(
    repo: GitRepo, manifest: Manifest, load_series: Callable[[], Series], who: str, tell: Tell = _quiet
) -> PortOutcome:
    """Drop the conflicting patch on purpose: recorded under `dropped:` as skipped, by whom and when."""
    if transaction.is_finishing(session.require(repo, "port", manifest.path)):
        raise BadInput("the port is writing its results; nothing to skip", hint="run forkctl port --continue")
    series = load_series()
    state = _resumable(repo, manifest, series)
    index = state.conflict_index
    when = datetime.now(timezone.utc).replace(microsecond=0).isoformat()
    reverted = state.port_data.reverted
    verdict = PatchVerdict("absorbed", "skipped", reverted[0] if reverted else None)
    _absorbed(state, index, series.patches[index], verdict, (who, when, reverted[1] if reverted else None))
    return _go_on(repo, manifest, series, state, index, tell)


def _go_on(
    repo: GitRepo, manifest: Manifest, series: Series, state: session.State, index: int, tell: Tell
) -> PortOutcome:
    state.conflict_index, state.conflict_parent, state.conflict_paths = -1, "", []
    state.port_data.reverted = None
    session.save(repo, state)
    conflict = _run(repo, series, state, index + 1, tell)
    if conflict is not None:
        return PortOutcome(state=state, conflict=conflict)
    return _finish(repo, manifest, state, tell)


@locking.repository_locked
def abort(repo: GitRepo, manifest_path: Path) -> session.State | None:
    """Undo a stopped or interrupted port: files and manifest restored, the branch put back. Only the
    checkout whose manifest (`manifest_path`) started the port may abort it.

    None when the state was unreadable: only forkctl's scratch is removed (a port moves the branch last,
    and only after its state, with the backups, was written in full, so no ref needs moving back)."""
    try:
        state = session.require(repo, "port", manifest_path)
    except session.CorruptState:
        session.discard(repo)
        return None
    if transaction.is_finishing(state):
        transaction.undo(repo.refs, state)
    session.clear(repo)
    return state
