"""forkctl fork-base: the fork's own record of its base (`.fork-base.json`, schema 1), from the manifest."""

from __future__ import annotations

from pathlib import Path

import click

from forkctl.chain import forkbase
from forkctl.cli import options, verbs
from forkctl.cli.kit import Context, forkctl_command, output_options
from forkctl.errors import BadInput
from forkctl.git.repo import toplevel
from forkctl.report import Problem, Report


def _worktree(repo: Path | None) -> Path:
    start = repo if repo is not None else Path.cwd()
    top = toplevel(start)
    if top is None:
        raise BadInput(
            f"{start} is not inside a git working tree",
            hint="run this in the fork's checkout, or pass --repo PATH to it",
        )
    return top


@click.command("fork-base", short_help=verbs.summary("fork-base"))
@options.repo("The fork's working tree (default: the one holding the current directory).")
@click.option("--write", is_flag=True, help="Write or update the file when it disagrees with the manifest.")
@click.option(
    "--force",
    is_flag=True,
    help="With --write: replace a .fork-base.json that git does not track (untracked or ignored).",
)
@output_options(github=True)
@forkctl_command
def command(ctx: Context, repo_path: Path | None, write: bool, force: bool) -> Report:
    """Check `.fork-base.json` in the fork against the manifest, or write it (--write).

    \b
    The file is the fork's convention for "our base" (schema 1: fork_repo, upstream_repo,
    upstream_branch, upstream_base), read by its own scripts and cross-checked by check-pins.
    Without --write: exit 0 when it agrees with the manifest, 1 when it is missing or differs.
    With --write: the file is written (atomically) from the manifest, keeping its own spelling of a
    repository that names the same one; a file with uncommitted changes is refused, never overwritten,
    and so is one git does not track (untracked or ignored) unless --force is given.
    Nothing is committed: review and commit the file as any other change. The file is the fork's
    own (always in fork.own_paths): forkctl publish keeps it on the branch, naming the published base.
    """
    manifest = ctx.manifest()
    worktree = _worktree(repo_path)
    state = forkbase.inspect(worktree, manifest)
    result = Report(command="fork-base")
    written = forkbase.write(state, worktree, force) if write else False
    result.data = {
        "path": str(state.path),
        "record": forkbase.as_dict(forkbase.from_manifest(manifest)),
        "up_to_date": state.up_to_date or written,
        "written": written,
        "differences": state.problems,
    }
    if written:
        result.lines.append(f"wrote {state.path} (was: {'; '.join(state.problems)})")
        result.lines.append(f"review and commit it: git -C {worktree} add {forkbase.FORK_BASE_FILE}")
        result.lines.append(
            f"{forkbase.FORK_BASE_FILE} is the fork's own file: forkctl publish keeps it on the branch and "
            "rewrites its upstream_base to the base it publishes"
        )
    elif state.up_to_date:
        result.lines.append(f"{state.path} agrees with the manifest (base {manifest.upstream.base[:12]})")
    else:
        for difference in state.problems:
            result.fail(
                Problem(
                    difference,
                    file=forkbase.FORK_BASE_FILE,
                    hint="run `forkctl fork-base --write` to update it from the manifest",
                )
            )
    return result
