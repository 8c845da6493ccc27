"""What `forkctl sync` writes for GitHub: the sync pull request's body and the dashboard issue's, as
Markdown, each with the chain as a Mermaid diagram.

A view only, written from the facts of forkctl/chain/sync.py. Every string from data (subjects, authors,
file names, the range-diff, URLs) is in code as forkctl/report/markdown.py says; the body is cut to
GitHub's limit as forkctl/report/pullrequest.py cuts a bump's. The same facts give the same bytes, so a
rerun with nothing new finds the body it wrote and edits nothing.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from forkctl.manifest import Manifest
from forkctl.report.chain import _label
from forkctl.report.markdown import cell, code, fenced
from forkctl.report.preview import verdict_words
from forkctl.report.pullrequest import BODY_BUDGET, _cut, _length, _within_limit, override_lines

if TYPE_CHECKING:
    from forkctl.chain.sync import SyncPlan

DASHBOARD_TITLE = "forkctl sync dashboard"
_EP_TAG_RE = re.compile(r"-ep([0-9]+)$")


def dashboard_marker(manifest: Manifest) -> str:
    """The line that finds the dashboard again (an HTML comment: GitHub shows nothing of it)."""
    return f"<!-- forkctl-sync-dashboard {manifest.fork.repo} {manifest.fork.branch} -->"


def pr_title(manifest: Manifest, plan: SyncPlan) -> str:
    target = plan.target
    who = f" (pinned by {target.consumer_upstream})" if target.consumer_upstream else ""
    return f"sync: port the series onto {manifest.upstream.repo}@{target.commit[:12]}{who}"


def sync_mermaid(manifest: Manifest, plan: SyncPlan) -> str:
    """The chain once the sync lands: upstream target -> fork head -> the fork branch -> consumers, with
    the consumer's upstream pinning the target (the move the sync follows)."""
    target, head = plan.target, plan.head
    lines = ["```mermaid", "graph LR"]
    lines.append(f'  U["{_label(manifest.upstream.repo)}<br/>target {target.commit[:12]}"]')
    if head is None:
        blocked = len(plan.conflicts)
        lines.append(f'  F["{_label(manifest.fork.repo)}<br/>{blocked} patch(es) conflict"]')
        lines.append('  U -. "port stops" .-> F')
        lines.append("  style F stroke:#cf222e,stroke-width:3px")
    else:
        lines.append(f'  F["{_label(manifest.fork.repo)}<br/>fork head {head[:12]}"]')
        lines.append(f'  U -- "+{len(plan.ported)} patches" --> F')
        branch = _label(manifest.fork.branch)
        sync = plan.publish.target if plan.publish else ""
        lines.append(f'  B["{branch}<br/>after merging {_label(sync)}"]')
        lines.append('  F -- "merge" --> B')
        lines.append("  style F stroke:#2da44e,stroke-width:3px")
    previous = "B" if head is not None else "F"
    for index, consumer in enumerate(manifest.consumers):
        lines.append(f'  C{index}["{_label(consumer.name)}<br/>{_label(consumer.branch)}"]')
        lines.append(f'  {previous} -. "next: bump-bridge" .-> C{index}')
        previous = f"C{index}"
    if target.consumer_upstream:
        branch = _label(target.consumer_branch or "")
        lines.append(
            f'  P["{_label(target.consumer_upstream)}<br/>{branch} {(target.consumer_commit or "")[:12]}"]'
        )
        lines.append('  P -- "pins" --> U')
    lines.append("```")
    return "\n".join(lines)


def _why(manifest: Manifest, plan: SyncPlan) -> list[str]:
    target = plan.target
    return [
        "### Why",
        "",
        f"The target {code(target.commit)} is {code(target.because)}: {target.ahead} upstream commits after "
        f"the manifest base {code(plan.base[:12])}.",
        "",
    ]


def _series_table(plan: SyncPlan) -> list[str]:
    lines = ["| # | patch | on the target | evidence |", "|---|---|---|---|"]
    for entry in plan.entries:
        state, evidence = verdict_words(entry)
        lines.append(f"| {entry.position + 1} | {cell(entry.patch.subject)} | {state} | {cell(evidence)} |")
    return [*lines, ""]


def _absorbed(plan: SyncPlan) -> list[str]:
    lines = ["### Absorbed upstream (dropped by the port)", ""]
    if not plan.absorbed:
        return [*lines, "None.", ""]
    for entry in plan.absorbed:
        verdict = entry.verdict
        where = f", upstream commit {code(verdict.upstream_commit)}" if verdict.upstream_commit else ""
        lines.append(f"- {code(entry.patch.subject)}: {code(verdict.reason)}{where}")
    return [*lines, ""]


