"""forkctl port --onto: move the series to a new upstream base, dropping what upstream absorbed."""

from __future__ import annotations

from pathlib import Path

import click
import msgspec

from forkctl import report
from forkctl.cli import options, verbs
from forkctl.cli.kit import Context, forkctl_command, output_options, toolkit_locked
from forkctl.errors import BadInput
from forkctl.git.repo import GitRepo, repo_holding
from forkctl.ops import port, progress
from forkctl.ops.port.transaction import drop_fields
from forkctl.ops.state import SPARSE_NOTE, ConflictReport, MarkersRemain, State, Step
from forkctl.report import Problem, Report, Table
from forkctl.series import load_series


def _step_row(step: Step) -> list[str]:
    """(patch, result, evidence) for one patch the port handled."""
    name = Path(step.file).name
    if step.absorbed:
        evidence = step.absorbed
        upstream = (evidence.upstream_commit or "")[:12]
        label = "skipped" if evidence.reason == "skipped" else "absorbed"
        proved = f", proved by {evidence.proof.split(':')[0]}" if evidence.proof else ""
        return [name, label, f"{evidence.reason} {upstream}".strip() + proved]
    if step.partial:
        needed, total = step.partial.still_needed, step.partial.changed_lines
        return [name, "applied (partial)", f"{step.commit} ({needed} of {total} lines still needed)"]
    if step.reapplied:
        reverted = f"upstream reverted {step.reapplied.upstream_commit[:12]} in"
        return [name, "re-applied", f"{step.commit} ({reverted} {step.reapplied.reverted_by[:12]})"]
    return [name, "resolved" if step.resolved else "applied", step.commit or ""]


def _step_json(step: Step) -> dict[str, object]:
    reapplied = msgspec.to_builtins(step.reapplied)
    partial = msgspec.to_builtins(step.partial)
    if partial is not None and reapplied is not None:
        partial["reapplied"] = reapplied  # as the verdict's detail carried it before it was typed
    return {
        "file": step.file,
        "commit": step.commit,
        "resolved": step.resolved,
        "absorbed": drop_fields(step.absorbed) if step.absorbed else None,
        "partial": partial,
        "reapplied": reapplied,
    }


def _stopped(
    result: Report, state: State, conflict: ConflictReport, rows: list[list[str]], ways: dict[str, str]
) -> None:
    """A port stopped on a conflict: the row, the data, git's words and the ways on (`ways`: each
    verb's command as printed)."""
    file = state.files[state.conflict_index]
    rows.append([Path(file).name, "conflict", ", ".join(conflict.paths)])
    ported = sum(1 for step in state.steps if step.commit)
    result.data["conflict"] = {
        "file": file,
        "subject": conflict.patch.subject,
        "paths": conflict.paths,
        "message": conflict.message,
        "worktree": str(conflict.worktree),
        "upstream_commit": conflict.upstream_commit,
        "named_by": conflict.named_by or None,
        "commands": ways,
        "checked_out": conflict.checked_out,
    }
    named = port.upstream_hint(conflict.named_by, conflict.upstream_commit)
    if conflict.message:
        result.lines.append("git says:\n" + conflict.message.rstrip())
    result.fail(
        Problem(
            f"{conflict.patch.subject} conflicts with upstream {state.base[:12]} in {', '.join(conflict.paths)}"
            + (f" (on top of the {ported} patch(es) ported before it)" if ported else ""),
            file=file,
            hint=(f"{named}; or " if named else "")
            + f"resolve in {conflict.worktree} ({SPARSE_NOTE}), then {ways['continue']}; "
            + ("" if named else f"or drop the patch with {ways['skip']}; ")
            + f"or {ways['abort']}",
        )
    )


def _reverted_stop(result: Report, state: State, conflict: ConflictReport, ways: dict[str, str]) -> None:
    """A port stopped at a pick of an upstream commit that upstream reverted in the range: not a
    conflict, a decision, and the two ways on."""
    file = state.files[state.conflict_index]
    picked, reverted_by = conflict.upstream_commit or "", conflict.reverted_by or ""
    result.data["conflict"] = {
        "file": file,
        "subject": conflict.patch.subject,
        "paths": conflict.paths,
        "worktree": str(conflict.worktree),
        "upstream_commit": picked,
        "named_by": "provenance",
        "reverted_by": reverted_by,
    }
    result.fail(
        Problem(
            f"{conflict.patch.subject} picks upstream {picked[:12]}, which upstream reverted in "
            f"{reverted_by[:12]}: porting it would undo that revert",
            file=file,
            hint=f"read {reverted_by[:12]}; {ways['skip']} drops the patch (recorded under dropped:), "
            f"{ways['reapply-reverted']} applies it again (as the worktree {conflict.worktree} holds it), "
            f"{ways['abort']} gives up",
        )
    )


def _own_lines(result: Report, conflict: ConflictReport) -> None:
    """An amended pick stopped on its own lines: name exactly those (the interdiff with upstream's)."""
    result.data["conflict"]["own_lines"] = conflict.own_lines
    upstream = (conflict.upstream_commit or "")[:12]
    result.lines.append(f"own lines of this patch beyond upstream {upstream} (the only ones merged):")
    result.lines.append(conflict.own_lines.rstrip())


