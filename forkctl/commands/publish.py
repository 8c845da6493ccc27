"""forkctl publish: push the reproducible head apply(series, base) to the fork's branch, never forced.

`fork.publish: rebuild` (default): the head is pushed only as a fast-forward of the branch (or as a new
branch); after a port, the merge that lands it goes to a new `sync/upstream-<date>-<sha12>` branch, with
the plain push that lands it. `fork.publish: merge` (merge-only branches): a merge commit with the
head's tree plus the fork's own files (fork.own_paths) and parents [old tip, head] is pushed instead, as
a fast-forward. A tip holding other changes is refused. Every push is a compare-and-swap against the tip
read at the start. Forward only: a tip on a newer upstream base than the manifest's is refused, with the
`forkctl port --onto` that moves the toolkit there (`--allow-backwards` to go back); and a toolkit that is a
git checkout publishes only the manifest and patch files its HEAD holds (no option to do otherwise: a
local commit is the way, and what was published is then always a commit of the toolkit).
"""

from __future__ import annotations

import shlex
from pathlib import Path

import click

from forkctl import report
from forkctl.chain.forkhead import fork_context
from forkctl.chain.model import WantedBase
from forkctl.chain.ownfiles import named
from forkctl.chain.publish import PublishPlan, plan_publish, push_plan, uncommitted_inputs
from forkctl.cli import options, verbs
from forkctl.cli.kit import Context, forkctl_command, output_options
from forkctl.git.refs import check_branch_name
from forkctl.git.remote import RemoteMoved
from forkctl.gpu import gatecheck
from forkctl.gpu.gate import GateSummary
from forkctl.manifest import Manifest
from forkctl.report import Level, Problem, Report
from forkctl.report import gatemoves as gate_views
from forkctl.series import Series

_SAY = {
    "create": "{branch} does not exist at {url}: {verb} it at the fork head {head}",
    "fast-forward": "{branch} {before} is an ancestor of the fork head {head}: {verb} it forward",
    "merge": "{branch} {before} is not an ancestor of the fork head {head}: {verb} the merge {new} "
    "(tree of {head}{carried}, parents {before} and {head})",
    "sync": "{branch} {before} is not an ancestor of the fork head {head} and fork.publish is rebuild: "
    "{verb} the merge {new} (tree of {head}{carried}, parents {before} and {head}) to the new branch "
    "{target}; land it with: {land}",
    "up-to-date": "{branch} already is the fork head {head}: nothing to do",
    "already-published": "{branch} {before} already is the published merge of the fork head {head}: "
    "nothing to do",
    "already-synced": "{target} already holds the merge {new} of the fork head {head} onto {branch} "
    "{before}: nothing to do; land it with: {land}",
}


class _Gate:
    """The gate's verdict on the published series, whether --no-gate overrides it, and the note the
    override writes into the merge commit (empty when the gate passes)."""

    def __init__(
        self, manifest: Manifest, series: Series, no_gate: bool, allow_pending: tuple[str, ...] = ()
    ) -> None:
        self.series = series
        self.summary: GateSummary = gatecheck.judge(manifest, series, allow_pending)
        self.fails = not gatecheck.passes(self.summary)
        self.no_gate = no_gate
        self.note = gatecheck.move_note(self.summary, series, no_gate)

    def judge(self, out: Report, plan: PublishPlan, dry_run: bool) -> None:
        """Refuse a plan that pushes past a failing gate (the plan then pushes nothing), or say the
        override and where it is written."""
        if not (self.fails and plan.pushes):
            return
        if not self.no_gate:
            digest = gatecheck.digest_of(self.summary, self.series)
            found = gatecheck.findings(self.summary)
            hint = gatecheck.refusal_hint("publish")
            for problem in gate_views.refusal("publish", digest, found, hint, dry_run):
                out.fail(problem)
            plan.action, plan.new = "gated", None
            return
        where = (
            "the merge commit's message"
            if plan.new != plan.head
            else "this output only: a fast-forward pushes the fork head's own commits, whose messages are "
            "the patches'; bump-bridge --no-gate writes it into the consumers' commits"
        )
        out.problems.append(gate_views.overridden("publish", self.note, where))

    def json(self) -> dict:
        return gate_views.gate_json(self.summary, self.no_gate and self.fails, self.note)


