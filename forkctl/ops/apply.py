"""apply(series, base) onto a branch: a pure function of the base and the patch bytes.

No ref moves until every patch has a commit; the branch is then set with compare-and-swap against the
tip it had when the build started. The user's HEAD, index and files are never read or written.

A patch that does not apply as written on its own base is stale (`replay`): the apply is refused
before anything is written (no state, no worktree, no ref), the same way in every clone, with the fix.
`--continue` / `--abort` remain for a stop an earlier forkctl left on disk (its state file and
worktree), so such a repository can still be finished or cleaned up.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import msgspec

from forkctl import locking
from forkctl.errors import BadInput
from forkctl.git.refs import check_branch_name
from forkctl.git.repo import GitRepo
from forkctl.git.sha import Sha
from forkctl.manifest import Manifest
from forkctl.ops import replay
from forkctl.ops import state as session
from forkctl.series import Series


class Outcome(msgspec.Struct):
    state: session.State
    conflict: session.ConflictReport | None = None  # a resumed (earlier forkctl's) stop stopped again
    stale: replay.Conflict | None = None  # the first patch that does not apply as written: refused


def resolve_base(repo: GitRepo, wanted: str, manifest: Manifest) -> Sha:
    """Full SHA of `wanted`; it must be the manifest's base (a different base is a port)."""
    full = repo.objects.resolve_commit(wanted)
    if full is None:
        raise BadInput(
            f"unknown commit {wanted!r}: {repo.git_dir} has no commit by that name",
            hint="check the SHA, or fetch upstream into that repository",
        )
    # Usually the same full SHA as --base: then there is nothing more to ask git.
    same = manifest.upstream.base in (wanted, full)
    manifest_base = full if same else repo.objects.resolve_commit(manifest.upstream.base)
    if full != manifest_base:
        raise BadInput(
            f"{full[:12]} is not the manifest's base {manifest.upstream.base[:12]}: "
            "the series is only known to apply on its own base",
            hint=f"to move the series to {full[:12]}, run forkctl port --onto {full}",
        )
    return full


def _files(manifest: Manifest) -> list[str]:
    return [entry.file for entry in manifest.series]


def _run(
    repo: GitRepo,
    series: Series,
    state: session.State,
    start: int,
    parent: Sha,
    built: replay.BuildResult | None = None,
    on_patch: Callable[[str], None] | None = None,
) -> Outcome:
    """Build patches[start:] onto `parent` via the fast path (unless `built` already holds that build;
    `state.base` is a full SHA, checked when the state was made or loaded);
    a resumed stop whose later patch does not apply stops in the worktree again."""
    if built is None:
        built = replay.build_series(
            repo, Sha(state.base), series.patches, start=start, parent=parent, on_patch=on_patch
        )
    for applied, file in zip(built.applied, state.files[start:], strict=False):
        state.steps.append(session.Step(file=file, commit=applied.commit))
    if built.conflict is not None:
        conflict = session.open_conflict(
            repo, state, built.conflict.index, built.conflict.patch, built.conflict.parent
        )
        return Outcome(state=state, conflict=conflict)
    session.set_branch(repo, state.branch, state.head, state.old_tip)
    session.clear(repo)
    return Outcome(state=state)


@locking.repository_locked
def start(
    repo: GitRepo,
    manifest: Manifest,
    series: Series,
    base: Sha,
    branch: str,
    force: bool,
    on_patch: Callable[[str], None] | None = None,
) -> Outcome:
    check_branch_name(branch)
    session.refuse_if_in_progress(repo)
    session.remove_leftovers(repo)
    session.refuse_checked_out(repo, branch)
    old_tip = repo.refs.branch_sha(branch)
    state = session.State(
        operation="apply",
        manifest=str(manifest.path),
        base=base,
        series_digest=series.digest,
        files=_files(manifest),
        branch=branch,
        force=force,
        old_tip=old_tip,
        worktree=str(session.worktree_path(repo)),
    )
    # Build first (objects only, no ref moves yet); the result decides whether an existing branch may stay.
    # A branch that already is apply(base, series) is recognised without building it again.
    existing = replay.existing_build(repo, base, series.patches, old_tip) if old_tip else None
    if existing is not None:
        built = replay.BuildResult(base=base, applied=existing)
    else:
        built = replay.build_series(repo, base, series.patches, on_patch=on_patch)
    if built.conflict is not None:
        # Stale on its own base: refused before any state, worktree or ref exists. Stopping for a 3-way
        # would make the outcome depend on the blobs this clone holds, and its head on a merge.
        return Outcome(state=state, stale=built.conflict)
    if old_tip is not None and not force and not (built.complete and built.head == old_tip):
        raise BadInput(
            f"branch {branch} already exists at {old_tip[:12]} and is not apply(base, series)",
            hint="pass --force to move it (its old tip is printed), or --branch OTHER",
        )
    return _run(repo, series, state, 0, base, built)


@locking.repository_locked
def resume(repo: GitRepo, manifest: Manifest, series: Series) -> Outcome:
    state = session.require(repo, "apply", manifest.path)
    if series.digest != state.series_digest or _files(manifest) != state.files:
        raise BadInput(
            "the patch series changed since the apply stopped",
            hint="run forkctl apply --abort, then apply again",
        )
    session.refuse_checked_out(repo, state.branch)
    index = state.conflict_index
    patch = series.patches[index]
    commit = session.commit_resolution(repo, state, patch, patch.message)
    state.steps.append(session.Step(file=state.files[index], commit=commit, resolved=True))
    state.conflict_index, state.conflict_parent, state.conflict_paths = -1, "", []
    session.save(repo, state)
    return _run(repo, series, state, index + 1, commit)


@locking.repository_locked
def abort(repo: GitRepo, manifest_path: Path) -> session.State | None:
    """Undo a stopped apply; None when the state was unreadable (then only forkctl's scratch is removed).
    Only the checkout whose manifest (`manifest_path`) started the apply may abort it."""
    try:
        state = session.require(repo, "apply", manifest_path)
    except session.CorruptState:
        session.discard(repo)
        return None
    session.clear(repo)
    return state
