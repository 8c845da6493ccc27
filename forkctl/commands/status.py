"""forkctl status: the series as a table, and (given an upstream clone) whether each patch applies."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING

import click

from forkctl.cli import options, verbs
from forkctl.cli.kit import Context, forkctl_command, output_options
from forkctl.errors import BadInput
from forkctl.manifest import Manifest, plain
from forkctl.report import Problem, Report, Table
from forkctl.series import Patch, Series, load_series

if TYPE_CHECKING:
    from forkctl.ops.port.bisect import FirstBreak, FirstBreaks
    from forkctl.ops.port.walk import Judged


@click.command("status", short_help=verbs.summary("status"))
@options.repo(
    "A clone of upstream that has the base commit: also report whether each patch applies as written "
    "(no 3-way); one that does not is stale."
)
@click.option(
    "--onto",
    help="Preview a port onto this upstream commit: per patch, applies / applies with 3-way / absorbed "
    "(rule, upstream commit) / conflicts (files, git's messages). No ref, file or manifest moves.",
)
@click.option(
    "--first-break",
    is_flag=True,
    help="With --onto: for each patch that would conflict, bisect base..TARGET on objects (the "
    "ancestry path, by first parent where that stays on it) and name the first upstream commit that "
    "breaks it: a descendant of the base whose parent on that path still ports the patch.",
)
@output_options(github=True)
@forkctl_command
def command(ctx: Context, repo_path: Path | None, onto: str | None, first_break: bool) -> Report:
    """Show the patch series: order, subject, provenance, files, and status.

    \b
    With --onto TARGET, preview what forkctl port --onto TARGET would do, without moving anything;
    add --first-break to name, for each patch that would stop, the upstream commit that broke it.
    """
    manifest = ctx.manifest()
    if first_break and onto is None:
        raise BadInput(
            "--first-break needs --onto TARGET", hint="pass --onto with the upstream commit to port to"
        )
    if onto is not None:
        return onto_report(manifest, repo_path, onto, first_break)
    series = load_series(manifest)
    verdicts: list[str | None] | None = None
    if repo_path is not None:
        from forkctl.ops import replay  # the plain table needs no git objects: import them only here

        verdicts = replay.check_in_clone(repo_path, manifest.upstream.base, series.patches)
    result = _series_report(manifest, series, verdicts)
    _in_progress(result, manifest, series, repo_path)
    return result


def _in_progress(result: Report, manifest: Manifest, series: Series, repo_path: Path | None) -> None:
    """A port or apply this checkout left stopped: where, which files, and the commands to go on.
    Shown, not failed: a stop is work in progress, not a broken series."""
    from forkctl.ops import progress

    found = progress.find(manifest.path, repo_path)
    if found is None:
        result.data["in_progress"] = None
        return
    subjects = {str(patch.path.relative_to(manifest.root)): patch.subject for patch in series.patches}
    subject = subjects.get(found.file or "", "")
    result.data["in_progress"] = {
        "operation": found.operation,
        "repo": found.git_dir,
        "file": found.file,
        "subject": subject or None,
        "parent": found.parent or None,
        "paths": found.paths,
        "unresolved": found.unresolved,
        "worktree": found.worktree,
        "commands": found.commands,
    }
    if found.file is None:
        result.lines.append(
            f"{found.operation} in progress in {found.git_dir}: interrupted while writing its results"
        )
    else:
        left = ", ".join(found.unresolved) or "none: continue takes the files as they are"
        result.lines += [
            f"{found.operation} in progress: stopped at {Path(found.file).name} ({subject}) "
            f"on {found.parent[:12]}",
            f"  conflicts in: {', '.join(found.paths) or '(see git status there)'}; unresolved: {left}",
            f"  resolve in: {found.worktree} (git status, git diff, git mergetool, git add)",
        ]
    result.lines += [f"  {verb}: {command}" for verb, command in found.commands.items()]


def _patch_json(manifest: Manifest, position: int, patch: Patch, status: str, error: str | None) -> dict:
    return {
        "order": position + 1,
        "file": str(patch.path.relative_to(manifest.root)),
        "subject": patch.subject,
        "author": f"{patch.author_name} <{patch.author_email}>",
        "date": patch.date.isoformat(),
        "provenance": patch.provenance,
        "paths": patch.paths,
        "patch_id": patch.patch_id,
        "status": status,
        **({"apply_error": error} if error else {}),
    }


def _series_report(manifest: Manifest, series: Series, verdicts: list[str | None] | None) -> Report:
    """The series table; `verdicts` (per patch None or git's message) when checked on the base."""
    rows, patches_json = [], []
    for position, patch in enumerate(series.patches):
        error = verdicts[position] if verdicts is not None else None
        status = "parsed" if verdicts is None else "applies" if error is None else "stale"
        provenance = ", ".join(sha[:12] for sha in patch.provenance) or "(none)"
        rows.append([f"{position + 1:04d}", patch.subject, provenance, f"{len(patch.paths)}", status])
        patches_json.append(_patch_json(manifest, position, patch, status, error))
    result = Report(command="status")
    result.data = {
        "upstream": manifest.upstream.repo,
        "base": manifest.upstream.base,
        "fork": manifest.fork.repo,
        "branch": manifest.fork.branch,
        "series_digest": series.digest,
        "patches": patches_json,
        "dropped": [plain(d) for d in manifest.model.dropped],
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
    conflicts = [
        (patch, m) for patch, m in zip(series.patches, verdicts or [], strict=False) if m is not None
    ]
    if conflicts:
        from forkctl.ops import replay  # only a clone's verdicts bring a stale patch

        for patch, message in conflicts:
            result.fail(
                Problem(
                    replay.stale_text(manifest.upstream.base, message),  # file= names the patch
                    file=str(patch.path.relative_to(manifest.root)),
                    hint=replay.stale_fix(manifest.upstream.base),
                )
            )
    return result


def _skip_hint(entry: Judged) -> str:
    from forkctl.ops.port.judge import upstream_hint

    named = upstream_hint(entry.verdict.reason, entry.verdict.upstream_commit)
    return f"; {named}" if named else ""


def _first_break_json(found: FirstBreak) -> dict:
    return {
        "commit": found.commit,
        "subject": found.subject,
        "author": found.author,
        "date": found.date,
        "files": found.files,
        "commits_tested": found.tested,
        "parent": found.parent,
        "merged": found.merged,
    }


def _no_first_break(search: FirstBreaks, position: int) -> str:
    """Why a patch that conflicts on the target has no first break named."""
    if not search.anchor:
        return "no first break: the target shares no single merge base with the base"
    if search.starts_broken(position):
        return (
            f"no first break in {search.anchor[:12]}..{search.target[:12]}: it conflicts already on "
            f"{search.anchor}, the merge base where that line of descent starts"
        )
    return f"no first break: bisecting {search.anchor[:12]}..{search.target[:12]} found none"


def _merge_words(found: FirstBreak) -> str:
    """A culprit that is a merge: the parent on which the patch still ports, and the side it brought in."""
    if not found.merged:
        return ""
    sides = ", ".join(sha[:12] for sha in found.merged)
    return (
        f"; a merge: the patch still ports on its parent {found.parent[:12]}, the break came in with {sides}"
    )


def _preview_item(
    result: Report,
    manifest: Manifest,
    entry: Judged,
    target: str,
    found: FirstBreak | str | None,
    where: str = "",
) -> tuple[dict, list[str]]:
    """One previewed patch: its JSON item and table row; a conflict adds git's words and a problem."""
    from forkctl.report.preview import verdict_words

    verdict_name, evidence = verdict_words(entry)
    item: dict = {
        "order": entry.position + 1,
        "file": str(entry.patch.path.relative_to(manifest.root)),
        "subject": entry.patch.subject,
        "result": verdict_name,
        "reason": entry.verdict.reason or None,
        "upstream_commit": entry.verdict.upstream_commit,
    }
    verdict = entry.verdict
    if verdict.partial is not None:
        item["partial"] = plain(verdict.partial)
    for key, value in (
        ("proof", verdict.proof),
        ("own_lines", verdict.own_lines),
        ("reverted_by", verdict.reverted_by),
    ):
        if value is not None:
            item[key] = value
    if entry.verdict.reason == "reverted":
        _reverted(result, item, entry, target, where)
    elif entry.verdict.kind == "conflict":
        merged = entry.verdict.merged
        assert merged is not None
        item["conflict"] = {"paths": merged.conflicted, "messages": [m.text for m in merged.messages]}
        result.lines.append(f"{entry.patch.path.name}:\n  " + merged.text().replace("\n", "\n  "))
        if isinstance(found, str):
            item["first_break"], item["first_break_note"] = None, found
            result.lines.append(f"{entry.patch.path.name}: {found}")
        elif found is not None:
            item["first_break"] = _first_break_json(found)
            evidence += f"; first broken by {found.commit[:12]} {found.subject!r}"
            result.lines.append(
                f"{entry.patch.path.name} first breaks at {found.commit[:12]} {found.subject!r} "
                f"by {found.author}, {found.date}; files: {', '.join(found.files[:10])}"
                + (" ..." if len(found.files) > 10 else "")
                + _merge_words(found)
            )
        result.fail(
            Problem(
                f"{entry.patch.subject} would conflict on {target[:12]} in {evidence}",
                file=item["file"],
                hint=f"read the upstream change named above, then forkctl port --onto {target[:12]} "
                "and resolve in the scratch worktree it opens" + _skip_hint(entry),
            )
        )
    return item, [f"{entry.position + 1:04d}", entry.patch.subject, verdict_name, evidence]


def _reverted(result: Report, item: dict, entry: Judged, target: str, where: str) -> None:
    """A pick of an upstream commit that upstream reverted on the way to the target: port stops there
    (`where`: the --repo the commands need)."""
    picked, reverted_by = item["upstream_commit"], item["reverted_by"]
    result.fail(
        Problem(
            f"{entry.patch.subject} picks upstream {picked[:12]}, which upstream reverted in "
            f"{reverted_by[:12]}: porting it onto {target[:12]} would undo that revert",
            file=item["file"],
            hint=f"read {reverted_by[:12]}; forkctl port --onto {target[:12]}{where} stops there, then "
            f"forkctl port --skip{where} drops the patch, forkctl port --reapply-reverted{where} applies "
            f"it again (or at once: forkctl port --onto {target[:12]}{where} --reapply-reverted)",
        )
    )


def onto_report(manifest: Manifest, repo_path: Path | None, onto: str, with_first_break: bool) -> Report:
    import contextlib

    from forkctl import report
    from forkctl.ops.port import bisect, preview
    from forkctl.ops.port.judge import resolve_endpoints

    repo, target, base = resolve_endpoints(repo_path, manifest.upstream.url, onto, manifest.upstream.base)
    series = load_series(manifest)
    result = Report(command="status")
    rows, patches_json = [], []
    where = f" --repo {shlex.quote(str(Path(repo_path).absolute()))}" if repo_path is not None else ""
    # --first-break takes seconds to minutes on a long range: its phases are told on stderr.
    with report.phases("status --first-break") if with_first_break else contextlib.nullcontext() as step:
        tell = step or (lambda _: None)
        finer = report.after(tell)  # each commit a bisection judges, once it runs past a second
        tell(f"previewing {len(series.patches)} patches on {target[:12]}")
        # One search for all the patches: each candidate commit's merges are made once, whichever asks.
        search = bisect.FirstBreaks(repo, series, base, target) if with_first_break else None
        entries = preview.preview(
            repo, series, base, target, old_commits=search.old_commits if search else None
        )
        if search is not None:
            search.know_target(entries)
        for entry in entries:
            found = None
            if search is not None and entry.verdict.kind == "conflict":
                tell(f"first break of {entry.patch.subject}: bisecting {base[:12]}..{target[:12]}")
                found = search.find(entry.position, finer) or _no_first_break(search, entry.position)
            item, row = _preview_item(result, manifest, entry, target, found, where)
            patches_json.append(item)
            rows.append(row)
    result.data = {
        "base": base,
        "onto": target,
        "descends": repo.history.is_ancestor(base, target),
        "upstream_commits": repo.history.count(f"{base}..{target}"),
        "patches": patches_json,
    }
    result.tables.append(
        Table(
            title=f"port preview: {base[:12]} -> {target[:12]} (nothing moved)",
            columns=["#", "subject", "result", "evidence"],
            rows=rows,
        )
    )
    return result  # a conflict already failed the report (result.fail)
