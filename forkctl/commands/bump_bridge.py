"""forkctl bump-bridge: move the chain to the fork head in one step, one gitlink per consumer.

A new branch `forkctl/bump-megatron-<sha12>` from each consumer branch head, whose one commit moves the
gitlink (private index: read-tree, update-index --cacheinfo 160000, write-tree, commit-tree; no
submodule checkout, never the user's index or worktree) and points `.gitmodules` at the fork when it
still names upstream. Then the check-pins core runs on the new branches; it must pass.
"""

from __future__ import annotations

from pathlib import Path

import click

from forkctl import pins, remote, report
from forkctl.clikit import Context, forkctl_command, output_options
from forkctl.errors import BadInput
from forkctl.report import Report


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


@click.command("bump-bridge")
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
@click.option("--upstream-repo", metavar="PATH|URL", help="Where the base commit is (see check-pins).")
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
    fork = pins.fork_context(manifest, upstream_repo, report.info)
    if fork_commit and not fork.head.startswith(fork_commit.lower()):
        raise BadInput(
            f"refusing {fork_commit}: it is not the reproducible fork head {fork.head[:12]} = "
            f"{manifest.upstream.repo}@{fork.base[:12]} + {len(fork.patches)} patches, so it fails the fork-link check",
            hint="leave out --fork-commit to pin the reproducible head (forkctl check-pins explains the difference)",
        )
    branch = f"forkctl/bump-megatron-{fork.head[:12]}"
    body = pins.series_description(manifest, fork)
    steps: list[pins.BumpStep] = []
    sources: list[pins.Source] = []
    new_pin = fork.head
    target_url, target_upstream = manifest.fork.url, manifest.upstream.url
    for index in range(last + 1):
        consumer = manifest.consumers[index]
        local = bridge_repo if index == 0 else through_repo if index == last else None
        source = pins.Source(consumer, local=local)
        repo, head = pins.consumer_repo(source, report.info)
        report.info(f"{consumer.name}: moving {consumer.gitlink} to {new_pin[:12]} on {branch}")
        step = pins.bump_step(source, repo, head, new_pin, target_url, target_upstream, branch, body)
        steps.append(step)
        sources.append(
            pins.Source(
                consumer,
                local=repo.git_dir,
                rev=step.commit,
                url=source.fetch_url,
                label=f"new branch {branch}",
            )
        )
        body = f"It pins {consumer.name} {step.commit} ({branch}), which pins the fork head.\n\n" + body
        new_pin, target_url, target_upstream = step.commit, consumer.url, consumer.upstream_url

    # The new branches are not on the servers yet (or ever, with --dry-run): count them as reachable.
    pending: dict[str, list[str]] = {}
    for step in steps:
        pending.setdefault(remote.normalise_url(step.consumer.url), []).append(step.commit)
    result = pins.check_chain(manifest, sources, progress=report.info, pending=pending, fork=fork)
    out = pins.chain_report("bump-bridge", manifest, result)
    plan = []
    for step in steps:
        url_note = (
            f"; .gitmodules url {step.url_changed[0]} -> {step.url_changed[1]}" if step.url_changed else ""
        )
        plan.append(
            f"{step.consumer.name}: {step.branch} = {step.commit[:12]} on {step.consumer.branch} "
            f"{step.parent[:12]}: {step.gitlink} {(step.old or '-')[:12]} -> {step.new[:12]}{url_note}"
        )
    if not out.ok:
        out.lines = [*plan, "the bumped chain does not pass check-pins: no branch was created", *out.lines]
        out.data["steps"] = _steps_json(steps, created=False, pushed=False)
        return out
    if dry_run:
        out.lines = ["dry run: no ref was changed; the plan:", *plan, *out.lines]
        out.data["steps"] = _steps_json(steps, created=False, pushed=False)
        return out
    for step in steps:
        pins.apply_step(step)
    if push:
        for step in steps:
            protected = {step.consumer.branch, remote.default_branch(step.push_url) or "main"}
            report.info(f"pushing {step.branch} to {step.push_url}")
            pins.push_step(step, protected)
        tail = ["pushed the new branches; open pull requests from them"]
    else:
        tail = [
            f"to push: git --git-dir {step.repo.git_dir} push {step.push_url} {step.branch}" for step in steps
        ]
        tail.append("(or rerun with --push)")
    out.lines = ["created:", *plan, *out.lines, *tail]
    out.data["steps"] = _steps_json(steps, created=True, pushed=push)
    return out


def _steps_json(steps: list[pins.BumpStep], created: bool, pushed: bool) -> list[dict]:
    return [
        {
            "consumer": step.consumer.name,
            "repo": str(step.repo.git_dir),
            "branch": step.branch,
            "parent": step.parent,
            "commit": step.commit,
            "gitlink": step.gitlink,
            "old": step.old,
            "new": step.new,
            "gitmodules_url": list(step.url_changed) if step.url_changed else None,
            "created": created,
            "pushed": pushed,
        }
        for step in steps
    ]
