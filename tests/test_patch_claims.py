"""The series' messages say what the recorded GPU figures say: patch 0002's speedups of the expert layer
over its per-expert baseline, at 8k / 32k / 128k routed rows, cover every recorded full validate run."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PERF_PATCH = next((ROOT / "patches" / "megatron-lm").glob("0002-perf-moe-*.patch"))
ROWS = (8192, 32768, 131072)
# "8-12x" holds figures from 10% under its low end to 10% over its high end; "about 3x" within 20%.
RANGE_SLACK, ABOUT_SLACK = 0.10, 0.20


def claimed_ranges() -> list[tuple[float, float]]:
    """The message's `A-Bx / C-Dx / about Ex` figures, in row order, as (low, high) bounds."""
    message = PERF_PATCH.read_text(encoding="utf-8").split("\ndiff --git ", 1)[0]
    flat = " ".join(message.split())
    found = re.search(r"ran (.+?) faster at 8k / 32k / 128k routed rows", flat)
    assert found, "patch 0002's message no longer states the layer speedups at 8k / 32k / 128k rows"
    ranges = []
    for figure in found.group(1).split(" / "):
        about = re.fullmatch(r"about (\d+(?:\.\d+)?)x", figure.strip())
        span = re.fullmatch(r"(\d+(?:\.\d+)?)-(\d+(?:\.\d+)?)x", figure.strip())
        if about:
            value = float(about.group(1))
            ranges.append((value * (1 - ABOUT_SLACK), value * (1 + ABOUT_SLACK)))
        else:
            assert span, f"cannot read the figure {figure!r} in patch 0002's message"
            ranges.append(
                (float(span.group(1)) * (1 - RANGE_SLACK), float(span.group(2)) * (1 + RANGE_SLACK))
            )
    return ranges


def recorded_speedups() -> dict[str, list[float]]:
    """{file: layer speedups at ROWS} for every recorded run with the grouped-GEMM benchmark."""
    files = [*(ROOT / "validation").glob("*.json"), *(ROOT / "bench").glob("results-h200-fork-head-*.json")]
    recorded = {}
    for path in files:
        for run in json.loads(path.read_text(encoding="utf-8"))["runs"]:
            bench = run.get("benchmark") or {}
            if bench.get("status") != "ok":
                continue
            by_rows = {size["routed_rows"]: size["arms"]["torch_grouped"] for size in bench["sizes"]}
            recorded[f"{path.name}:{run['environment']['tag']}"] = [
                by_rows[rows]["speedup_vs_per_expert"] for rows in ROWS
            ]
    return recorded


def test_the_perf_patch_message_covers_every_recorded_run() -> None:
    ranges = claimed_ranges()
    assert len(ranges) == len(ROWS)
    recorded = recorded_speedups()
    assert recorded, "no recorded benchmark run to hold the message to"
    outside = {
        name: figures
        for name, figures in recorded.items()
        if not all(low <= value <= high for value, (low, high) in zip(figures, ranges, strict=True))
    }
    assert not outside, f"patch 0002 claims {ranges}, runs outside: {outside}"


def test_the_perf_patch_names_its_baseline_for_what_it_is() -> None:
    flat = " ".join(PERF_PATCH.read_text(encoding="utf-8").split("\ndiff --git ", 1)[0].split())
    assert "one F.linear each" in flat and "not a comparison with TE" in flat