def validate_commands(manifest: Manifest, target: str) -> list[str]:
    """The exact commands that record the GPU evidence the gate needs, per required environment."""
    archive = f"git archive --format=tar.gz -o base.tgz {target} megatron tests"
    commands = [f"forkctl port --onto {target}", archive]
    for tag in manifest.validation.require or ["sm90"]:
        ep = _EP_TAG_RE.search(tag)
        commands.append("forkctl validate --source base.tgz" + (f" --ep {ep.group(1)}" if ep else ""))
    return commands


def _gate(manifest: Manifest, plan: SyncPlan, evidence_file: str | None) -> list[str]:
    lines = ["### GPU evidence the gate still needs", ""]
    digest = code((plan.digest or "")[:16])
    if evidence_file:
        lines.append(f"Evidence for the ported series {digest} is recorded ({code(evidence_file)}).")
    else:
        required = ", ".join(code(tag) for tag in manifest.validation.require) or code("sm90")
        lines.append(f"No GPU evidence names the ported series {digest}: it needs {required}. On a GPU host:")
    return [*lines, "", *fenced("\n".join(validate_commands(manifest, plan.target.commit)), "sh"), ""]


def _range_diff(plan: SyncPlan, budget: int) -> list[str]:
    lines = ["### range-diff (the series on the base -> on the target)", ""]
    if plan.range_diff is None:
        return [*lines, "Not available (the ported series is the old one, or git range-diff failed).", ""]
    whole = plan.range_diff.rstrip()
    shown = _cut(whole, max(budget - 400, 0))
    lines += fenced(shown)
    if len(shown) < len(whole):
        lines.append(
            f"_Cut: {len(shown):,} of {len(whole):,} characters; the whole is in `forkctl sync --json`._"
        )
    return [*lines, ""]


def pr_body(
    manifest: Manifest, plan: SyncPlan, evidence_file: str | None, override: list[str] | None = None
) -> str:
    """The sync pull request: why, the series on the target, what was absorbed, the range-diff, the
    chain after it lands, the GPU evidence still needed and how to land it; `override`: the note of a
    sync past a failing gate (--no-gate), said first."""
    publish = plan.publish
    head = plan.head or ""
    before = [f"## Sync {code(manifest.fork.branch)} onto upstream {code(plan.target.commit[:12])}", ""]
    before += override_lines(override or [])
    before += [
        f"The fork head {code(head)} = apply(ported series, {code(plan.target.commit[:12])}), the series "
        f"{code(plan.old_head[:12])} had on {code(plan.base[:12])} ported by `forkctl sync` (objects only; "
        f"{code(publish.target if publish else '')} merges it onto {code(manifest.fork.branch)}).",
        "",
    ]
    before += [
        *_why(manifest, plan),
        "### The series on the target",
        "",
        *_series_table(plan),
        *_absorbed(plan),
    ]
    after = ["### The chain after it lands", "", sync_mermaid(manifest, plan), ""]
    after += _gate(manifest, plan, evidence_file)
    after += [
        "### To land it",
        "",
        "Fast-forward the branch to the sync branch (GitHub's merge button would add a merge of its own), "
        "then move the toolkit and the consumers:",
        "",
    ]
    land = [publish.land] if publish and publish.land else []
    steps = [*land, f"forkctl port --onto {plan.target.commit}", "forkctl bump-bridge --open-pr"]
    after += [*fenced("\n".join(steps), "sh"), ""]
    after.append("<sub>Written by `forkctl sync`; the next scheduled run keeps it current.</sub>")
    rest = _length("\n".join(before + after)) + 2
    return _within_limit("\n".join(before + _range_diff(plan, BODY_BUDGET - rest) + after) + "\n")


