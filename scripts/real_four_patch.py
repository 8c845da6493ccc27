"""Issue 34's shape on real history: three `-x` picks of upstream commits that upstream edited again
later (so a 3-way merge of each onto the target conflicts, and `git rebase --onto` stops at the first),
plus one own patch, on a base N commits older than the target; forkctl ports it and should drop the three
picks as absorbed, proved against the commits they name, and carry the own patch, in one step.

Usage: python scripts/real_four_patch.py CLONE TARGET [--back 450] [--keep DIR]

Prints one JSON summary (the picks, git rebase's first stop, forkctl's port: stops, dropped with proof,
the own line on the ported head) and exits 1 when forkctl stops, drops fewer than three or loses the own
line.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from real_series_vs_rebase import forkctl, git, scratch_clone, toolkit_for

OWN_FILE = "megatron/core/own_feature_marker.py"
OWN_LINE = "OWN_FEATURE = True  # an own patch, kept across ports\n"


def conflicts_on(w: Path, commit: str, target: str) -> bool:
    """Whether `commit`'s change, 3-way applied on `target`'s tree, conflicts (in a private index)."""
    index = w / ".git" / "probe-index"
    env = {**os.environ, "GIT_INDEX_FILE": str(index)}
    subprocess.run(["git", "read-tree", target], cwd=w, env=env, check=True)
    diff = subprocess.run(
        ["git", "diff", "--binary", f"{commit}^", commit], cwd=w, capture_output=True, check=True
    )
    applied = subprocess.run(
        ["git", "apply", "--cached", "--3way"], cwd=w, env=env, input=diff.stdout, capture_output=True
    )
    index.unlink(missing_ok=True)
    return applied.returncode != 0


def pick_three(w: Path, base: str, target: str) -> list[str]:
    picked: list[str] = []
    for commit in git(
        w, "rev-list", "--reverse", "--first-parent", "--no-merges", f"{base}..{target}"
    ).split():
        if not conflicts_on(w, commit, target):
            continue
        if git(w, "cherry-pick", "-x", commit, check=False) != "0":
            git(w, "cherry-pick", "--abort", check=False)
            continue
        picked.append(commit)
        if len(picked) == 3:
            break
    return picked


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("clone", type=Path)
    parser.add_argument("target")
    parser.add_argument("--back", type=int, default=450)
    parser.add_argument("--keep", type=Path)
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="four-patch-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        target = git(args.clone, "rev-parse", args.target)
        base = git(args.clone, "rev-parse", f"{target}~{args.back}")
        w = scratch_clone(args.clone, base, target, work)
        picks = pick_three(w, base, target)
        (w / OWN_FILE).write_text(OWN_LINE)
        git(w, "add", "--sparse", OWN_FILE)
        git(w, "commit", "-q", "-m", "feat: an own feature marker")
        git(w, "branch", "rebased", "series")
        stop = git(w, "rebase", "-q", "--onto", target, base, "rebased", check=False)
        stopped_at = git(w, "log", "-1", "--format=%s", "REBASE_HEAD") if stop != "0" else None
        git(w, "rebase", "--abort", check=False)
        toolkit = toolkit_for(w, base, work / "toolkit")
        code, _ = forkctl(toolkit, "export", "--branch", "series", "--repo", str(w))
        code, ported = forkctl(toolkit, "port", "--onto", target, "--repo", str(w))
        head = ported.get("head") or ported.get("fork_head")
        shown = subprocess.run(["git", "show", f"{head}:{OWN_FILE}"], cwd=w, capture_output=True, text=True)
        kept = head is not None and shown.stdout == OWN_LINE
        dropped = [step["absorbed"] for step in ported.get("steps", []) if step.get("absorbed")]
        summary = {
            "base": base,
            "target": target,
            "picks": picks,
            "git_rebase_stops_at": stopped_at,
            "port_exit": code,
            "dropped": [{k: d[k] for k in ("subject", "upstream_commit", "proof")} for d in dropped],
            "own_line_kept": kept,
            "stops": [] if code == 0 else [ported.get("conflict")],
            "head": head,
        }
        print(json.dumps(summary, indent=1)[:20000])
        return 0 if code == 0 and len(picks) == 3 and len(dropped) == 3 and kept else 1
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
