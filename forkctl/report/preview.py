"""How one previewed patch reads in a table: the words `status --onto` and `sync` both print."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from forkctl.ops.port.walk import Judged


def verdict_words(entry: Judged) -> tuple[str, str]:
    """(result, evidence) columns for one previewed patch on a target. A partial absorption's figures
    are data (the JSON's `partial`), not table text."""
    verdict = entry.verdict
    upstream = (verdict.upstream_commit or "")[:12]
    if verdict.kind == "absorbed":
        return "absorbed", f"{verdict.reason} {upstream}".strip() + (
            f", proved by {verdict.proof.split(':')[0]}" if verdict.proof else ""
        )
    if verdict.kind == "conflict" and verdict.reason == "reverted":
        return "reverted", f"picks {upstream}, reverted upstream in {(verdict.reverted_by or '')[:12]}"
    if verdict.kind == "applied":
        result = "applies" if entry.plain else "applies with 3-way"
        if verdict.reason == "partial":
            result += " (partially absorbed)"
        return result, ""
    merged = verdict.merged
    return "conflicts", ", ".join(merged.conflicted) if merged is not None else ""
