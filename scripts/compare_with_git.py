"""Port the shipped series onto real upstream commits and compare with plain git, side by side.

Usage: python scripts/compare_with_git.py CLONE [--points N] [--onto REV ...] [--backport REV ...]

CLONE is a (bare) clone of NVIDIA/Megatron-LM holding the manifest's base. For each target commit, in a
scratch copy of the manifest and patches, `forkctl port --onto TARGET --branch compare/<sha>` runs; in a
sparse scratch worktree sharing CLONE's objects, `git am` of the same patch files on the base followed by
`git rebase --onto TARGET` (or, with --backport, `git am` straight onto TARGET) gives git's tree. The
script prints one JSON line per target (exit codes, stops, trees, equal or not) and a summary; it exits 1
when any tree differs or forkctl stopped where git did not. Only the paths the series touches are checked
out, so snapshots that lack large blobs still work.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IDENTITY = ["-c", "user.name=compare", "-c", "user.email=compare@localhost"]


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *IDENTITY, *args], cwd=cwd, capture_output=True, text=True, check=check)


def forkctl(toolkit: Path, *args: str) -> tuple[int, dict, float]:
    started = time.perf_counter()
    proc = subprocess.run(
        [
            str(ROOT / ".venv" / "bin" / "forkctl"),
            "--manifest",
            str(toolkit / "manifest.yaml"),
            *args,
            "--json",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.perf_counter() - started
    try:
        return proc.returncode, json.loads(proc.stdout), elapsed
    except json.JSONDecodeError:
        return proc.returncode, {"raw": proc.stdout + proc.stderr}, elapsed


def git_tree(
    clone: Path, base: str, target: str, patches: list[Path], backport: bool
) -> tuple[bool, str, float]:
    """(git applied it without stopping, HEAD tree, seconds) for am + rebase (or am onto target)."""
    work = Path(tempfile.mkdtemp(prefix="compare-git-"))
    try:
        git(work, "clone", "-q", "--no-checkout", "--shared", str(clone), str(work / "w"))
        w = work / "w"
        touched = sorted(
            {
                line.split(" b/", 1)[1]
                for p in patches
                for line in p.read_text().splitlines()
                if line.startswith("diff --git ")
            }
        )
        git(w, "sparse-checkout", "set", "--no-cone", *touched, "megatron/core/__init__.py")
        started = time.perf_counter()
        git(w, "checkout", "-q", "--detach", target if backport else base)
        am = git(w, "am", "-q", "--committer-date-is-author-date", *map(str, patches), check=False)
        if am.returncode != 0:
            return False, "", time.perf_counter() - started
        if not backport:
            rebase = git(w, "rebase", "-q", "--onto", target, base, check=False)
            if rebase.returncode != 0:
                return False, "", time.perf_counter() - started
        elapsed = time.perf_counter() - started
        return True, git(w, "rev-parse", "HEAD^{tree}").stdout.strip(), elapsed
    finally:
        shutil.rmtree(work, ignore_errors=True)


def compare(clone: Path, base: str, target: str, backport: bool) -> dict:
    toolkit = Path(tempfile.mkdtemp(prefix="compare-toolkit-"))
    try:
        shutil.copy(ROOT / "manifest.yaml", toolkit / "manifest.yaml")
        shutil.copytree(ROOT / "patches", toolkit / "patches")
        patches = sorted((toolkit / "patches").rglob("*.patch"))
        git_ok, git_tree_sha, git_seconds = git_tree(clone, base, target, patches, backport)
        branch = f"compare/{target[:12]}"
        args = ["port", "--onto", target, "--repo", str(clone), "--branch", branch]
        code, data, seconds = forkctl(toolkit, *args, *(["--backport"] if backport else []))
        tree = ""
        if code == 0:
            tree = git(clone, "rev-parse", f"{branch}^{{tree}}").stdout.strip()
            git(clone, "update-ref", "-d", f"refs/heads/{branch}")
        elif code == 1:
            forkctl(toolkit, "port", "--abort", "--repo", str(clone))
        return {
            "target": target,
            "forkctl_exit": code,
            "forkctl_stopped": code != 0,
            "forkctl_seconds": round(seconds, 2),
            "git_applied": git_ok,
            "git_seconds": round(git_seconds, 2),
            "trees_equal": bool(tree) and tree == git_tree_sha,
            "absorbed": [s["absorbed"]["reason"] for s in data.get("steps", []) if s.get("absorbed")],
            "error": data.get("error") or (data.get("conflict") or {}).get("message"),
        }
    finally:
        shutil.rmtree(toolkit, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("clone", type=Path)
    parser.add_argument("--points", type=int, default=8, help="evenly spaced targets in base..main")
    parser.add_argument("--main", default="main", help="upstream branch to sample (default: main)")
    parser.add_argument("--onto", action="append", default=[], help="extra target (repeatable)")
    parser.add_argument("--backport", action="append", default=[], help="backport target (repeatable)")
    options = parser.parse_args()
    os.environ.setdefault("FORKCTL_CACHE", tempfile.mkdtemp(prefix="compare-cache-"))
    manifest_base = next(
        line.split(":", 1)[1].strip()
        for line in (ROOT / "manifest.yaml").read_text().splitlines()
        if line.strip().startswith("base:")
    )
    base = git(options.clone, "rev-parse", manifest_base).stdout.strip()
    line = git(
        options.clone, "rev-list", "--first-parent", "--reverse", f"{base}..{options.main}"
    ).stdout.split()
    step = max(1, len(line) // max(1, options.points))
    targets = sorted({*line[step - 1 :: step], line[-1]}, key=line.index) if line else []
    targets += [git(options.clone, "rev-parse", rev).stdout.strip() for rev in options.onto]
    results = [compare(options.clone, base, t, backport=False) for t in targets]
    results += [
        compare(options.clone, base, git(options.clone, "rev-parse", r).stdout.strip(), True)
        for r in options.backport
    ]
    bad = 0
    for result in results:
        print(json.dumps(result))
        wrong = (result["git_applied"] and not result["trees_equal"]) or (
            result["forkctl_stopped"] and result["git_applied"]
        )
        bad += bool(wrong)
    print(json.dumps({"targets": len(results), "mismatches": bad}))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