def _breaks(manifest: Manifest, plan: SyncPlan) -> list[str]:
    lines = ["### What breaks each conflicting patch", ""]
    for entry in plan.conflicts:
        found = plan.breaks.get(entry.position)
        name = f"{entry.position + 1:04d} {code(entry.patch.subject)}"
        if entry.verdict.reason == "reverted":
            picked, reverted_by = entry.verdict.upstream_commit or "", entry.verdict.reverted_by or ""
            lines.append(
                f"- {name} picks upstream {code(picked)}, which upstream reverted in {code(reverted_by)}: "
                "`forkctl port --skip` drops it, `forkctl port --reapply-reverted` applies it again"
            )
            continue
        if found is None:
            lines.append(f"- {name}: no single upstream commit in base..target was found to break it alone")
            continue
        files = ", ".join(code(path) for path in found.files[:20]) + (" ..." if len(found.files) > 20 else "")
        merge = (
            f"; a merge: the patch still ports on its parent {code(found.parent)}, the break came in with "
            + ", ".join(code(sha) for sha in found.merged)
            if found.merged
            else ""
        )
        lines.append(
            f"- {name} first breaks at {code(found.commit)} {code(found.subject)} by {code(found.author)} "
            f"({code(found.date)}); files: {files}{merge}"
        )
    target, where = plan.target.commit, plan.where
    resume = plan.ways.get("continue", "forkctl port --continue")
    skip = plan.ways.get("skip", "forkctl port --skip")
    commands = [
        f"forkctl status --onto {target} --first-break{where}",
        f"forkctl port --onto {target}{where}",
        *_stops(plan),
        f"{resume}   # or: {skip} (recorded under dropped:)",
        "forkctl publish",
    ]
    return [
        *lines,
        "",
        "To resolve it locally, in a checkout of the toolkit:",
        "",
        *fenced("\n".join(commands), "sh"),
        "",
    ]


def _stops(plan: SyncPlan) -> list[str]:
    """A comment per patch the port will stop at: the upstream commit where it stops and, where
    bisection found it, the one that first breaks the patch; the last says what to do there."""
    lines = []
    for number, entry in enumerate(plan.conflicts):
        found = plan.breaks.get(entry.position)
        broken = f": first broken by upstream {found.commit[:12]} ({found.subject})" if found else ""
        when = "it stops" if number == 0 else "then"
        where = f"{entry.position + 1:04d} {entry.patch.subject} on upstream {plan.target.commit[:12]}"
        lines.append(f"# {when} at {where}{broken}")
    return [*lines[:-1], f"{lines[-1] if lines else '#'}; resolve in the scratch worktree port prints, then:"]


def _tip_warning(plan: SyncPlan) -> list[str]:
    lines = ["### Early warning: upstream's branch tip", ""]
    tip = plan.tip
    if tip is None:
        return [
            *lines,
            "The target is upstream's tip (or the tip is not ahead of it): nothing to preview.",
            "",
        ]
    lines.append(f"Upstream's tip {code(tip.tip[:12])} is {tip.ahead} commits ahead of the target.")
    lines.append("")
    if not tip.warnings:
        return [*lines, "Every patch that ports onto the target also ports onto the tip.", ""]
    for warning in tip.warnings:
        found = warning.found
        lines.append(
            f"- {warning.position + 1:04d} {code(warning.subject)} will break at upstream {code(found.commit[:12])} "
            f"{code(found.subject)} by {code(found.author)}, {warning.ahead} commits ahead of the target; "
            f"files: {', '.join(code(path) for path in found.files[:20])}"
        )
    return [*lines, ""]


def dashboard_body(manifest: Manifest, plan: SyncPlan) -> str:
    """The dashboard issue: the series' state on the target, the first break of each conflicting
    patch, the commands to resolve it, the early warning on upstream's tip, and the chain."""
    state = (
        f"**{len(plan.conflicts)} patch(es) conflict on the target: nothing was moved.**"
        if plan.conflicts
        else "The series ports cleanly onto the target (see the sync pull request)."
    )
    lines = [dashboard_marker(manifest), f"## {DASHBOARD_TITLE}: {code(manifest.fork.branch)}", "", state, ""]
    lines += [*_why(manifest, plan), "### Every patch on the target", "", *_series_table(plan)]
    if plan.conflicts:
        lines += _breaks(manifest, plan)
    lines += _tip_warning(plan)
    lines += ["### The chain", "", sync_mermaid(manifest, plan), ""]
    lines.append("<sub>Kept in place by `forkctl sync`: one issue, found again by the comment above.</sub>")
    return _within_limit("\n".join(lines) + "\n")


def patch_json(plan: SyncPlan) -> list[dict]:
    """Each patch's port verdict for `sync --json`, with the upstream commit that first breaks it."""
    items = []
    for entry in plan.entries:
        state, evidence = verdict_words(entry)
        item: dict = {
            "order": entry.position + 1,
            "subject": entry.patch.subject,
            "result": state,
            "reason": entry.verdict.reason or None,
            "upstream_commit": entry.verdict.upstream_commit,
            "evidence": evidence or None,
        }
        found = plan.breaks.get(entry.position)
        if found is not None:
            item["first_break"] = {
                "commit": found.commit,
                "subject": found.subject,
                "author": found.author,
                "date": found.date,
                "files": found.files,
                "parent": found.parent,
                "merged": found.merged,
            }
        items.append(item)
    return items
