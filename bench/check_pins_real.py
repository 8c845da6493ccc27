"""Benchmark: forkctl check-pins on a real chain against blobless clones of the same repositories.

The synthetic chain of bench/check_pins_bench.py is the size of the real one; this script times the real
one itself, as a user would: the manifest names the chain (upstream, fork, consumers), and the URLs are
whatever git resolves them to (GitHub, or local snapshots wired by `url.<path>.insteadOf` in the git
config that GIT_CONFIG_GLOBAL names). Interleaved runs, medians; each arm a fresh process:

- forkctl CLI, empty cache (a fresh FORKCTL_CACHE) and warm cache (the same cache again);
- the alternative: `git clone --bare --filter=blob:none` of every repository of the chain (upstream and
  each consumer), no checkout: less than `submodule update --init --recursive` would do, so a lower
  bound for it.

Objects received are the entries of the packs each arm's fetches left (one pack per fetch); duplicates
are entries that another pack of the same arm already held.

Run: GIT_CONFIG_GLOBAL=... .venv/bin/python bench/check_pins_real.py --manifest PATH [--runs 3] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from check_pins_bench import packs_under, received  # noqa: E402

from forkctl import manifest as manifest_mod  # noqa: E402

TARGETS = {"cold": 0.3, "warm": 0.1}  # issue 11: ratios to the alternative


def check_pins(manifest: Path, cache: Path) -> float:
    env = {**os.environ, "FORKCTL_CACHE": str(cache), "PYTHONPATH": str(ROOT)}
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "forkctl", "--manifest", str(manifest), "check-pins", "--json"],
        env=env,
        capture_output=True,
        cwd=ROOT,
        check=False,
    )
    elapsed = time.perf_counter() - started
    if proc.returncode not in (0, 1):  # 1: the chain has findings; the timing still counts
        raise SystemExit(
            f"check-pins failed ({proc.returncode}): {proc.stdout[-600:]!r} {proc.stderr[-600:]!r}"
        )
    return elapsed


def blobless_clones(urls: list[str], folder: Path) -> float:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    started = time.perf_counter()
    for number, url in enumerate(urls):
        subprocess.run(
            ["git", "clone", "-q", "--bare", "--filter=blob:none", url, str(folder / f"{number}.git")],
            check=True,
        )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--manifest", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    manifest = manifest_mod.load(args.manifest)
    urls = list(dict.fromkeys([manifest.upstream.url, *(c.url for c in manifest.consumers)]))
    times: dict[str, list[float]] = {"cold": [], "warm": [], "alternative": []}
    objects: dict[str, dict[str, int]] = {}
    with tempfile.TemporaryDirectory(prefix="forkctl-real-chain-") as holder:
        work = Path(holder)
        for run in range(args.runs):
            cache = work / "cache"
            shutil.rmtree(cache, ignore_errors=True)
            times["cold"].append(check_pins(args.manifest, cache))
            after_cold = packs_under(cache)
            times["warm"].append(check_pins(args.manifest, cache))
            times["alternative"].append(blobless_clones(urls, work / "alternative"))
            if run == 0:
                for name, packs in (
                    ("cold", after_cold),
                    ("warm", packs_under(cache) - after_cold),
                    ("alternative", packs_under(work / "alternative")),
                ):
                    got = received(packs)
                    objects[name] = {"objects": got.objects, "duplicates": got.duplicates}
    medians = {name: statistics.median(values) for name, values in times.items()}
    alternative = medians["alternative"]
    print(f"check-pins on the chain of {args.manifest}, median of {args.runs} interleaved runs")
    print(f"{'arm':<12} {'median s':>9} {'ratio':>7} {'target':>7} {'objects':>9} {'twice':>7}  verdict")
    for name in ("cold", "warm", "alternative"):
        ratio = medians[name] / alternative
        target = TARGETS.get(name)
        verdict = "" if target is None else ("met" if ratio <= target else "MISSED")
        target_text = f"{target:.2f}" if target else "-"
        got = objects[name]
        print(
            f"{name:<12} {medians[name]:>9.2f} {ratio:>7.2f} {target_text:>7} {got['objects']:>9,} "
            f"{got['duplicates']:>7,}  {verdict}"
        )
    if args.json:
        args.json.write_text(json.dumps({"seconds": times, "objects": objects}, indent=2) + "\n")


if __name__ == "__main__":
    main()
