"""Benchmark: `forkctl status --onto X --first-break` against `git bisect run`, side by side, on real history.

On a clone of upstream (default /work/real/NVIDIA+Megatron-LM.git, base d12f6c8c.., target main), the
shipped series (this toolkit's patches, applied by forkctl) plus --own own commits, each changing one
line of a Python file that an upstream commit in base..target later changes (picked at even spacing
through the range, outside the files the series touches), exported by forkctl into a scratch toolkit.
Then, interleaved run by run (median of --runs):

| arm | what runs |
|---|---|
| forkctl first-break | `forkctl status --onto TARGET --repo CLONE --first-break --json` (the CLI, process start included) |
| forkctl preview | the same without `--first-break` (what first-break adds is the difference) |
| git bisect run | per conflicting patch, in a worktree at the base: `git bisect start --first-parent TARGET BASE`, `git bisect run` of a script that applies the patch file with `git apply --3way` and resets (`--3way --check` exits 0 on a conflicted merge with git 2.39, so it cannot tell), `git bisect reset` |

Both must name the same first bad commit for each patch (the bench stops otherwise). Reported per
conflicting patch: forkctl's whole command, what --first-break adds to it, and bisect's session; the
ratio is forkctl's whole command per patch over bisect's (<= 1.0: no slower than bisect).

Run: .venv/bin/python bench/first_break_bench.py [--upstream PATH] [--base SHA] [--target REV] [--own 2]
     [--runs 3] [--forkctl-root PATH (another checkout's forkctl, e.g. the code before a change)] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from forkctl.files import atomic_write_text  # a kill leaves the old results or the new ones

ROOT = Path(__file__).resolve().parent.parent
REAL = Path("/work/real/NVIDIA+Megatron-LM.git")
BASE = "d12f6c8c9aff51e166d872fd70151687a8e3f375"
IDENT = "Bench <bench@example.com>"
BISECT_SCRIPT = """#!/bin/sh
# bad (1) when the patch does not apply, even with a 3-way merge; the worktree is put back either way
git apply --3way "$1" >/dev/null 2>&1
status=$?
git reset -q --hard
[ "$status" -eq 0 ]
"""


def git(cwd: Path, *args: str, stdin: bytes | None = None) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, input=stdin, capture_output=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed in {cwd}: {proc.stderr.decode()[-800:]}")
    return proc.stdout.decode().strip()


def forkctl(root: Path, *args: str, ok: tuple[int, ...] = (0,)) -> tuple[int, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "forkctl", *args],
        cwd=root,
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(root)},
        check=False,
    )
    if proc.returncode not in ok:
        raise SystemExit(f"forkctl {' '.join(args)} exited {proc.returncode}: {proc.stderr.decode()[-1500:]}")
    return proc.returncode, proc.stdout.decode()


def _series_paths(clone: Path, base: str, branch: str) -> set[str]:
    return set(git(clone, "diff", "--name-only", base, branch).splitlines())


def _changed_line(clone: Path, base: str, commit: str, avoid: set[str]) -> tuple[str, str] | None:
    """(path, line) of a Python line that `commit` changes and that stands once, unchanged, in the file
    at the base and at the commit's parent: the line an own patch can change so that `commit` breaks it."""
    diff = git(clone, "diff", "--unified=0", "--no-renames", f"{commit}^", commit, "--", "*.py")
    path = None
    for line in diff.splitlines():
        if line.startswith("--- "):
            path = line[6:] if line.startswith("--- a/") else None
        elif path and path not in avoid and line.startswith("-") and not line.startswith("---"):
            text = line[1:]
            if len(text.strip()) < 20:
                continue
            before, at_base = (
                subprocess.run(
                    ["git", "show", f"{rev}:{path}"], cwd=clone, capture_output=True
                ).stdout.decode(errors="replace")
                for rev in (f"{commit}^", base)
            )
            if before.splitlines().count(text) == 1 and at_base.splitlines().count(text) == 1:
                return path, text
    return None


def _own_commits(clone: Path, base: str, branch: str, target: str, count: int) -> list[str]:
    """`count` own commits on `branch`, each breaking at an upstream commit spread through the range."""
    candidates = git(clone, "rev-list", "--first-parent", "--reverse", f"{base}..{target}").split()
    avoid = _series_paths(clone, base, branch)
    picked: list[tuple[str, str, str]] = []
    for slot in range(count):
        start = (slot + 1) * len(candidates) // (count + 1)
        for commit in candidates[start:]:
            found = _changed_line(clone, base, commit, avoid)
            if found and found[0] not in {p for _, p, _ in picked}:
                picked.append((commit, *found))
                break
    tip = git(clone, "rev-parse", branch)
    for number, (upstream, path, line) in enumerate(picked):
        text = git(clone, "cat-file", "blob", f"{tip}:{path}") + "\n"
        blob = text.replace(line + "\n", f"{line}  # fork: own change {number}\n", 1).encode()
        message = f"feat: own change {number} (breaks at {upstream[:12]})\n".encode()
        stream = (
            f"commit refs/heads/{branch}\ncommitter {IDENT} {1_800_000_000 + number * 60} +0000\n".encode()
            + f"data {len(message)}\n".encode()
            + message
            + f"from {tip}\nM 100644 inline {path}\ndata {len(blob)}\n".encode()
            + blob
            + b"\n\n"
        )
        git(clone, "fast-import", "--quiet", "--force", stdin=stream)
        tip = git(clone, "rev-parse", branch)
    return [p[0] for p in picked]


