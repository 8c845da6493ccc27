"""forkctl refresh: rewrite patch files edited by hand so that they say what they do (`quilt refresh`)."""

from __future__ import annotations

from pathlib import Path

import click

from forkctl.cli import options, verbs
from forkctl.cli.kit import Context, forkctl_command, output_options, toolkit_locked
from forkctl.errors import BadInput
from forkctl.git.repo import GitRepo
from forkctl.manifest import Manifest
from forkctl.report import Report, Table
from forkctl.series import load_series


def _named(manifest: Manifest, names: tuple[str, ...]) -> list[str] | None:
    """The series files the arguments name (`0002`, `0002-slug.patch` or the path); None: all."""
    if not names:
        return None
    files = [entry.file for entry in manifest.series]
    chosen = []
    for name in names:
        matches = [f for f in files if name in (f, Path(f).name, Path(f).name[:4], Path(f).stem)]
        if len(matches) != 1:
            raise BadInput(
                f"{name!r} names {'no' if not matches else 'more than one'} patch of the series",
                hint="name a patch by its number (0002), its file name or its path: "
                + ", ".join(Path(f).name for f in files),
            )
        chosen.append(matches[0])
    return chosen


def _store(manifest: Manifest, repo_path: Path | None) -> GitRepo:
    if repo_path is not None:
        return GitRepo(repo_path)
    from forkctl.git import clonecache

    return clonecache.cached_objects(manifest.upstream.url, [manifest.upstream.base])


@click.command("refresh", short_help=verbs.summary("refresh"))
@click.argument("patches", nargs=-1, metavar="[PATCH]...")
@options.repo("A clone with the base commit (default: forkctl's cache clone of upstream.url).")
@output_options()
@forkctl_command
@toolkit_locked
def command(ctx: Context, patches: tuple[str, ...], repo_path: Path | None) -> Report:
    """Rewrite patch files from what they do on the base, like quilt refresh.

    \b
    The series is applied on the manifest's base from the diffs as written (the index lines are not
    held to) and the named patches (default: every one) are written again as forkctl export writes
    them: a hand edit of a patch file is kept, and its index lines then match what it makes, so lint
    --repo and apply accept it. File names, messages, authors, dates and the manifest do not change; a
    file that would change without being named is listed. A patch that does not apply as written is
    stale: that is forkctl port --onto's job.
    """
    ctx.require_local("refresh writes the patch files")
    manifest = ctx.manifest()
    only = _named(manifest, patches)
    repo = _store(manifest, repo_path)
    base = repo.objects.resolve_commit(manifest.upstream.base)
    if base is None:
        raise BadInput(
            f"{repo.git_dir} does not have the base commit {manifest.upstream.base}",
            hint="fetch upstream into that clone first (git fetch origin), or leave out --repo",
        )
    from forkctl.ops import refresh

    done = refresh.refresh(repo, manifest, base, load_series(manifest).patches, only)
    result = Report(command="refresh")
    result.data = {"base": base, "changed": done.written, "left": done.left}
    result.tables.append(
        Table(
            title=f"refresh on {base[:12]}",
            columns=["file", "result"],
            rows=[
                [Path(p.file).name, "rewritten" if p.file in done.written else "same"]
                for p in done.exported
                if p.file not in done.left
            ]
            + [[Path(file).name, "differs, not named: left as it is"] for file in done.left],
        )
    )
    result.lines.append(
        f"rewrote {', '.join(Path(f).name for f in done.written)}"
        if done.written
        else "every file already says what it does"
    )
    return result
