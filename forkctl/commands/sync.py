"""forkctl sync: the fork follows its consumers by itself, one idempotent command for a scheduled job.

It picks the target (by default where the consumers' own pins already stand, when past the manifest
base: the one way forward check-pins and describe name too; else what the nearest consumer's own
upstream pins, when that descends from the manifest base), ports the series there on objects and: when every patch ports, publishes the merge
that lands it on a `sync/upstream-<date>-<sha12>` branch and opens (or updates) one pull request on the
fork; when a patch conflicts, moves nothing and keeps one dashboard issue on the fork naming the
upstream commit that first breaks each patch. The dashboard also previews upstream's branch tip. A rerun
with nothing new pushes nothing and edits nothing; `--dry-run` says what it would do and asks gh nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

import click

from forkctl import github, report
from forkctl.chain.forkhead import fork_context
from forkctl.chain.publish import SYNC_PREFIX, push_plan
from forkctl.chain.sync import SyncPlan, plan_sync, preview_tip
from forkctl.chain.synctarget import RULE_PINS, SyncTarget, choose_target
from forkctl.cli import options, verbs
from forkctl.cli.kit import Context, forkctl_command, output_options
from forkctl.files import atomic_write_text, cache_root
from forkctl.git.remote import RemoteMoved
from forkctl.git.repo import GitRepo
from forkctl.gpu import gatecheck
from forkctl.gpu.evidence import evidence_dir, evidence_path
from forkctl.manifest import Manifest
from forkctl.ops.progress import port_on
from forkctl.report import Level, Problem, Report
from forkctl.report import gatemoves as gate_views
from forkctl.report import sync as views
from forkctl.report.chain import way_json, way_problem
from forkctl.report.preview import verdict_words


def _body_file(kind: str, key: str) -> Path:
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", key).strip("-.") or kind
    return cache_root() / "pull-requests" / f"sync-{kind}-{name}.md"


def _evidence_file(manifest: Manifest, plan: SyncPlan) -> str | None:
    if plan.digest is None:
        return None
    found = evidence_path(evidence_dir(manifest), plan.digest)
    return str(found.relative_to(manifest.root)) if found.is_file() else None


def _target_lines(target: SyncTarget) -> list[str]:
    if target.relation == "pins-diverged":  # the problem says why, once
        return [f"no target ({target.rule}): the consumers' pins lie on two lines of upstream history"]
    lines = [f"target {target.commit} ({target.rule}): {target.because}"]
    way = target.way
    if target.rule == RULE_PINS and way is not None and way.command is not None:
        lines.append(f"the chain's one way forward: {way.command}, by one rule: {way.rule}")
    if target.pins_unread:
        lines.append(
            f"the consumers' pins were not read ({target.pins_unread}): their upstream alone decided"
        )
    said = {
        "ahead": f"{target.ahead} upstream commits after the manifest base",
        "base": "the manifest base itself",
        "behind": "behind the manifest base",
        "diverged": "beside the manifest base (neither descends from the other)",
        "unlisted": "held by no branch or tag of upstream",
    }
    return [*lines, f"the target is {said[target.relation]}"]


def _plan_lines(plan: SyncPlan) -> list[str]:
    lines = []
    for entry in plan.entries:
        state, evidence = verdict_words(entry)
        lines.append(
            f"  {entry.position + 1:04d} {entry.patch.subject}: {state}"
            + (f" ({evidence})" if evidence else "")
        )
        found = plan.breaks.get(entry.position)
        if found is not None:
            lines.append(
                f"       first breaks at {found.commit[:12]} {found.subject!r} by {found.author}; "
                f"files: {', '.join(found.files[:10])}"
            )
    for entry in plan.absorbed:
        lines.append(
            f"would drop {entry.patch.subject!r}: absorbed upstream ({entry.verdict.reason}"
            + (f", {entry.verdict.upstream_commit[:12]}" if entry.verdict.upstream_commit else "")
            + "); forkctl port --onto records it under dropped:"
        )
    if plan.head is not None and plan.publish is not None:
        publish = plan.publish
        lines.append(
            f"ported fork head {plan.head} ({len(plan.ported)} patches, series {(plan.digest or '')[:12]})"
        )
        lines.append(
            f"publish: {publish.action} {publish.target} at {publish.url} ({(publish.new or '-')[:12]})"
        )
    if plan.tip is not None:
        tip = plan.tip
        clean = "" if tip.warnings else ": every patch that ports onto the target ports there too"
        lines.append(f"upstream's tip {tip.tip[:12]} is {tip.ahead} commits ahead of the target{clean}")
        for warning in tip.warnings:
            lines.append(
                f"early warning: {warning.position + 1:04d} {warning.subject} will break at upstream "
                f"{warning.found.commit[:12]} {warning.found.subject!r}, {warning.ahead} commits ahead"
            )
    return lines


def _would(manifest: Manifest, plan: SyncPlan) -> list[str]:
    """What a run would do on GitHub, for the dry run (gh is not asked)."""
    lines = []
    publish = plan.publish
    if (
        publish is not None
        and publish.target != publish.branch
        and publish.action in ("sync", "already-synced")
    ):
        lines.append(
            f"would open or update the pull request {views.pr_title(manifest, plan)!r} on "
            f"{manifest.fork.repo}: {publish.target} -> {publish.branch}"
        )
    if plan.conflicts or (plan.tip and plan.tip.warnings):
        lines.append(f"would open or update the issue {views.DASHBOARD_TITLE!r} on {manifest.fork.repo}")
    return [*lines, "dry run: nothing was pushed, no pull request or issue was touched"]


def _publish(plan: SyncPlan, out: Report, upstream_repo: GitRepo) -> bool:
    """Push the sync branch when the plan says so; False when it must not or could not."""
    publish = plan.publish
    assert publish is not None
    if publish.action in ("foreign", "sync-taken", "backwards"):
        why = {
            "foreign": f"{publish.branch} holds changes beside the series and the fork's own files",
            "sync-taken": f"{publish.target} exists at {publish.url} holding {(publish.target_before or '')[:12]}",
            "backwards": f"{publish.branch} builds on {(publish.tip_base or '')[:12]}, which has upstream "
            f"commits the sync target {publish.base[:12]} lacks (the merge would revert them)",
        }[publish.action]
        out.fail(Problem(f"{why}: nothing was pushed", hint="run forkctl publish --dry-run for the details"))
        return False
    if publish.target == publish.branch:  # the branch already is (or publishes) the ported head
        out.lines.append(f"nothing to sync: {publish.branch} already holds the fork head {publish.head[:12]}")
        return False
    if publish.pushes:
        report.info(f"pushing {(publish.new or '')[:12]} to {publish.target} at {publish.url}")
        try:
            push_plan(publish, upstream_repo)
        except RemoteMoved as exc:
            out.fail(Problem(exc.message, hint=exc.hint))
            return False
        out.lines.append(f"pushed {publish.target} ({(publish.new or '')[:12]}) to {publish.url}")
    else:
        out.lines.append(
            f"{publish.target} already holds {(publish.new or publish.target_before or '')[:12]}"
        )
    return True


def _gh_call(out: Report, what: str, call, manual: list[str] | None = None) -> dict:  # type: ignore[no-untyped-def]
    """Run `call(gh)`; without gh on PATH, a notice with the command that does it by hand (`manual`,
    None: nothing needs opening)."""
    gh = github.gh_on_path()
    if gh is None:  # nothing to say when there is nothing to open (a dashboard without news)
        if manual:
            said = f"gh is not on PATH: the {what} was not opened; run: {github.shell_line(manual)}"
            out.problems.append(Problem(said, level=Level.NOTICE))
        return {"action": "not-opened", "command": manual}
    try:
        opened = call(gh)
    except github.GhFailed as exc:
        out.fail(Problem(f"the {what}: {exc.message}", hint=f"retry: {github.shell_line(exc.command)}"))
        return {"action": "failed", "command": exc.command}
    if isinstance(opened, list):  # the pull requests closed as superseded
        if opened:
            out.lines.append(f"{what}: closed {', '.join(f'#{n}' for n in opened)}")
        return {"action": "closed" if opened else "none", "closed": opened}
    out.lines.append(f"{what}: {opened.action} {opened.url or ''}".rstrip())
    for stranger in opened.strangers:
        out.problems.append(Problem(github.stranger_warning(what, stranger), level=Level.WARNING))
    return {key: getattr(opened, key) for key in ("action", "url", "number", "command", "strangers")}


def _gated(
    manifest: Manifest,
    plan: SyncPlan,
    out: Report,
    no_gate: bool,
    dry_run: bool,
    allow_pending: tuple[str, ...] = (),
) -> list[str] | None:
    """The gate on the ported series, where the sync would push its branch or open its pull request:
    None when it refuses (the report says why), else the override note (empty when the gate passes
    or nothing would be published)."""
    publish = plan.publish
    if plan.conflicts or publish is None or publish.target == publish.branch:
        return []
    if publish.action not in ("sync", "already-synced"):
        return []  # refused for another reason (_publish says which)
    series = gatecheck.ported_series(manifest, plan.target.commit, plan.ported, plan.files)
    summary = gatecheck.judge(manifest, series, allow_pending)
    note = gatecheck.override_note(summary, series)
    accepted = gatecheck.accepted_note(summary)
    out.data["gate"] = gate_views.gate_json(summary, bool(note) and no_gate, note if no_gate else accepted)
    if not note:
        return accepted
    if no_gate:
        out.problems.append(gate_views.overridden("sync", note, "the sync pull request's body"))
        return note
    digest = gatecheck.digest_of(summary, series)
    hint = gatecheck.refusal_hint("sync")
    for problem in gate_views.refusal("sync", digest, gatecheck.findings(summary), hint, dry_run):
        out.fail(problem)
    out.lines.append("the gate fails for the ported series: no branch was pushed, no pull request opened")
    return None


def _pull_request(manifest: Manifest, plan: SyncPlan, out: Report, note: list[str]) -> dict:
    publish = plan.publish
    assert publish is not None
    body_file = _body_file("pr", publish.target)
    body_file.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(body_file, views.pr_body(manifest, plan, _evidence_file(manifest, plan), note))
    spec = github.PullRequestSpec(
        manifest.fork.repo, manifest.fork.branch, publish.target, views.pr_title(manifest, plan), body_file
    )
    entry = {"repo": spec.repo, "base": spec.base, "head": spec.head, "body_file": str(body_file)}
    opened = _gh_call(
        out,
        "pull request",
        lambda gh: github.open_or_update_unless_same(spec, gh),
        github.create_command(spec),
    )
    if opened["action"] in ("created", "updated", "unchanged"):
        link = opened.get("url") or publish.target
        closed = _gh_call(
            out, "older sync pull requests", lambda gh: github.close_superseded(spec, SYNC_PREFIX, link, gh)
        )
        opened["closed_superseded"] = closed.get("closed", [])
    return {**entry, **opened}


def _dashboard(manifest: Manifest, plan: SyncPlan, out: Report) -> dict:
    """Keep the dashboard: made when there is something to say (a conflict, an early warning), else
    only brought up to date where it exists."""
    needed = bool(plan.conflicts) or bool(plan.tip and plan.tip.warnings)
    body_file = _body_file("dashboard", f"{manifest.fork.repo}-{manifest.fork.branch}")
    body_file.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(body_file, views.dashboard_body(manifest, plan))
    spec = github.IssueSpec(
        manifest.fork.repo, views.DASHBOARD_TITLE, body_file, views.dashboard_marker(manifest)
    )
    entry = {"repo": spec.repo, "body_file": str(body_file), "needed": needed}
    manual = github.issue_create_command(spec) if needed else None
    kept = _gh_call(out, "dashboard issue", lambda gh: github.keep_issue(spec, gh, create=needed), manual)
    return {**entry, **kept}


def _report(manifest: Manifest, plan: SyncPlan, dry_run: bool) -> Report:
    out = Report(command="sync")
    out.lines = [*_target_lines(plan.target), *_plan_lines(plan)]
    for entry in plan.conflicts:
        out.fail(
            Problem(
                f"{entry.patch.subject} conflicts on the target {plan.target.commit[:12]}: nothing was moved",
                hint=f"forkctl status --onto {plan.target.commit} --first-break{plan.where}, then forkctl "
                f"port --onto {plan.target.commit}{plan.where} and resolve it",
            )
        )
    out.summary_markdown = views.sync_mermaid(manifest, plan)
    publish = plan.publish
    out.data = {
        "target": plan.target.commit,
        "rule": plan.target.rule,
        "because": plan.target.because,
        "relation": plan.target.relation,
        "consumer": plan.target.consumer,
        "consumer_commit": plan.target.consumer_commit,
        "way_forward": way_json(plan.target.way),
        "base": plan.base,
        "old_head": plan.old_head,
        "patches": views.patch_json(plan),
        "head": plan.head,
        "ported_series_digest": plan.digest,
        "ported_files": plan.files,
        "sync_branch": publish.target if publish else None,
        "publish": None
        if publish is None
        else {"action": publish.action, "new": publish.new, "land": publish.land},
        "range_diff": plan.range_diff,
        "tip": None
        if plan.tip is None
        else {
            "commit": plan.tip.tip,
            "ahead": plan.tip.ahead,
            "warnings": [
                {"order": w.position + 1, "subject": w.subject, "commit": w.found.commit, "ahead": w.ahead}
                for w in plan.tip.warnings
            ],
        },
        "dry_run": dry_run,
        "gate": None,  # the gate on the ported series, where it would be published
    }
    return out


@click.command("sync", short_help=verbs.summary("sync"))
@click.option(
    "--onto",
    metavar="upstream|SHA",
    help="The upstream commit to port onto: `upstream` (upstream's branch tip) or a SHA. Default: where the "
    "consumers' own pins already stand, when past the base (check-pins' one way forward); else what the "
    "nearest consumer's own upstream pins on its default branch, when it descends from the base.",
)
@options.upstream_repo("Where upstream's objects are (a clone lent as objects, or a URL).")
@options.no_gate()
@options.allow_pending()
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print the plan: push nothing, ask gh nothing. Refused (exit 1) like the real run where the "
    "gate fails for the ported series and --no-gate is not given.",
)
@output_options(github=True)
@forkctl_command
def command(
    ctx: Context,
    onto: str | None,
    upstream_repo: str | None,
    no_gate: bool,
    allow_pending: tuple[str, ...],
    dry_run: bool,
) -> Report:
    """Port the series onto what the consumers' upstream pins; open the sync pull request or the dashboard.

    \b
    Clean: the merge that lands the ported head goes to sync/upstream-<date>-<sha12> on the fork, and
    one pull request into the fork branch says why, what was absorbed, the range-diff, the chain and
    the GPU evidence still needed. A conflict: nothing moves; one dashboard issue on the fork (found
    again by a marker) names the upstream commit that first breaks each patch.
    The gate: where the gate fails for the ported series (a new base has no GPU evidence until it is
    recorded), nothing is pushed and no pull request or issue is touched, unless --no-gate, which is
    written at the top of the pull request's body ("Published without GPU evidence").
    Exit 0 synced or nothing to do; 1 a patch conflicts, the target is beside the base, the gate fails,
    or a push or gh failed; 2 bad input.
    """
    manifest = ctx.manifest()
    with report.phases("sync") as progress:
        fork = fork_context(manifest, upstream_repo, progress)
        target = choose_target(manifest, fork, onto, progress)
        if target.relation in ("behind", "diverged", "pins-diverged", "unlisted"):
            return _not_a_target(manifest, target)
        plan = plan_sync(manifest, fork, target, progress)
        plan.where, plan.ways = port_on(upstream_repo)
        plan.tip = preview_tip(manifest, fork, plan, progress)
    out = _report(manifest, plan, dry_run)
    note = _gated(manifest, plan, out, no_gate, dry_run, allow_pending)
    if note is None:
        return out
    if dry_run:
        out.lines += _would(manifest, plan)
        return out
    if not plan.conflicts and _publish(plan, out, fork.upstream_repo):
        out.data["pull_request"] = _pull_request(manifest, plan, out, note)
    out.data["dashboard"] = _dashboard(manifest, plan, out)
    return out


def _not_a_target(manifest: Manifest, target: SyncTarget) -> Report:
    out = Report(command="sync")
    out.lines = _target_lines(target)
    out.data = {
        "target": target.commit or None,
        "rule": target.rule,
        "because": target.because,
        "relation": target.relation,
        "way_forward": way_json(target.way),
    }
    if target.relation == "pins-diverged" and target.way is not None:
        out.fail(way_problem(target.way))
        return out
    if target.relation == "behind":
        out.lines.append("nothing to sync: the fork is already past it")
        return out
    unlisted = target.relation == "unlisted"
    said = (
        f"is held by no branch or tag of {manifest.upstream.repo} (only a pull request's or another ref "
        "reaches it): sync never ports onto such a commit"
        if unlisted
        else "does not descend from the manifest base: sync moves the fork forward only"
    )
    hint = (
        "wait until upstream merges it, or pass --onto upstream (or a SHA on one of upstream's branches or tags)"
        if unlisted
        else "port by hand (forkctl port --onto SHA --backport) if that is meant, or pass --onto"
    )
    out.fail(Problem(f"the target {target.commit[:12]} {said}", hint=hint))
    return out
