"""forkctl edit: the series as a branch in a worktree on the base, for git's own tools; export writes it back."""

from __future__ import annotations

import shlex
from pathlib import Path

import click

from forkctl.cli import options, verbs
from forkctl.cli.kit import Context, forkctl_command, output_options
from forkctl.errors import BadInput
from forkctl.git.repo import GitRepo
from forkctl.manifest import Manifest
from forkctl.report import Report, Table
from forkctl.series import load_series

DEFAULT_BRANCH = "forkctl/edit"


def _store(manifest: Manifest, repo_path: Path | None) -> GitRepo:
    if repo_path is not None:  # the user's clone: its checkout is never touched, only a branch added
        return GitRepo(repo_path)
    from forkctl.git import clonecache

    return clonecache.cached_objects(manifest.upstream.url, [manifest.upstream.base])


@click.command("edit", short_help=verbs.summary("edit"))
@options.repo("A clone with the base commit (default: forkctl's cache clone of upstream.url).")
@options.branch(f"The new branch to put the series on (default: {DEFAULT_BRANCH}).")
@click.option(
    "--worktree",
    type=click.Path(path_type=Path),
    help="Where to check the branch out: a new or empty folder (default: under the repository's git dir).",
)
@output_options()
@forkctl_command
def command(ctx: Context, repo_path: Path | None, branch: str | None, worktree: Path | None) -> Report:
    """Check the series out as a branch to edit with git, like gbp pq import.

    \b
    The branch holds one commit per patch on the manifest's base, each with the patch's message,
    author and date (as forkctl apply makes them). Edit it with your own tools (git commit --amend,
    git rebase -i BASE), then write it back with forkctl export --branch BRANCH: an unchanged branch
    exports to the same bytes. Your checkout, its branches and index are not touched; an existing
    branch or a folder that holds files is refused.
    """
    manifest = ctx.manifest()
    repo = _store(manifest, repo_path)
    from forkctl.ops import edit

    base = repo.objects.resolve_commit(manifest.upstream.base)
    if base is None:
        raise BadInput(
            f"{repo.path} has no commit {manifest.upstream.base} (the manifest's upstream base)",
            hint=f"fetch it there (git fetch {shlex.quote(manifest.upstream.url)}), or leave out --repo",
        )
    series = load_series(manifest)
    editing = edit.start(repo, series, base, branch or DEFAULT_BRANCH, worktree)
    where = f" --repo {shlex.quote(str(repo_path))}" if repo_path is not None else ""
    commands = {
        "export": f"forkctl export --branch {shlex.quote(editing.branch)}{where}",
        # Run from anywhere: git -C names the repository (the worktree cannot remove itself).
        "remove": f"git -C {shlex.quote(str(repo.path))} worktree remove {shlex.quote(str(editing.worktree))}"
        f" && git -C {shlex.quote(str(repo.path))} branch -D {shlex.quote(editing.branch)}",
    }
    result = Report(command="edit")
    result.data = {
        "branch": editing.branch,
        "worktree": str(editing.worktree),
        "base": base,
        "head": editing.head,
        "commits": [
            {"file": entry.file, "commit": commit}
            for entry, commit in zip(manifest.series, editing.commits, strict=True)
        ],
        "commands": commands,
    }
    result.tables.append(
        Table(
            title=f"{editing.branch} = {base[:12]} + {len(editing.commits)} patches",
            columns=["patch", "commit"],
            rows=[[Path(e.file).name, c] for e, c in zip(manifest.series, editing.commits, strict=True)],
        )
    )
    result.lines += [
        f"editing in: {editing.worktree} (branch {editing.branch}; rebase onto {base[:12]})",
        f"  write it back: {commands['export']}",
        f"  then remove it: {commands['remove']}",
    ]
    return result
