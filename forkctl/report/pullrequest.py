"""The pull-request body forkctl writes for moving the chain: Markdown from the facts of
forkctl/chain/describe.py and the gate's summary (forkctl/gpu/gate.py), plus the same parts as JSON.

A view only: what is not known is said in the body ("not available ..."), never guessed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from forkctl.manifest import Manifest, plain
from forkctl.report.chain import mermaid, mermaid_unchecked

if TYPE_CHECKING:
    from forkctl.chain.bump import BumpStep
    from forkctl.chain.describe import MoveFacts
    from forkctl.gpu.gate import GateSummary

MAX_RANGE_DIFF_LINES = 300  # GitHub refuses bodies over 65,536 characters


def _cell(text: str | None) -> str:
    return (text or "-").replace("|", "\\|").replace("\n", " ")


def _code(text: str | None) -> str:
    return f"`{text}`" if text else "-"


def step_header(step: BumpStep) -> list[str]:
    """What one consumer's pull request changes."""
    old = step.old[:12] if step.old else "nothing"
    lines = [
        f"This pull request moves `{step.gitlink}` in **{step.consumer.name}** (`{step.consumer.branch}`) "
        f"from `{old}` to `{step.new[:12]}`: branch `{step.branch}`, commit `{step.commit[:12]}`.",
    ]
    if step.url_changed:
        lines.append(f"It points `.gitmodules` at `{step.url_changed[1]}` (was `{step.url_changed[0]}`).")
    return [*lines, ""]


def _why(manifest: Manifest, facts: MoveFacts) -> list[str]:
    base = f"`{manifest.upstream.repo}@{facts.base}`"
    if facts.base_subject:
        base += f' ("{facts.base_subject}", {facts.base_date})'
    head = f"`{facts.fork_head}`" if facts.fork_head else "(not available: see the end)"
    return [
        "### Why",
        "",
        f"The fork head {head} = apply(series, base): {base} + {len(facts.series)} patches, rebuilt "
        "reproducibly by forkctl (same SHA on every machine; `forkctl check-pins` verifies each pin).",
        "",
        *_wanted(facts),
    ]


def _wanted(facts: MoveFacts) -> list[str]:
    """The base the chain now wants, and why (or that it is not known)."""
    if facts.wanted_base is None:
        return ["**The base the chain wants:** not known (see the end).", ""]
    return [f"**The base the chain wants:** `{facts.wanted_base}`, {facts.wanted_because}.", ""]


def _series(facts: MoveFacts) -> list[str]:
    lines = ["### The series", "", "| # | file | subject | provenance |", "|---|---|---|---|"]
    for number, row in enumerate(facts.series, start=1):
        name = row.file.rsplit("/", 1)[-1]
        lines.append(f"| {number} | `{_cell(name)}` | {_cell(row.subject)} | {_code(row.provenance)} |")
    return [*lines, ""]


def _dropped(facts: MoveFacts) -> list[str]:
    since = f" since the previous pin's base `{facts.dropped_since[:12]}`" if facts.dropped_since else ""
    lines = [f"### Dropped as absorbed upstream{since}", ""]
    if not facts.dropped:
        return [*lines, "None.", ""]
    for entry in facts.dropped:
        where = f", upstream commit `{entry.upstream_commit[:12]}`" if entry.upstream_commit else ""
        lines.append(f"- {entry.subject} ({entry.reason}, at base `{entry.base[:12]}`{where})")
    return [*lines, ""]


def _range_diff(facts: MoveFacts) -> list[str]:
    lines = ["### range-diff against the previously pinned fork head", ""]
    if facts.range_diff is None:
        why = next((m for m in facts.missing if "range-diff" in m), "the range-diff is not available")
        return [*lines, f"_{why}_", ""]
    shown = facts.range_diff.rstrip().splitlines()
    cut = len(shown) > MAX_RANGE_DIFF_LINES
    old, new = (facts.previous_fork_head or "")[:12], (facts.fork_head or "")[:12]
    lines += [f"`{old}` (base `{(facts.previous_base or '')[:12]}`) -> `{new}`:", "", "```"]
    lines += shown[:MAX_RANGE_DIFF_LINES]
    lines.append("```")
    if cut:
        lines.append(f"_{len(shown) - MAX_RANGE_DIFF_LINES} more lines: run `git range-diff` locally._")
    return [*lines, ""]


