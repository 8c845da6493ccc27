"""The pull-request body forkctl writes for moving the chain: Markdown from the facts of
forkctl/chain/describe.py and the gate's summary (forkctl/gpu/gate.py), plus the same parts as JSON.

A view only: what is not known is said in the body ("not available ..."), never guessed. Every string
that came from data (patch subjects, provenance, upstream commit messages, the range-diff, remote errors)
is written in code as forkctl/report/markdown.py says, so a body notifies nobody, cross-links no other
issue and carries no HTML; and the body fits GitHub's limit whatever the range-diff holds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from forkctl.manifest import Manifest, plain
from forkctl.redact import inert
from forkctl.report.chain import mermaid, mermaid_unchecked, way_json
from forkctl.report.markdown import cell, code, fenced

if TYPE_CHECKING:
    from forkctl.chain.bump import BumpStep
    from forkctl.chain.describe import MoveFacts
    from forkctl.gpu.gate import GateSummary

GITHUB_BODY_LIMIT = 65_536  # GitHub refuses a pull-request body longer than this (UTF-16 code units)
BODY_BUDGET = GITHUB_BODY_LIMIT - 536  # room for what gh or GitHub adds, and for the cut notes
_CUT_NOTE_RESERVE = 400
_WHERE_THE_REST_IS = "the whole range-diff is `parts.range_diff` of `forkctl describe --json`"


def _length(text: str) -> int:
    """The length GitHub counts: UTF-16 code units (a character outside the BMP counts twice)."""
    return len(text.encode("utf-16-le")) // 2


def _cut(text: str, budget: int) -> str:
    """The longest prefix of `text` within `budget` (GitHub's count), ended at a line break if one is
    in its second half."""
    if _length(text) <= budget:
        return text
    low, high = 0, min(len(text), budget)
    while low < high:  # the longest prefix that fits: UTF-16 length grows with the prefix
        middle = (low + high + 1) // 2
        low, high = (middle, high) if _length(text[:middle]) <= budget else (low, middle - 1)
    prefix = text[:low]
    line_end = prefix.rfind("\n")
    return prefix[: line_end + 1] if line_end > low // 2 else prefix


def step_header(step: BumpStep) -> list[str]:
    """What one consumer's pull request changes."""
    old = step.old[:12] if step.old else "nothing"
    lines = [
        f"This pull request moves {code(step.gitlink)} in **{code(step.consumer.name)}** "
        f"({code(step.consumer.branch)}) from `{old}` to `{step.new[:12]}`: branch {code(step.branch)}, "
        f"commit `{step.commit[:12]}`.",
    ]
    if step.url_changed:
        lines.append(
            f"It points `.gitmodules` at {code(step.url_changed[1])} (was {code(step.url_changed[0])})."
        )
    lines += [f"It rewrites {line} with the gitlink." for line in _record_moves(step)]
    return [*lines, ""]


def _record_moves(step: BumpStep) -> list[str]:
    """`path` (`old` -> `new`) for each pin file the step's commit rewrites."""
    return [
        f"{code(r.path)} (`{r.old[:12]}` -> `{r.new[:12]}`)"
        if r.old
        else f"{code(r.path)} (not a commit SHA -> `{r.new[:12]}`)"
        for r in step.records
    ]


def _records(facts: MoveFacts) -> list[str]:
    """Every record of each pin the move writes: the gitlink and the consumer's pin files."""
    if facts.plan is None or not facts.plan.steps:
        return []
    lines = ["### Every record of each pin", ""]
    for step in facts.plan.steps:
        old = f"`{step.old[:12]}`" if step.old else "nothing"
        moves = [f"gitlink {code(step.gitlink)} ({old} -> `{step.new[:12]}`)", *_record_moves(step)]
        lines.append(f"- {code(step.consumer.name)}: {', '.join(moves)}")
    return [*lines, ""]


def records_parts(facts: MoveFacts) -> list[dict[str, Any]]:
    """The records each planned consumer commit writes, as JSON."""
    steps = facts.plan.steps if facts.plan is not None else []
    return [
        {
            "consumer": step.consumer.name,
            "gitlink": {"path": step.gitlink, "old": step.old, "new": step.new},
            "files": [{"path": r.path, "format": r.format, "old": r.old, "new": r.new} for r in step.records],
        }
        for step in steps
    ]


def _why(manifest: Manifest, facts: MoveFacts) -> list[str]:
    base = code(f"{manifest.upstream.repo}@{facts.base}")
    if facts.base_subject:
        base += f" ({code(facts.base_subject)}, {code(facts.base_date)})"
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
    way = facts.way_forward
    rule = [f"(The one rule, as check-pins and sync apply it: {way.rule}.)", ""] if way and way.moves else []
    if facts.wanted_base is None and way is not None:  # the pins lie on two lines of upstream history
        return [f"**The base the chain wants:** none, {code(facts.wanted_because)}.", "", *rule]
    if facts.wanted_base is None:
        return ["**The base the chain wants:** not known (see the end).", ""]
    because = code(facts.wanted_because)
    return [f"**The base the chain wants:** {code(facts.wanted_base)}, {because}.", "", *rule]


def _series(facts: MoveFacts) -> list[str]:
    lines = ["### The series", "", "| # | file | subject | provenance |", "|---|---|---|---|"]
    for number, row in enumerate(facts.series, start=1):
        name = row.file.rsplit("/", 1)[-1]
        lines.append(f"| {number} | {cell(name)} | {cell(row.subject)} | {cell(row.provenance)} |")
    return [*lines, ""]


def _dropped(facts: MoveFacts) -> list[str]:
    since = f" since the previous pin's base `{facts.dropped_since[:12]}`" if facts.dropped_since else ""
    lines = [f"### Dropped as absorbed upstream{since}", ""]
    if not facts.dropped:
        return [*lines, "None.", ""]
    for entry in facts.dropped:
        where = f", upstream commit {code(entry.upstream_commit[:12])}" if entry.upstream_commit else ""
        lines.append(f"- {code(entry.subject)} ({entry.reason}, at base {code(entry.base[:12])}{where})")
    return [*lines, ""]


def _range_diff(facts: MoveFacts, budget: int) -> list[str]:
    """The range-diff section, its block cut by characters to `budget` with a note saying where the
    rest is."""
    lines = ["### range-diff against the previously pinned fork head", ""]
    if facts.range_diff is None:
        why = next((m for m in facts.missing if "range-diff" in m), "the range-diff is not available")
        return [*lines, code(why), ""]
    whole = facts.range_diff.rstrip()
    old, new = (facts.previous_fork_head or "")[:12], (facts.fork_head or "")[:12]
    lines += [f"{code(old)} (base {code((facts.previous_base or '')[:12])}) -> {code(new)}:", ""]
    shown = _cut(whole, max(budget - _CUT_NOTE_RESERVE, 0))
    lines += fenced(shown)
    if len(shown) < len(whole):
        lines.append(
            f"_The range-diff is cut here: {len(shown):,} of its {len(whole):,} characters are shown; "
            f"{_WHERE_THE_REST_IS}, or run `git range-diff {old}...{new}` in a clone of the fork._"
        )
    return [*lines, ""]


def chain_mermaid(manifest: Manifest, facts: MoveFacts) -> str:
    if facts.plan is not None:
        return mermaid(manifest, facts.plan.check)
    return mermaid_unchecked(manifest, facts.fork_head, len(facts.series))


def gate_verdict(summary: GateSummary) -> str:
    """The gate's verdict in one word, as `forkctl gate` would exit: passes, fails, or (a gate that
    passes while required environments are pending) passes-with-pending."""
    verdict = summary.verdict
    if verdict is None or not verdict.ok:
        return "fails"
    return "passes-with-pending" if verdict.pending else "passes"


def _verdict_line(summary: GateSummary) -> str:
    """The verdict, stated first: a reviewer reads whether `forkctl gate` passes before the details."""
    verdict, word = summary.verdict, gate_verdict(summary)
    if verdict is None:
        return "**Gate verdict: fails** (the gate could not judge, see below)."
    if word == "fails":
        return (
            f"**Gate verdict: fails** ({len(verdict.problems)} findings, listed under what it still needs)."
        )
    if word == "passes-with-pending":
        pending = ", ".join(code(tag) for tag in verdict.pending)
        return f"**Gate verdict: passes**, with required environments PENDING (not recorded): {pending}."
    return "**Gate verdict: passes**."


def override_lines(note: list[str]) -> list[str]:
    """A move past a failing gate says so at the top (the first line is forkctl's own words; the
    findings are data, in code)."""
    if not note:
        return []
    first, *found = note
    return [f"> **{first}**", *(f"> - {code(line.removeprefix('- '))}" for line in found), ""]


def _evidence(summary: GateSummary) -> list[str]:
    lines = ["## GPU evidence", "", _verdict_line(summary), ""]
    verdict, evidence = summary.verdict, summary.evidence
    if verdict is None:
        return [*lines, f"_The gate could not judge:_ {code(summary.error)}", ""]
    lines.append(
        f"Series digest {code(verdict.series_digest[:16])}, evidence file {code(verdict.evidence_file)}."
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
            f"| {cell(env.tag)} | {cell(env.gpu_name)} x{env.gpu_count} | {cell(env.torch)} | "
            f"{cell(env.cuda)} | {cell(env.megatron_core)} | {counts[0]} | {failed} | {counts[2]} | "
            f"{cell(str(run.status))} |"
        )
    return [*lines, ""]


def _gate_needs(manifest: Manifest, summary: GateSummary) -> list[str]:
    lines = ["## What the gate still needs", ""]
    verdict = summary.verdict
    if verdict is None:
        return [*lines, "- the gate's verdict (see above)", ""]
    missing = [tag for tag in verdict.required if tag not in verdict.covered]
    if verdict.ok:
        signed = f", signed by {code(verdict.signed_by)}" if verdict.signed_by else ""
        covered = ", ".join(code(tag) for tag in verdict.covered)
        return [*lines, f"Nothing: `forkctl gate` passes ({covered}{signed}).", ""]
    if missing:
        lines.append(f"- environments without evidence: {', '.join(code(tag) for tag in missing)}")
    if manifest.validation.allowed_signers and not verdict.signed_by:
        lines.append("- a valid signature by a key in validation.allowed_signers")
    lines += [
        f"- {code(p.message)}" + (f" (fix: {code(p.hint)})" if p.hint else "") for p in verdict.problems
    ]
    return [*lines, ""]


def pr_body(
    manifest: Manifest,
    facts: MoveFacts,
    summary: GateSummary,
    step: BumpStep | None = None,
    override: list[str] | None = None,
) -> str:
    """The whole Markdown body; `step`: the consumer pull request it is for (a header says what moves);
    `override`: the note of a move past a failing gate (--no-gate), said first.
    It fits GitHub's limit: the range-diff gets what the other parts leave, and a body still too long
    is cut with a note."""
    head = facts.fork_head[:12] if facts.fork_head else "(not built)"
    before = [f"## Move the chain to fork head {code(head)}", "", *override_lines(override or [])]
    before += step_header(step) if step is not None else []
    before += _why(manifest, facts) + _series(facts) + _dropped(facts)
    after = [*_records(facts), "### The chain", "", chain_mermaid(manifest, facts), ""]
    after += _evidence(summary) + _gate_needs(manifest, summary)
    if facts.missing:
        after += ["### Not available when this was written", ""]
        after += [f"- {code(line)}" for line in facts.missing] + [""]
    after.append(
        "<sub>Written by `forkctl describe`; `forkctl bump-bridge --open-pr` keeps it current.</sub>"
    )
    rest = _length("\n".join(before + after)) + 2
    lines = before + _range_diff(facts, BODY_BUDGET - rest) + after
    return _within_limit("\n".join(lines) + "\n")


def _within_limit(body: str) -> str:
    """`body`, or its first part and a note when the parts besides the range-diff alone are too long;
    no line of it a workflow command (a CI job may print the body file)."""
    body = inert(body)
    if _length(body) <= BODY_BUDGET:
        return body
    note = (
        "\n\n_This body is cut here: it was longer than GitHub's 65,536 characters; the whole of it is "
        "`body` of `forkctl describe --json`._\n"
    )
    return _cut(body, BODY_BUDGET - _length(note)) + note


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
        "way_forward": way_json(facts.way_forward),
        "previous_fork_head": facts.previous_fork_head,
        "previous_base": facts.previous_base,
        "range_diff": facts.range_diff,
        "mermaid": chain_mermaid(manifest, facts),
        "records": records_parts(facts),
        "gate": None
        if verdict is None
        else {
            "ok": verdict.ok,
            "verdict": gate_verdict(summary),
            "pending": dict(verdict.pending),
            "evidence_file": verdict.evidence_file,
            "required": verdict.required,
            "covered": verdict.covered,
            "signed_by": verdict.signed_by,
            "needs": [p.message for p in verdict.problems],
        },
        "gate_error": summary.error,
        "missing": facts.missing,
    }
