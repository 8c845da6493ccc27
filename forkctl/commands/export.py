"""forkctl export: write base..BRANCH as the series files and the manifest's `series:` list."""

from __future__ import annotations

from pathlib import Path

import click

from forkctl.cli import options, verbs
from forkctl.cli.kit import Context, forkctl_command, output_options, toolkit_locked
from forkctl.git.repo import GitRepo
from forkctl.ops import export
from forkctl.ops.export import Difference, ExportedPatch
from forkctl.report import Problem, Report, Table


def _report(
    branch: str, base: str, check: bool, exported: list[ExportedPatch], difference: Difference
) -> Report:
    result = Report(command="export")
    rows = [
        [
            Path(p.file).name,
            p.commit[:12],
            ", ".join(sha[:12] for sha in p.provenance) or "(none: own)",
            "changed" if p.file in difference.changed else "same",
        ]
        for p in exported
    ]
    result.tables.append(
        Table(
            title=f"{branch} = {base[:12]} + {len(exported)}",
            columns=["file", "commit", "provenance", "file"],
            rows=rows,
        )
    )
    result.data = {
        "branch": branch,
        "base": base,
        "check": check,
        "patches": [
            {
                "file": p.file,
                "commit": p.commit,
                "provenance": p.provenance,
                "changed": p.file in difference.changed,
            }
            for p in exported
        ],
        "changed": difference.changed,
        "stale": difference.stale,
        "manifest_changed": difference.manifest_differs,
    }
    return result


def _check(result: Report, branch: str, difference: Difference) -> None:
    """--check: every file export would write or remove is a problem (exit 1); else say they match."""
    for file in difference.changed:
        result.fail(Problem("differs from what export would write", file=file, hint="run forkctl export"))
    for file in difference.stale:
        result.fail(
            Problem(f"listed, but {branch} no longer has this patch", file=file, hint="run forkctl export")
        )
    if difference.manifest_differs and not (difference.changed or difference.stale):
        result.fail(Problem("the manifest's series list differs from the branch", hint="run forkctl export"))
    if not difference.dirty:
        result.lines.append(f"patch files match {branch}")


@click.command("export", short_help=verbs.summary("export"))
@options.branch("Branch to export (default: manifest fork.branch).", retired=("--from",))
@options.repo("The repository holding the branch (default: forkctl's cache clone of upstream.url).")
@click.option("--check", is_flag=True, help="Change nothing; exit 1 when the files differ from the branch.")
@output_options()
@forkctl_command
@toolkit_locked
def command(ctx: Context, branch: str | None, repo_path: Path | None, check: bool) -> Report:
    """Export the branch's commits after the base as patches/<series>/NNNN-<slug>.patch.

    \b
    Byte-stable (zero commit, full index, no stat, no signature): an unchanged branch changes no byte,
    and export -> apply -> export round-trips. Each message is written as the commit has it: every
    `(cherry picked from commit <sha>)` line kept (a squash of picks keeps each), none added (an own
    commit names no commit). The manifest's `series:` list is rewritten in order, comments kept, each
    entry's `provenance:` naming what those lines name (a list for several, none for an own patch). Files of the old series that the branch no
    longer has are deleted (and listed); other files under patches/ are never touched.
    """
    if not check:
        ctx.require_local("export writes the patch files and manifest.yaml (export --check only reads)")
    manifest = ctx.manifest()
    branch = branch or manifest.fork.branch
    if repo_path is not None:  # the user's clone as it is: the cache of partial clones is not loaded
        repo = GitRepo(repo_path)
    else:
        from forkctl.git import clonecache

        repo = clonecache.cached_objects(manifest.upstream.url, [manifest.upstream.base])
    base = repo.objects.resolve_commit(manifest.upstream.base) or manifest.upstream.base
    on_disk = export.series_on_disk(manifest)  # each patch file read once, for the record and the comparison
    exported = export.recorded(repo.objects, manifest, base, branch, on_disk)
    rendered = exported is None
    if exported is None:
        exported = export.render(repo, manifest, export.branch_commits(repo, base, branch))
    difference = export.compare(manifest, exported, export.bytes_by_file(manifest, on_disk))
    result = _report(branch, base, check, exported, difference)
    if check:
        _check(result, branch, difference)
        if rendered and not difference.dirty:
            export.remember(base, exported)
        return result
    export.write(manifest, exported, difference)
    if rendered:
        export.remember(base, exported)
    result.lines.append(
        f"wrote {len(difference.changed)} file(s), removed {len(difference.stale)} stale file(s)"
        + (": " + ", ".join(difference.stale) if difference.stale else "")
        if difference.dirty
        else f"patch files already match {branch}: nothing written"
    )
    return result
