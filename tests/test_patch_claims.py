"""The series' messages say what the recorded GPU figures say: patch 0002's speedups of the expert layer,
at 8k / 32k / 128k routed rows, over Transformer Engine (every recorded run that measured TE) and over the
per-expert F.linear loop (every recorded full run), cover what those runs measured."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PERF_PATCH = next((ROOT / "patches" / "megatron-lm").glob("0002-perf-moe-*.patch"))
ROWS = (8192, 32768, 131072)
# "8-12x" holds figures from 10% under its low end to 10% over its high end; "about 3x" within 20%.
RANGE_SLACK, ABOUT_SLACK = 0.10, 0.20
# Which speedup each claim is about: the message's words before "at 8k / 32k / 128k", and the arm's key.
CLAIMS = {"than TE": "speedup_vs_te", "than the loop": "speedup_vs_per_expert"}


def message() -> str:
    return " ".join(PERF_PATCH.read_text(encoding="utf-8").split("\ndiff --git ", 1)[0].split())


def _bounds(figure: str) -> tuple[float, float]:
    about = re.fullmatch(r"about (\d+(?:\.\d+)?)x", figure.strip())
    if about:
        value = float(about.group(1))
        return value * (1 - ABOUT_SLACK), value * (1 + ABOUT_SLACK)
    span = re.fullmatch(r"(\d+(?:\.\d+)?)-(\d+(?:\.\d+)?)x", figure.strip())
    assert span, f"cannot read the figure {figure!r} in patch 0002's message"
    return float(span.group(1)) * (1 - RANGE_SLACK), float(span.group(2)) * (1 + RANGE_SLACK)


def claimed_ranges(baseline: str) -> list[tuple[float, float]]:
    """The message's `A-Bx / C-Dx / about Ex faster <baseline> at 8k / 32k / 128k routed rows`."""
    found = re.search(rf"ran ((?:(?!ran ).)+?) faster {baseline} at 8k / 32k / 128k routed rows", message())
    assert found, f"patch 0002's message no longer states the layer speedups {baseline} at 8k / 32k / 128k"
    return [_bounds(figure) for figure in found.group(1).split(" / ")]


def recorded_runs() -> dict[str, dict]:
    """{file:tag: benchmark} for every recorded run whose grouped-GEMM benchmark finished."""
    files = [
        *(ROOT / "validation").glob("*.json"),
        *(ROOT / "bench").glob("results-h200-fork-head-*.json"),
        *(ROOT / "bench").glob("results-h100-te-baseline-*.json"),  # one run each, kept for its TE arm
    ]
    recorded = {}
    for path in files:
        data = json.loads(path.read_text(encoding="utf-8"))
        for run in data.get("runs", [data]):
            bench = run.get("benchmark") or {}
            if bench.get("status") == "ok":
                recorded[f"{path.name}:{run['environment']['tag']}"] = bench
    return recorded


def recorded_speedups(key: str) -> dict[str, list[float]]:
    """{run: layer speedups at ROWS} for the runs that measured `key` (TE runs only for speedup_vs_te)."""
    speedups = {}
    for name, bench in recorded_runs().items():
        if key == "speedup_vs_te" and (bench.get("baseline") or {}).get("name") != "transformer_engine":
            continue
        by_rows = {size["routed_rows"]: size["arms"]["torch_grouped"] for size in bench["sizes"]}
        speedups[name] = [by_rows[rows][key] for rows in ROWS]
    return speedups


def test_the_perf_patch_message_covers_every_recorded_run() -> None:
    for baseline, key in CLAIMS.items():
        ranges = claimed_ranges(baseline)
        assert len(ranges) == len(ROWS)
        recorded = recorded_speedups(key)
        assert recorded, f"no recorded benchmark run to hold the claim {baseline!r} to"
        outside = {
            name: figures
            for name, figures in recorded.items()
            if not all(low <= value <= high for value, (low, high) in zip(figures, ranges, strict=True))
        }
        assert not outside, f"patch 0002 claims {ranges} {baseline}, runs outside: {outside}"


def test_the_perf_patch_names_its_baselines_for_what_they_are() -> None:
    flat = message()
    assert "one F.linear each" in flat and "TE's GroupedLinear" in flat
    assert "Transformer Engine 2.20.2" in flat
