"""What a move (publish, bump-bridge, sync) says about the gate: the refusal with the gate's findings and
the command that records the evidence, or the override said in the open; and the gate's data as JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from forkctl.report import Level, Problem

if TYPE_CHECKING:
    from forkctl.gpu.findings import Finding
    from forkctl.gpu.gate import GateSummary


def refusal(verb: str, digest: str, found: list[Finding], hint: str, dry_run: bool) -> list[Problem]:
    """One problem per finding of the gate (each with its fix), then the refusal itself (exit 1)."""
    problems = [Problem(f"gate: {f.message}", file=f.file, hint=f.hint) for f in found]
    would = "would refuse" if dry_run else "refuses"
    problems.append(
        Problem(
            f"the gate fails for series {digest[:12]}, so {verb} {would} to publish it without GPU evidence: "
            "nothing was pushed",
            hint=hint,
        )
    )
    return problems


def overridden(verb: str, note: list[str], where: str) -> Problem:
    """A warning that says the move goes past a failing gate, and where the override is written."""
    return Problem(
        f"{verb} --no-gate: {note[0]} (written into {where})",
        level=Level.WARNING,
    )


def gate_json(summary: GateSummary, overridden_by: bool, note: list[str]) -> dict[str, Any]:
    """The gate's verdict on the series a move publishes, as a move's JSON reports it."""
    verdict = summary.verdict
    return {
        "ok": verdict is not None and verdict.ok,
        "series_digest": verdict.series_digest if verdict is not None else None,
        "evidence_file": verdict.evidence_file if verdict is not None else None,
        "findings": [p.message for p in verdict.problems] if verdict is not None else [],
        "pending": dict(verdict.pending) if verdict is not None else {},
        "error": summary.error,
        "overridden": overridden_by,
        "note": note,
    }
