"""forkctl bump-bridge: move the chain to the fork head in one step, one gitlink per consumer.

A new branch `<fork.bump_branch_prefix><sha12>` (this fork: `forkctl/bump-megatron-<sha12>`) from each consumer branch head, whose one commit moves the
gitlink (private index: read-tree, update-index --cacheinfo 160000, write-tree, commit-tree; no
submodule checkout, never the user's index or worktree) and points `.gitmodules` at the fork when it
still names upstream. Then the check-pins core runs on the new branches; it must pass.
"""

from __future__ import annotations

from pathlib import Path

import click

from forkctl import report
from forkctl.chain.bump import apply_step, plan_bump, push_steps
from forkctl.chain.forkhead import fork_context
from forkctl.cli import options, verbs
from forkctl.cli.kit import Context, forkctl_command, output_options
from forkctl.errors import BadInput
from forkctl.report import Report
from forkctl.report.chain import bump_json, bump_lines, chain_report


def _through_index(manifest, through: str | None) -> int:  # type: ignore[no-untyped-def]
    if through is None:
        return 0
    names = [c.name for c in manifest.consumers]
    if through not in names[1:]:
        raise BadInput(
            f"--through {through!r} is not a consumer after the first",
            hint=f"choose one of: {', '.join(names[1:]) or '(none)'}",
        )
    return names.index(through)


def _local_clones(last: int, bridge_repo: Path | None, through_repo: Path | None) -> dict[int, Path | None]:
    """Which consumer commits in which given clone: the Bridge (0) in --bridge-repo, the --through one
    in --through-repo. (A dict literal {0: ..., last: ...} lost --bridge-repo when last was 0.)"""
    if through_repo is not None and last == 0:
        raise BadInput(
            "--through-repo needs --through", hint="name the consumer it is a clone of with --through"
        )
    return {0: bridge_repo, **({last: through_repo} if last > 0 else {})}


@click.command("bump-bridge", short_help=verbs.summary("bump-bridge"))
@click.option(
    "--fork-commit",
    metavar="SHA",
    help="The fork commit to pin (default: the reproducible head "
    "apply(series, base)); any other commit is refused because it fails the fork-link check.",
)
@click.option(
    "--through",
    metavar="CONSUMER",
    help="Also bump every consumer up to this one (e.g. nemo-rl) to the new commit of the one before it.",
)
@click.option(
    "--bridge-repo",
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    help="A local clone of the first consumer (Bridge) to commit in; default: the cache of its URL.",
)
@click.option(
    "--through-repo",
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    help="A local clone of the --through consumer to commit in; default: the cache of its URL.",
)
@options.upstream_repo("Where the base commit is (see check-pins).")
@click.option("--dry-run", is_flag=True, help="Print the plan (and the check it would pass); change no ref.")
@click.option(
    "--push",
    is_flag=True,
    help="Push the new branches to the consumers' URLs (never forced, never "
    "to the consumer or default branch). Without it everything stays local.",
)
@output_options()
@forkctl_command
def command(
    ctx: Context,
    fork_commit: str | None,
    through: str | None,
    bridge_repo: Path | None,
    through_repo: Path | None,
    upstream_repo: str | None,
    dry_run: bool,
    push: bool,
) -> Report:
    """Pin the fork head in the Bridge (and, with --through, in NeMo-RL) on new forkctl/bump-* branches."""
    if dry_run and push:
        raise BadInput("--dry-run and --push contradict each other", hint="drop one of them")
    manifest = ctx.manifest()
    if not manifest.consumers:
        raise BadInput("the manifest lists no consumers", hint="add consumers: to manifest.yaml")
    last = _through_index(manifest, through)
    fork = fork_context(manifest, upstream_repo, report.info)
    if fork_commit and not fork.head.startswith(fork_commit.lower()):
        raise BadInput(
            f"refusing {fork_commit}: it is not the reproducible fork head {fork.head[:12]} = "
            f"{manifest.upstream.repo}@{fork.base[:12]} + {len(fork.patches)} patches, so it fails the fork-link check",
            hint="leave out --fork-commit to pin the reproducible head (forkctl check-pins explains the difference)",
        )
    plan = plan_bump(manifest, fork, last, _local_clones(last, bridge_repo, through_repo), report.info)
    steps = plan.steps
    out = chain_report("bump-bridge", manifest, plan.check)
    described = bump_lines(steps)
    if not out.ok:
        out.lines = [
            *described,
            "the bumped chain does not pass check-pins: no branch was created",
            *out.lines,
        ]
        out.data["steps"] = bump_json(steps, created=False, pushed=False)
        return out
    if dry_run:
        out.lines = ["dry run: no ref was changed; the plan:", *described, *out.lines]
        out.data["steps"] = bump_json(steps, created=False, pushed=False)
        return out
    for step in steps:
        apply_step(step)
    if push:
        push_steps(steps, report.info)
        tail = ["pushed the new branches; open pull requests from them"]
    else:
        tail = [
            f"to push: git --git-dir {step.repo.git_dir} push {step.push_url} {step.branch}" for step in steps
        ]
        tail.append("(or rerun with --push)")
    out.lines = ["created:", *described, *out.lines, *tail]
    out.data["steps"] = bump_json(steps, created=True, pushed=push)
    return out
