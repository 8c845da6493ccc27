"""The gate's verdict on the series a move publishes, for the verbs that move the chain.

`publish`, `bump-bridge --push/--open-pr` and `sync` consult the gate (gate.check, with the manifest's
required environments, exactly as `forkctl gate` judges by default) for the series whose fork head they
put in front of a consumer: the manifest's series for publish and bump-bridge (the pinned fork head is
always apply(series, base)), the ported series for sync. A failing gate refuses the move unless the
caller overrides it (`--no-gate`); an override is written into what is published (`override_note`),
so a reviewer reads "published without GPU evidence" and why.

The judgement itself stays in gate.py: this module only picks the series and words the outcome. It never
raises on malformed evidence: a gate that cannot judge is a gate that does not pass.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from forkctl.errors import BadInput
from forkctl.gpu import gate
from forkctl.gpu.evidence import RERUN_HINT, evidence_dir, evidence_path, load_evidence
from forkctl.gpu.findings import Finding
from forkctl.manifest import Manifest
from forkctl.series import Patch, Series

OVERRIDE_FLAG = "--no-gate"
NOTED_FINDINGS = 5  # an override note names this many of the gate's findings, then a count


def judge(manifest: Manifest, series: Series, allow_pending: tuple[str, ...] = ()) -> gate.GateSummary:
    """The default gate's verdict on `series` (the manifest's required environments and pending list,
    the pending ones the caller names in `allow_pending` accepted as `gate --allow-pending` accepts them);
    malformed evidence or a missing GPU test folder is a verdict that does not pass (`error`)."""
    try:
        verdict = gate.check(manifest, series, list(manifest.validation.require), allow_pending=allow_pending)
        found = evidence_path(evidence_dir(manifest), verdict.series_digest)
        return gate.GateSummary(verdict, load_evidence(found) if verdict.evidence_file else None)
    except BadInput as exc:
        return gate.GateSummary(None, error=exc.message + (f" (fix: {exc.hint})" if exc.hint else ""))


def ported_series(manifest: Manifest, base: str, patches: list[Patch], files: list[str]) -> Series:
    """The series a port would write: `patches` named as the toolkit files `files` (relative to the
    manifest's folder), so the gate names and compares them as the files they will be."""
    named = [
        msgspec.structs.replace(patch, path=manifest.root / Path(file))
        for patch, file in zip(patches, files, strict=True)
    ]
    return Series(base=base, patches=named)


def passes(summary: gate.GateSummary) -> bool:
    return summary.verdict is not None and summary.verdict.ok


def findings(summary: gate.GateSummary) -> list[Finding]:
    """Why the gate does not pass, each with the command that records the missing evidence."""
    if summary.verdict is None:
        return [Finding(f"the gate could not judge: {summary.error}", RERUN_HINT)]
    return list(summary.verdict.problems)


def digest_of(summary: gate.GateSummary, series: Series) -> str:
    return summary.verdict.series_digest if summary.verdict is not None else series.digest


def override_note(summary: gate.GateSummary, series: Series) -> list[str]:
    """The lines an override writes into what it publishes (a commit message, a pull-request body):
    empty when the gate passes (nothing was overridden). A function of the toolkit's files alone (the
    series and its evidence), so a commit that carries it stays reproducible."""
    if passes(summary):
        return []
    return note_lines(digest_of(summary, series), [finding.message for finding in findings(summary)])


def accepted_note(summary: gate.GateSummary) -> list[str]:
    """The lines a passing gate writes into what is published when it passed only because the caller
    accepted pending environments by name (--allow-pending): which ones, and the manifest's reason."""
    verdict = summary.verdict
    if verdict is None or not verdict.ok:
        return []
    accepted = [tag for tag in verdict.allowed_pending if tag not in verdict.covered]
    if not accepted:
        return []
    # The first line is forkctl's own words (a pull-request body prints it as is); the tags and the
    # manifest's reasons are data, on the lines after it (printed in code there).
    return [
        f"GPU evidence recorded for series {verdict.series_digest[:12]}; accepted as pending (--allow-pending):",
        *(f"- {tag}: {verdict.pending.get(tag, '')}".rstrip(": ") for tag in accepted),
    ]


def move_note(summary: gate.GateSummary, series: Series, no_gate: bool) -> list[str]:
    """What a move writes into what it publishes: the override note under --no-gate where the gate
    fails, else the accepted-pending note where --allow-pending made it pass (empty otherwise)."""
    return (override_note(summary, series) if no_gate else []) or accepted_note(summary)


def note_lines(digest: str, reasons: list[str]) -> list[str]:
    """The override note's words: the first line says it, then why, a few reasons at most."""
    lines = [
        f"Published without GPU evidence ({OVERRIDE_FLAG}): the gate fails for series {digest[:12]}:",
        *(f"- {reason}" for reason in reasons[:NOTED_FINDINGS]),
    ]
    if len(reasons) > NOTED_FINDINGS:
        lines.append(f"- and {len(reasons) - NOTED_FINDINGS} more (forkctl gate lists them)")
    return lines


def refusal_hint(verb: str) -> str:
    """How to move past a refusal: record the evidence, or override in the open."""
    return (
        f"record the evidence: {RERUN_HINT}; then run forkctl {verb} again (an environment that is only "
        f"pending can be accepted by name: --allow-pending ENV). Or pass {OVERRIDE_FLAG} to {verb} "
        "without it: the override is written into what is published"
    )
