"""forkctl port --onto: move the series to a new upstream base, dropping what upstream absorbed."""

from __future__ import annotations

from pathlib import Path

import click

from forkctl import applying, porting
from forkctl.clikit import Context, forkctl_command, output_options
from forkctl.errors import EXIT_CHECK_FAILED, BadInput
from forkctl.git import remote
from forkctl.report import Problem, Report, Table
from forkctl.series import load_series


def _report(outcome: porting.PortOutcome) -> Report:
    state = outcome.state
    result = Report(command="port")
    rows = []
    for step in state.steps:
        if step.absorbed:
            evidence = step.absorbed
            upstream = (evidence.get("upstream_commit") or "")[:12]
            rows.append([Path(step.file).name, "absorbed", f"{evidence['reason']} {upstream}".strip()])
        else:
            rows.append([Path(step.file).name, "applied", step.commit or ""])
    data = {
        "old_base": state.extra["old_base"],
        "new_base": state.base,
        "branch": state.branch,
        "steps": [
            {"file": s.file, "commit": s.commit, "resolved": s.resolved, "absorbed": s.absorbed}
            for s in state.steps
        ],
    }
    if outcome.conflict is not None:
        conflict = outcome.conflict
        rows.append([Path(state.files[state.conflict_index]).name, "conflict", ", ".join(conflict.paths)])
        data["conflict"] = {
            "file": state.files[state.conflict_index],
            "subject": conflict.patch.subject,
            "paths": conflict.paths,
            "message": conflict.message,
            "worktree": str(conflict.worktree),
        }
        result.fail(
            Problem(
                f"{conflict.patch.subject} conflicts on {conflict.parent[:12]} in {', '.join(conflict.paths)}",
                file=state.files[state.conflict_index],
                hint=f"resolve in {conflict.worktree}, then forkctl port --continue; or forkctl port --abort",
            )
        )
        result.exit_code = EXIT_CHECK_FAILED
    else:
        data["head"] = state.head
        data["range_diff"] = outcome.range_diff
        result.lines.append(f"{state.branch} = {state.base[:12]} + series at {state.head}")
        result.lines.append("manifest: base updated, dropped patches recorded, patch files re-exported")
        if outcome.range_diff:
            result.lines.append("range-diff old series vs new:\n" + outcome.range_diff.rstrip())
    result.data = data
    result.tables.append(
        Table(title=f"port onto {state.base[:12]}", columns=["patch", "result", "evidence"], rows=rows)
    )
    return result


@click.command("port")
@click.option(
    "--onto", "onto", help="The new upstream commit (SHA or abbreviation, or a branch of the store)."
)
@click.option(
    "--repo",
    "repo_path",
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    help="A clone with both bases (default: forkctl's cache clone of upstream.url).",
)
@click.option("--branch", help="Branch to move to the ported series (default: manifest fork.branch).")
@click.option("--continue", "resume", is_flag=True, help="Go on after resolving a conflict in the worktree.")
@click.option("--abort", is_flag=True, help="Give up a stopped port: no ref, file or manifest changes.")
@output_options()
@forkctl_command
def command(
    ctx: Context, onto: str | None, repo_path: Path | None, branch: str | None, resume: bool, abort: bool
) -> Report:
    """Move the series to a new upstream base.

    \b
    Each patch is applied, or dropped as absorbed upstream (same patch-id as an upstream commit in
    old-base..new-base, reverse applies, or changes nothing) with the evidence recorded under
    `dropped:`, or stops on a conflict (resume with --continue, undo with --abort). At the end the
    branch is moved (compare-and-swap; never a checked-out branch), the manifest's base is updated,
    the patch files are re-exported and a range-diff of old vs new series is shown.
    """
    manifest = ctx.manifest()
    if resume and abort:
        raise BadInput("--continue and --abort exclude each other", hint="pass one of them")
    if abort or resume:
        repo = remote.object_store(repo_path, manifest.upstream.url, [])
        if abort:
            state = applying.abort(repo, "port")
            return Report(
                command="port", data={"aborted": True}, lines=[f"aborted: {state.branch} left as it was"]
            )
        return _report(porting.resume(repo, manifest, load_series(manifest)))
    if onto is None:
        raise BadInput("no new base", hint="pass --onto SHA")
    repo = remote.object_store(repo_path, manifest.upstream.url, [onto, manifest.upstream.base])
    new_base = repo.resolve_commit(onto)
    old_base = repo.resolve_commit(manifest.upstream.base)
    if new_base is None or old_base is None:
        missing = onto if new_base is None else manifest.upstream.base
        raise BadInput(
            f"unknown commit {missing!r} in {repo.git_dir}", hint="fetch upstream, or check the SHA"
        )
    series = load_series(manifest)
    outcome = porting.start(repo, manifest, series, old_base, new_base, branch or manifest.fork.branch)
    return _report(outcome)