def _report(outcome: port.PortOutcome, ways: dict[str, str], reverted_ways: dict[str, str]) -> Report:
    state = outcome.state
    result = Report(command="port")
    rows = [_step_row(step) for step in state.steps]
    result.data = {
        "old_base": state.port_data.old_base,
        "new_base": state.base,
        "branch": state.branch,
        "steps": [_step_json(step) for step in state.steps],
        "backport": state.port_data.backport,
    }
    if outcome.conflict is not None and outcome.conflict.reverted_by:
        rows.append(
            [Path(state.files[state.conflict_index]).name, "reverted upstream", outcome.conflict.reverted_by]
        )
        _reverted_stop(result, state, outcome.conflict, reverted_ways)
    elif outcome.conflict is not None:
        _stopped(result, state, outcome.conflict, rows, ways)
        if outcome.conflict.own_lines:
            _own_lines(result, outcome.conflict)
    else:
        result.data["head"] = state.head
        result.data["range_diff"] = outcome.range_diff
        result.lines.append(f"{state.branch} = {state.base[:12]} + series at {state.head}")
        result.lines.append("manifest: base updated, dropped patches recorded, patch files re-exported")
        if outcome.range_diff:
            result.lines.append("range-diff old series vs new:\n" + outcome.range_diff.rstrip())
    result.tables.append(
        Table(title=f"port onto {state.base[:12]}", columns=["patch", "result", "evidence"], rows=rows)
    )
    return result


def _who(repo: GitRepo) -> str:
    """The person skipping a patch, as git knows them (user.name <user.email>)."""
    return repo.committer_ident() or "unknown"


@click.command("port", short_help=verbs.summary("port"))
@click.option(
    "--onto",
    "onto",
    help="The new upstream commit: a SHA, an abbreviation, or a branch or tag of upstream (in --repo, else in forkctl's cache clone of upstream.url).",
)
@options.repo("A clone with both bases (default: forkctl's cache clone of upstream.url).")
@options.branch("Branch to move to the ported series (default: manifest fork.branch).")
@options.resume(
    "Go on after resolving a conflict in the worktree, or finish a port interrupted while writing."
)
@click.option(
    "--skip", is_flag=True, help="Drop the patch the port stopped at (recorded under dropped: as skipped)."
)
@options.abort("Give up a stopped or interrupted port: the branch, manifest and patch files as they were.")
@click.option(
    "--backport",
    is_flag=True,
    help="Allow a target that does not descend from the base (e.g. a release branch cut before it).",
)
@click.option(
    "--reapply-reverted",
    is_flag=True,
    help="Apply again a pick whose upstream commit upstream reverted in base..target: with --onto, "
    "every such pick; alone, the one a stopped port is at (as its worktree holds it).",
)
@output_options()
@forkctl_command
@toolkit_locked
def command(
    ctx: Context,
    onto: str | None,
    repo_path: Path | None,
    branch: str | None,
    resume: bool,
    skip: bool,
    abort: bool,
    backport: bool,
    reapply_reverted: bool,
) -> Report:
    """Move the series to a new upstream base.

    \b
    Each patch is picked onto the new base and the patches ported before it, as git rebase would, and
    is applied (partially when upstream already has some of its lines), or dropped as absorbed upstream
    (its merge changes nothing, or it is a pick proved to be the upstream commit its provenance names:
    same patch-id, or empty interdiff) with the evidence recorded under `dropped:`. A conflict stops
    the port in a scratch worktree inside the git dir: resolve it there and --continue, drop the patch
    with --skip, or --abort; so does a pick of an upstream commit that upstream reverted (apply it
    again with --reapply-reverted, or --skip). At the end the patch files are re-exported, the
    manifest's base and `dropped:` are updated, the branch is moved last (compare-and-swap; never a
    checked-out branch) and a range-diff of old vs new series is shown.
    """
    ctx.require_local("port writes the patch files and manifest.yaml")
    manifest = ctx.manifest()
    if sum([resume, skip, abort]) > 1:
        raise BadInput("--continue, --skip and --abort exclude each other", hint="pass one of them")
    if reapply_reverted and (skip or abort):
        raise BadInput("--reapply-reverted applies a pick again; --skip and --abort do not go with it")
    # The ways on after a stop, with what this run was given: printed, they work as printed.
    where = (
        str(repo_path) if repo_path else None,
        str(ctx.manifest_path()) if ctx.manifest_option else None,
    )
    ways = progress.ways_on("port", True, *where)
    reverted_ways = progress.ways_on("port", True, *where, reverted=True)
    if abort or resume or skip or (reapply_reverted and onto is None):
        if onto is not None or backport:
            raise BadInput("--onto/--backport start a port; they do not go with --continue/--skip/--abort")
        repo = repo_holding(repo_path, manifest.upstream.url, [])
        if abort:
            state = port.abort(repo, manifest.path)
            return Report(
                command="port",
                data={"aborted": True},
                lines=[
                    f"aborted: {state.branch}, the manifest and the patch files are as they were"
                    if state
                    else "aborted: the state file was unreadable; removed it and the scratch worktree"
                ],
            )
        with report.phases("port") as step:
            if skip:
                outcome = port.skip(repo, manifest, lambda: load_series(manifest), _who(repo), step)
            else:
                try:
                    outcome = port.resume(
                        repo, manifest, lambda: load_series(manifest), step, reapply_reverted=reapply_reverted
                    )
                except MarkersRemain as exc:
                    raise exc.with_ways(ways) from None
        return _report(outcome, ways, reverted_ways)
    if onto is None:
        raise BadInput("no new base", hint="pass --onto SHA")
    repo, new_base, old_base = port.resolve_endpoints(
        repo_path, manifest.upstream.url, onto, manifest.upstream.base
    )
    series = load_series(manifest)
    with report.phases(f"port onto {new_base[:12]}") as step:
        outcome = port.start(
            repo,
            manifest,
            series,
            old_base,
            new_base,
            manifest.fork.branch if branch is None else branch,
            backport=backport,
            tell=step,
            reapply_reverted=reapply_reverted,
        )
    return _report(outcome, ways, reverted_ways)