def _summary(plan: PublishPlan, dry_run: bool) -> str:
    before, head = (plan.before or "")[:12], plan.head[:12]
    if plan.action == "moved":
        return (
            f"{plan.target} moved at {plan.url} while publishing: nothing pushed; run forkctl publish again"
        )
    if plan.action == "foreign":
        return (
            f"{plan.branch} {before} holds changes beside the series and the fork's own files: nothing pushed"
        )
    if plan.action == "sync-taken":
        return f"{plan.target} exists at {plan.url} holding {(plan.target_before or '')[:12]}: nothing pushed"
    if plan.action == "backwards":
        return (
            f"{plan.branch} {before} builds on {(plan.tip_base or '')[:12]}, newer than the manifest base "
            f"{plan.base[:12]}: nothing pushed"
        )
    if plan.action == "gated":
        return f"the gate fails for series {plan.digest[:12]} (no GPU evidence): nothing pushed"
    verb = {"create": "would create" if dry_run else "created"}.get(plan.action, "")
    verb = verb or ("would push" if dry_run else "pushed")
    carried = f" + the fork's own {', '.join(plan.carried)} from {before}" if plan.carried else ""
    fields = {"before": before, "head": head, "new": (plan.new or "")[:12], "carried": carried}
    return _SAY[plan.action].format(
        branch=plan.branch, url=plan.url, verb=verb, target=plan.target, land=plan.land, **fields
    )


def _backwards(plan: PublishPlan, wants: WantedBase) -> Problem:
    """The problem (exit 1) of a tip on a newer upstream base; a notice when the caller means to go back."""
    many = f"{wants.lacks} upstream commits" if wants.lacks >= 0 else "upstream commits"
    said = (
        f"{plan.branch} at {plan.url} ({(plan.before or '')[:12]}) builds on the upstream commit "
        f"{wants.commit} (its merge-base with upstream), which has {many} the manifest base "
        f"{plan.base[:12]} lacks: publishing the fork head {plan.head[:12]} over it pushes a merge with "
        "the head's tree, which reverts them"
    )
    if not wants.descends:
        said += "; that commit does not descend from the manifest base, so the port is a backport"
    if plan.action != "backwards":
        return Problem(f"{said} (going back: --allow-backwards)", level=Level.NOTICE)
    return Problem(
        f"{said}: nothing was pushed",
        hint=f"move the toolkit forward onto the branch's base: {wants.port_command}, commit the manifest "
        "and patches, then forkctl publish again (or pass --allow-backwards to go back)",
    )


def _uncommitted(top: Path, files: list[str]) -> Problem:
    """The refusal of toolkit files that are not as its HEAD holds them, with the commit that fixes it."""
    differ = "differs" if len(files) == 1 else "differ"
    where = shlex.quote(str(top))
    add = shlex.join(["add", "--force", "--", *files])  # --force: an ignored patch file is added too
    return Problem(
        f"the toolkit's {', '.join(files)} {differ} from what its HEAD holds in {top} (uncommitted, untracked "
        "or ignored): forkctl publishes only what a commit of the toolkit records, so that what the fork "
        "branch gets can always be traced to the manifest and patches that made it: nothing was pushed",
        hint=f"commit them (git -C {where} {add} && git -C {where} commit), or undo them, then run forkctl "
        "publish again",
    )