def build(folder: Path, args: argparse.Namespace) -> tuple[Path, Path, str, str]:
    """(clone, scratch manifest, base, target) with the series exported into the scratch toolkit."""
    clone = folder / "upstream.git"
    git(folder, "clone", "-q", "--bare", "--shared", str(args.upstream), str(clone))
    base = git(clone, "rev-parse", "--verify", f"{args.base}^{{commit}}")
    target = git(clone, "rev-parse", "--verify", f"{args.target}^{{commit}}")
    manifest = ROOT / "manifest.yaml"
    forkctl(
        ROOT, "--manifest", str(manifest), "apply", "--base", base, "--repo", str(clone), "--branch", "bench"
    )
    _own_commits(clone, base, "bench", target, args.own)
    toolkit = folder / "toolkit"
    (toolkit / "patches").mkdir(parents=True)
    (toolkit / "manifest.yaml").write_text(
        f"schema: 1\nupstream:\n  repo: NVIDIA/Megatron-LM\n  url: file://{clone}\n  base: {base}\n"
        f"fork:\n  repo: Bench/fork\n  url: file://{clone}\n  branch: bench\nseries: []\n"
    )
    forkctl(
        ROOT,
        "--manifest",
        str(toolkit / "manifest.yaml"),
        "export",
        "--repo",
        str(clone),
        "--branch",
        "bench",
    )
    return clone, toolkit / "manifest.yaml", base, target


def time_forkctl(
    root: Path, manifest: Path, clone: Path, target: str, first_break: bool
) -> tuple[float, dict]:
    args = ["--manifest", str(manifest), "status", "--onto", target, "--repo", str(clone), "--json"]
    started = time.perf_counter()
    _, out = forkctl(root, *args, *(["--first-break"] if first_break else []), ok=(0, 1))
    return time.perf_counter() - started, json.loads(out)


def time_bisect(worktree: Path, base: str, target: str, patch: Path, script: Path) -> tuple[float, str]:
    started = time.perf_counter()
    git(worktree, "bisect", "start", "--first-parent", target, base)
    out = git(worktree, "bisect", "run", "sh", str(script), str(patch))
    git(worktree, "bisect", "reset")
    elapsed = time.perf_counter() - started
    found = re.search(r"^([0-9a-f]{40}) is the first bad commit", out, re.M)
    if found is None:
        raise SystemExit(f"git bisect run named no first bad commit:\n{out[-1500:]}")
    return elapsed, found.group(1)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--upstream", type=Path, default=REAL)
    parser.add_argument("--base", default=BASE)
    parser.add_argument("--target", default="main")
    parser.add_argument("--own", type=int, default=2, help="own commits that break in base..target")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--forkctl-root", type=Path, default=ROOT, help="the checkout whose forkctl is timed")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="forkctl-first-break-bench-"))
    os.environ["FORKCTL_CACHE"] = str(folder / "cache")
    try:
        results = run(folder, args)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(json.dumps(results, indent=2))
    if args.json:
        atomic_write_text(args.json, json.dumps(results, indent=2) + "\n")


def run(folder: Path, args: argparse.Namespace) -> dict:
    clone, manifest, base, target = build(folder, args)
    worktree = folder / "bisect-worktree"
    git(clone, "worktree", "add", "-q", "--detach", str(worktree), base)
    script = folder / "applies.sh"
    script.write_text(BISECT_SCRIPT)
    arms: dict[str, list[float]] = {"forkctl_first_break": [], "forkctl_preview": [], "bisect": []}
    named: dict[str, str] = {}
    for _ in range(args.runs):
        elapsed, data = time_forkctl(args.forkctl_root, manifest, clone, target, first_break=True)
        arms["forkctl_first_break"].append(elapsed)
        breaking = {p["file"]: p["first_break"]["commit"] for p in data["patches"] if "first_break" in p}
        arms["forkctl_preview"].append(time_forkctl(args.forkctl_root, manifest, clone, target, False)[0])
        total = 0.0
        for file, commit in breaking.items():
            elapsed, culprit = time_bisect(worktree, base, target, manifest.parent / file, script)
            if culprit != commit:
                raise SystemExit(f"{file}: forkctl names {commit}, git bisect run {culprit}")
            total += elapsed
        arms["bisect"].append(total)
        named = breaking
    patches = len(named)
    if not patches:
        raise SystemExit("no patch of the series conflicts on the target: nothing to bisect")
    median = {arm: statistics.median(times) for arm, times in arms.items()}
    per_patch = {
        "forkctl_first_break_s": median["forkctl_first_break"] / patches,
        "first_break_adds_s": (median["forkctl_first_break"] - median["forkctl_preview"]) / patches,
        "bisect_s": median["bisect"] / patches,
    }
    return {
        "upstream": str(args.upstream),
        "base": base,
        "target": target,
        "upstream_commits": len(git(clone, "rev-list", "--first-parent", f"{base}..{target}").split()),
        "series_patches": len(list((manifest.parent / "patches").rglob("*.patch"))),
        "conflicting_patches": named,
        "runs": args.runs,
        "median_s": median,
        "per_patch": per_patch,
        "ratio_forkctl_over_bisect": per_patch["forkctl_first_break_s"] / per_patch["bisect_s"],
        "forkctl_root": str(args.forkctl_root),
    }


if __name__ == "__main__":
    main()
