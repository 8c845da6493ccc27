"""Benchmark: forkctl's start-up, the wall time of `--help`, `lint` and `status` against an empty Python.

Every arm is a fresh process with stdout to a pipe (as in CI), interleaved run by run so that a noisy
moment hits every arm alike; the table gives the median of --runs and the target of issue 11. Two
settings, measured in the same run:

- cached: the bytecode `make setup` compiles (site-packages and forkctl);
- uncached: PYTHONPYCACHEPREFIX points at an empty folder and PYTHONDONTWRITEBYTECODE=1, so every
  module is compiled from source on every start (what a venv without bytecode pays).

Run: .venv/bin/python bench/startup_bench.py [--runs 15] [--manifest manifest.yaml] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from forkctl.files import atomic_write_text  # a kill leaves the old results or the new ones

ROOT = Path(__file__).resolve().parent.parent
FORKCTL = [sys.executable, "-m", "forkctl"]
# Issue 11's targets (seconds of wall time on the 2-core development machine).
TARGETS = {"--help": 0.15, "lint": 0.25, "status": 0.25}


def arms(manifest: Path) -> dict[str, list[str]]:
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "--help": [*FORKCTL, "--help"],
        "lint": [*FORKCTL, "--manifest", str(manifest), "lint"],
        "status": [*FORKCTL, "--manifest", str(manifest), "status"],
    }


def wall(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, check=False)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.decode()[-500:]}")
    return elapsed


def measure(manifest: Path, runs: int, uncached: bool) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("COLUMNS", None)
    with tempfile.TemporaryDirectory(prefix="forkctl-pycache-") as empty:
        if uncached:
            env |= {"PYTHONPYCACHEPREFIX": empty, "PYTHONDONTWRITEBYTECODE": "1"}
        commands = arms(manifest)
        times: dict[str, list[float]] = {name: [] for name in commands}
        for argv in commands.values():  # warm the page cache once
            wall(argv, env)
        for _ in range(runs):
            for name, argv in commands.items():
                times[name].append(wall(argv, env))
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--manifest", type=Path, default=ROOT / "manifest.yaml")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    results = {
        "cached": measure(args.manifest, args.runs, uncached=False),
        "uncached": measure(args.manifest, max(3, args.runs // 3), uncached=True),
    }
    print(
        f"forkctl start-up, median of {args.runs} runs (uncached: {max(3, args.runs // 3)}), stdout to a pipe"
    )
    print(f"{'arm':<16} {'cached s':>9} {'uncached s':>11} {'target s':>9}  verdict (cached)")
    for name in results["cached"]:
        cached, uncached = results["cached"][name], results["uncached"][name]
        target = TARGETS.get(name)
        verdict = "" if target is None else ("met" if cached <= target else "MISSED")
        target_text = f"{target:.2f}" if target else "-"
        print(f"{name:<16} {cached:>9.3f} {uncached:>11.3f} {target_text:>9}  {verdict}")
    if args.json:
        stamp = {"measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "load": os.getloadavg()}
        atomic_write_text(
            args.json,
            json.dumps({**stamp, "runs": args.runs, "targets": TARGETS, **results}, indent=2) + "\n",
        )


if __name__ == "__main__":
    main()