def _refusal(plan: PublishPlan) -> Problem | None:
    """The problem (exit 1) of a plan that must not push."""
    if plan.action == "backwards" and plan.backwards is not None:
        return _backwards(plan, plan.backwards)
    if plan.action == "foreign":
        said = "; ".join(f"{f.commit[:12]} {f.subject!r} changes {named(f.paths)}" for f in plan.foreign)
        return Problem(
            f"{plan.branch} at {plan.url} ({(plan.before or '')[:12]}) holds changes that are neither in the "
            f"series nor among the fork's own files (fork.own_paths): {said}. The published tree is the "
            "fork head's, so publishing would drop them: nothing was pushed",
            hint="bring each into the series (in a clone: git cherry-pick it onto the fork head, then "
            "forkctl export --branch <that branch> --repo <clone>), or, if the fork owns those files, list "
            "them under fork.own_paths in the manifest; then run forkctl publish again",
        )
    if plan.action == "sync-taken":
        return Problem(
            f"{plan.target} at {plan.url} holds {(plan.target_before or '')[:12]}, not the merge "
            f"{plan.head[:12]} would be published with onto {plan.branch} {(plan.before or '')[:12]}: "
            "nothing was pushed (forkctl never moves a branch it did not make from this tip)",
            hint="if that is an older sync that was not landed, delete it ("
            + shlex.join(["git", "push", plan.url, "--delete", f"refs/heads/{plan.target}"])
            + ") and run forkctl publish again",
        )
    return None


@click.command("publish", short_help=verbs.summary("publish"))
@options.repo("A local clone that has the base (lent as objects); default: the cache of upstream's URL.")
@options.branch("The fork branch to publish to (default: the manifest's fork.branch).")
@click.option("--to", "to_url", metavar="URL", help="Where to push (default: the manifest's fork.url).")
@click.option(
    "--allow-backwards",
    is_flag=True,
    help="Publish even over a branch whose tip builds on a newer upstream commit than the manifest base "
    "(the merge would revert the upstream commits between them). Without it that is refused (exit 1) "
    "with the way forward: forkctl port --onto the branch's base.",
)
@options.no_gate()
@options.allow_pending()
@click.option("--dry-run", is_flag=True, help="Read the branch and say what would be pushed; push nothing.")
@output_options()
@forkctl_command
def command(
    ctx: Context,
    repo_path: Path | None,
    branch: str | None,
    to_url: str | None,
    allow_backwards: bool,
    no_gate: bool,
    allow_pending: tuple[str, ...],
    dry_run: bool,
) -> Report:
    """Publish the fork head apply(series, base) to the fork's branch at its URL, never forced.

    \b
    fork.publish: rebuild (default) pushes the head only as a fast-forward or a new branch; when the
    head does not descend from the tip (a port), the merge that lands it goes to a new branch
    sync/upstream-<date>-<sha12>, and the plain push that lands it is printed.
    fork.publish: merge pushes that merge commit (the head's tree plus the fork's own files,
    fork.own_paths, parents [old tip, head]) to the branch itself, so it never needs a force-push.
    A tip holding changes neither in the series nor fork-owned is refused, never dropped.
    Forward only: a tip built on a newer upstream commit than the manifest base (its merge-base with
    upstream) is refused, with the forkctl port --onto that moves the toolkit there, unless
    --allow-backwards. A toolkit that is a git checkout publishes only the manifest and patch files
    its HEAD holds: uncommitted, untracked or ignored ones are refused (commit them).
    The gate: a push of a series the gate fails for (no GPU evidence: forkctl gate) is refused, with the
    gate's findings and the forkctl validate that records the evidence, unless --no-gate; that
    override is written into the merge commit's message (an input of that reproducible commit).
    Exit 0 published or nothing to do; 1 refused: such changes on the tip, a tip on a newer base,
    uncommitted toolkit files, the gate fails, the sync branch holds another commit, or the branch
    moved while publishing (run it again); 2 bad input. --dry-run refuses the same way.
    """
    manifest = ctx.manifest()
    branch = check_branch_name(branch or manifest.fork.branch)
    url = to_url or manifest.fork.url
    out = Report(command="publish")
    # A manifest named by URL is a snapshot of a commit: committed by definition.
    top, uncommitted = (None, []) if ctx.remote_spec() else uncommitted_inputs(manifest)
    if top is not None and uncommitted:
        out.fail(_uncommitted(top, uncommitted))
        return _refused_early(out, manifest, branch, url, uncommitted, dry_run)
    fork = fork_context(manifest, str(repo_path) if repo_path else None, report.info, location_flag="--repo")
    gate = _Gate(manifest, Series(base=fork.base, patches=fork.patches), no_gate, allow_pending)
    plan = plan_publish(
        manifest, fork, branch, url, report.info, allow_backwards=allow_backwards, note=gate.note
    )
    if plan.backwards is not None and plan.action != "backwards":  # --allow-backwards: said, not hidden
        out.problems.append(_backwards(plan, plan.backwards))
    refusal = _refusal(plan)
    if refusal is None:
        gate.judge(out, plan, dry_run)
    if refusal is not None:
        out.fail(refusal)
    elif plan.pushes and not dry_run:
        report.info(
            f"pushing {(plan.new or '')[:12]} to {plan.target} at {url} (compare-and-swap on the old tip)"
        )
        try:
            push_plan(plan, fork.upstream_repo)
        except RemoteMoved as exc:  # someone pushed meanwhile: a refusal (exit 1), not bad input
            out.fail(Problem(exc.message, hint=exc.hint))
            plan.action, plan.new = "moved", None
    summary = _summary(plan, dry_run)
    out.lines = [
        summary,
        f"mode {plan.mode}; before {plan.before or '-'}; tip {_tip(plan) or '-'}",
    ]
    out.lines.append(
        f"fork head {plan.head} = {manifest.upstream.repo}@{plan.base} + {len(fork.patches)} patches"
    )
    if dry_run and plan.pushes:
        out.lines.append("dry run: nothing was pushed")
    out.data = _plan_json(plan, uncommitted, dry_run, summary, gate)
    return out


