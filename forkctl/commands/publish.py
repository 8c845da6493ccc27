"""forkctl publish: push the reproducible head apply(series, base) to the fork's branch, never forced.

`fork.publish: rebuild` (default): the head is pushed only as a fast-forward of the branch (or as a new
branch); anything else is refused. `fork.publish: merge` (merge-only branches): a merge commit with the
head's tree and parents [old tip, head] is pushed instead, as a fast-forward. Every push is a
compare-and-swap against the tip read at the start.
"""

from __future__ import annotations

from pathlib import Path

import click

from forkctl import report
from forkctl.chain.forkhead import fork_context
from forkctl.chain.publish import PublishPlan, plan_publish, push_plan
from forkctl.cli import options, verbs
from forkctl.cli.kit import Context, forkctl_command, output_options
from forkctl.git import check_branch_name
from forkctl.git.remote import RemoteMoved
from forkctl.report import Problem, Report

_SAY = {
    "create": "{branch} does not exist at {url}: {verb} it at the fork head {head}",
    "fast-forward": "{branch} {before} is an ancestor of the fork head {head}: {verb} it forward",
    "merge": "{branch} {before} is not an ancestor of the fork head {head}: {verb} the merge {new} "
    "(tree of {head}, parents {before} and {head})",
    "up-to-date": "{branch} already is the fork head {head}: nothing to do",
    "already-published": "{branch} {before} already is the published merge of the fork head {head}: "
    "nothing to do",
}


def _summary(plan: PublishPlan, dry_run: bool) -> str:
    if plan.action == "moved":
        return (
            f"{plan.branch} moved at {plan.url} while publishing: nothing pushed; run forkctl publish again"
        )
    if plan.action == "refused":
        before, head = (plan.before or "")[:12], plan.head[:12]
        return f"{plan.branch} {before} is not an ancestor of the fork head {head}: nothing pushed"
    verb = {"create": "would create" if dry_run else "created"}.get(plan.action, "")
    verb = verb or ("would push" if dry_run else "pushed")
    fields = {"before": (plan.before or "")[:12], "head": plan.head[:12], "new": (plan.new or "")[:12]}
    return _SAY[plan.action].format(branch=plan.branch, url=plan.url, verb=verb, **fields)


@click.command("publish", short_help=verbs.summary("publish"))
@options.repo("A local clone that has the base (lent as objects); default: the cache of upstream's URL.")
@options.branch("The fork branch to publish to (default: the manifest's fork.branch).")
@click.option("--to", "to_url", metavar="URL", help="Where to push (default: the manifest's fork.url).")
@click.option("--dry-run", is_flag=True, help="Read the branch and say what would be pushed; push nothing.")
@output_options()
@forkctl_command
def command(
    ctx: Context, repo_path: Path | None, branch: str | None, to_url: str | None, dry_run: bool
) -> Report:
    """Publish the fork head apply(series, base) to the fork's branch at its URL, never forced.

    \b
    fork.publish: rebuild (default) pushes the head only as a fast-forward or a new branch;
    fork.publish: merge pushes a merge commit (the head's tree, parents [old tip, head]) when the
    head does not descend from the tip, so a merge-only branch never needs a force-push.
    Exit 0 published or nothing to do; 1 refused: rebuild mode and not a fast-forward, or the branch
    moved while publishing (run it again); 2 bad input.
    """
    manifest = ctx.manifest()
    branch = check_branch_name(branch or manifest.fork.branch)
    url = to_url or manifest.fork.url
    fork = fork_context(manifest, str(repo_path) if repo_path else None, report.info)
    plan = plan_publish(manifest, fork, branch, url, report.info)
    out = Report(command="publish")
    if plan.action == "refused":
        out.fail(
            Problem(
                f"{branch} at {url} is {(plan.before or '')[:12]}, and the fork head {plan.head[:12]} is not "
                "a fast-forward of it: fork.publish is rebuild, so nothing was pushed",
                hint="set fork.publish: merge in the manifest to publish it as a merge commit, or have a "
                "person force-push the branch where its policy allows it; forkctl never forces",
            )
        )
    elif plan.pushes and not dry_run:
        report.info(f"pushing {(plan.new or '')[:12]} to {branch} at {url} (compare-and-swap on the old tip)")
        try:
            push_plan(plan, fork.store)
        except RemoteMoved as exc:  # someone pushed meanwhile: a refusal (exit 1), not bad input
            out.fail(Problem(exc.message, hint=exc.hint))
            plan.action, plan.new = "moved", None
    summary = _summary(plan, dry_run)
    out.lines = [
        summary,
        f"mode {plan.mode}; before {plan.before or '-'}; tip {plan.new or plan.before or '-'}",
    ]
    out.lines.append(
        f"fork head {plan.head} = {manifest.upstream.repo}@{plan.base} + {len(fork.patches)} patches"
    )
    if dry_run and plan.pushes:
        out.lines.append("dry run: nothing was pushed")
    out.data = {
        "mode": plan.mode,
        "action": plan.action,
        "branch": branch,
        "url": url,
        "before": plan.before,
        "tip": plan.new or plan.before,
        "head": plan.head,
        "base": plan.base,
        "series_digest": plan.digest,
        "pushed": plan.pushes and not dry_run,
        "dry_run": dry_run,
        "summary": summary,
    }
    return out