def chain_mermaid(manifest: Manifest, facts: MoveFacts) -> str:
    if facts.plan is not None:
        return mermaid(manifest, facts.plan.check)
    return mermaid_unchecked(manifest, facts.fork_head, len(facts.series))


def _evidence(summary: GateSummary) -> list[str]:
    lines = ["## GPU evidence", ""]
    verdict, evidence = summary.verdict, summary.evidence
    if verdict is None:
        return [*lines, f"_The gate could not judge: {summary.error}_", ""]
    lines.append(
        f"Series digest `{verdict.series_digest[:16]}`, evidence file {_code(verdict.evidence_file)}."
    )
    lines.append("")
    if evidence is None or not evidence.runs:
        return [*lines, "No GPU evidence is recorded for this series.", ""]
    lines += [
        "| environment | GPU | torch | CUDA | megatron-core | passed | failed | skipped | status |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for run in evidence.runs:
        env = run.environment
        counts = [sum(t.outcome == o for t in run.tests) for o in ("passed", "failed", "skipped")]
        failed = counts[1] + sum(t.outcome == "error" for t in run.tests)
        lines.append(
            f"| {_cell(env.tag)} | {_cell(env.gpu_name)} x{env.gpu_count} | {_cell(env.torch)} | "
            f"{_cell(env.cuda)} | {_cell(env.megatron_core)} | {counts[0]} | {failed} | {counts[2]} | "
            f"{run.status} |"
        )
    return [*lines, ""]


def _gate_needs(manifest: Manifest, summary: GateSummary) -> list[str]:
    lines = ["## What the gate still needs", ""]
    verdict = summary.verdict
    if verdict is None:
        return [*lines, "- the gate's verdict (see above)", ""]
    missing = [tag for tag in verdict.required if tag not in verdict.covered]
    if verdict.ok:
        signed = f", signed by {verdict.signed_by}" if verdict.signed_by else ""
        return [*lines, f"Nothing: `forkctl gate` passes ({', '.join(verdict.covered)}{signed}).", ""]
    if missing:
        lines.append(f"- environments without evidence: {', '.join(missing)}")
    if manifest.validation.allowed_signers and not verdict.signed_by:
        lines.append("- a valid signature by a key in validation.allowed_signers")
    lines += [f"- {p.message}" + (f" (fix: {p.hint})" if p.hint else "") for p in verdict.problems]
    return [*lines, ""]


def pr_body(manifest: Manifest, facts: MoveFacts, summary: GateSummary, step: BumpStep | None = None) -> str:
    """The whole Markdown body; `step`: the consumer pull request it is for (a header says what moves)."""
    head = facts.fork_head[:12] if facts.fork_head else "(not built)"
    lines = [f"## Move the chain to fork head `{head}`", ""]
    lines += step_header(step) if step is not None else []
    lines += _why(manifest, facts) + _series(facts) + _dropped(facts) + _range_diff(facts)
    lines += ["### The chain", "", chain_mermaid(manifest, facts), ""]
    lines += _evidence(summary) + _gate_needs(manifest, summary)
    if facts.missing:
        lines += ["### Not available when this was written", ""]
        lines += [f"- {line}" for line in facts.missing] + [""]
    lines.append(
        "<sub>Written by `forkctl describe`; `forkctl bump-bridge --open-pr` keeps it current.</sub>"
    )
    return "\n".join(lines) + "\n"


def pr_parts(manifest: Manifest, facts: MoveFacts, summary: GateSummary) -> dict[str, Any]:
    """The body's parts as JSON."""
    verdict = summary.verdict
    return {
        "fork_head": facts.fork_head,
        "base": facts.base,
        "base_subject": facts.base_subject,
        "base_date": facts.base_date,
        "series": [msgspec.structs.asdict(row) for row in facts.series],
        "dropped": [plain(entry, drop_none=True) for entry in facts.dropped],
        "dropped_since": facts.dropped_since,
        "wanted_base": facts.wanted_base,
        "wanted_base_because": facts.wanted_because,
        "previous_fork_head": facts.previous_fork_head,
        "previous_base": facts.previous_base,
        "range_diff": facts.range_diff,
        "mermaid": chain_mermaid(manifest, facts),
        "gate": None
        if verdict is None
        else {
            "ok": verdict.ok,
            "evidence_file": verdict.evidence_file,
            "required": verdict.required,
            "covered": verdict.covered,
            "signed_by": verdict.signed_by,
            "needs": [p.message for p in verdict.problems],
        },
        "gate_error": summary.error,
        "missing": facts.missing,
    }