def _plan_json(plan: PublishPlan, uncommitted: list[str], dry_run: bool, summary: str, gate: _Gate) -> dict:
    """The report's JSON: the plan, what became of it, and the gate's verdict on the series."""
    return {
        "mode": plan.mode,
        "action": plan.action,
        "branch": plan.branch,
        "url": plan.url,
        "before": plan.before,
        "tip": _tip(plan),
        "head": plan.head,
        "base": plan.base,
        "series_digest": plan.digest,
        "target": plan.target,
        "target_tip": plan.new or plan.target_before,
        "carried": plan.carried,
        "foreign": [{"commit": f.commit, "subject": f.subject, "paths": f.paths} for f in plan.foreign],
        "land": plan.land,
        "tip_base": plan.tip_base,
        "backwards": _backwards_json(plan),
        "uncommitted": uncommitted,
        "pushed": plan.pushes and not dry_run,
        "dry_run": dry_run,
        "summary": summary,
        "gate": gate.json(),
    }


def _backwards_json(plan: PublishPlan) -> dict[str, object] | None:
    wants = plan.backwards
    if wants is None:
        return None
    return {"tip_base": wants.commit, "lacks": wants.lacks, "port": wants.port_command}


def _refused_early(
    out: Report, manifest: Manifest, branch: str, url: str, uncommitted: list[str], dry_run: bool
) -> Report:
    """The report of a publish refused before the branch is read: the toolkit's files are not committed."""
    summary = f"not committed in the toolkit: {', '.join(uncommitted)}: nothing pushed"
    out.lines = [summary]
    unread = ("before", "tip", "head", "series_digest", "target", "target_tip", "land", "tip_base")
    out.data = {
        "mode": manifest.fork.publish,
        "action": "uncommitted",
        "branch": branch,
        "url": url,
        **dict.fromkeys(unread),
        "base": manifest.upstream.base,
        "carried": [],
        "foreign": [],
        "backwards": None,
        "uncommitted": uncommitted,
        "pushed": False,
        "dry_run": dry_run,
        "summary": summary,
        "gate": None,  # not judged: nothing is published from uncommitted files
    }
    return out


def _tip(plan: PublishPlan) -> str | None:
    """What `branch` itself is after publishing (a sync branch leaves it where it was)."""
    if plan.target != plan.branch:
        return plan.before
    return plan.new or plan.before
