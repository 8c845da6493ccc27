"""forkctl status: the series as a table, and (given an upstream clone) whether each patch applies."""

from __future__ import annotations

from pathlib import Path

import click

from forkctl import build
from forkctl.clikit import Context, forkctl_command, output_options
from forkctl.errors import BadInput
from forkctl.git import GitRepo
from forkctl.report import Report, Table
from forkctl.series import load_series


@click.command("status")
@click.option(
    "--repo",
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    help="A clone of upstream that has the base commit: also report whether each patch still applies.",
)
@output_options()
@forkctl_command
def command(ctx: Context, repo: Path | None) -> Report:
    """Show the patch series: order, subject, provenance, files, and status."""
    manifest = ctx.manifest()
    series = load_series(manifest)
    verdicts: dict[int, str | None] = {}
    if repo is not None:
        upstream = GitRepo(repo)
        base = upstream.resolve_commit(manifest.upstream.base)
        if base is None:
            raise BadInput(
                f"{repo} does not have the base commit {manifest.upstream.base}",
                hint="fetch upstream into that clone first (git fetch origin)",
            )
        for position, (_, message) in enumerate(build.check_series(upstream, base, series.patches)):
            verdicts[position] = message
    rows = []
    patches_json = []
    for position, patch in enumerate(series.patches):
        status = "parsed"
        if repo is not None:
            status = "applies" if verdicts[position] is None else "conflict"
        provenance = " <- ".join(sha[:12] for sha in reversed(patch.provenance)) or "(none)"
        rows.append([f"{position + 1:04d}", patch.subject, provenance, f"{len(patch.paths)}", status])
        patches_json.append(
            {
                "order": position + 1,
                "file": str(patch.path.relative_to(manifest.root)),
                "subject": patch.subject,
                "author": f"{patch.author_name} <{patch.author_email}>",
                "date": patch.date.isoformat(),
                "provenance": patch.provenance,
                "paths": patch.paths,
                "patch_id": patch.patch_id,
                "status": status,
                **({"apply_error": verdicts[position]} if verdicts.get(position) else {}),
            }
        )
    result = Report(command="status")
    result.data = {
        "upstream": manifest.upstream.repo,
        "base": manifest.upstream.base,
        "fork": manifest.fork.repo,
        "branch": manifest.fork.branch,
        "series_digest": series.digest,
        "patches": patches_json,
        "dropped": [d.model_dump() for d in manifest.model.dropped],
    }
    result.tables.append(
        Table(
            title=f"{manifest.fork.repo} {manifest.fork.branch} = {manifest.upstream.repo}@"
            f"{manifest.upstream.base[:12]} + {len(series.patches)} patches",
            columns=["#", "subject", "provenance (newest first)", "files", "status"],
            rows=rows,
        )
    )
    for dropped in manifest.model.dropped:
        result.lines.append(
            f"dropped: {dropped.subject} ({dropped.reason}"
            + (f", upstream {dropped.upstream_commit[:12]}" if dropped.upstream_commit else "")
            + ")"
        )
    if not series.patches:
        result.lines.append("the series is empty")
    conflicts = [p for p, m in verdicts.items() if m is not None]
    for position in conflicts:
        result.lines.append(
            f"{series.patches[position].path.name} does not apply on the base: {verdicts[position]}"
        )
    if conflicts:
        result.ok = False
    return result
