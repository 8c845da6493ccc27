"""Build a series of real upstream commits (plain and `-x` picks, amended with own lines, squashed pairs)
mixed with own patches, port it with forkctl and compare every commit with plain `git rebase --onto`.

Usage: python scripts/real_series_vs_rebase.py CLONE BASE TARGET [--picks N] [--own PATCH ...] [--keep DIR]

In a scratch clone of CLONE (sharing its objects, sparse: only the paths base..target touches, so
snapshots that lack large blobs work), commits of BASE..TARGET are cherry-picked onto BASE in order
(one that does not pick cleanly on its own is left to upstream), every third with `-x`, every seventh
amended with an own line, pairs squashed with both provenance lines; own commits are added: the
`--own` patch files (git am), and own commits that add, at another place of the same file, a line an
upstream commit that was not picked adds. forkctl exports the branch into a scratch toolkit, previews
(`status --onto`) and ports it (`port --onto TARGET`); git rebases the same branch; each stop is resolved
the same way on both sides (conflict blocks to upstream's side, `--skip` when nothing is left). The script prints one JSON summary: patches, dropped, partial, stops
(each side), equal trees per commit, own lines missing, preview mismatches, provenance lines per file;
it exits 1 on any disagreement or a missing own line.
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

ROOT = Path(__file__).resolve().parent.parent
IDENTITY = ["-c", "user.name=Own Maintainer", "-c", "user.email=own@localhost"]
MARK = "# own line kept across ports"


def git(cwd: Path, *args: str, check: bool = True, stdin: str | None = None) -> str:
    proc = subprocess.run(
        ["git", *IDENTITY, *args], cwd=cwd, capture_output=True, text=True, check=False, input=stdin
    )
    if check and proc.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed in {cwd}: {proc.stderr}")
    return proc.stdout.strip() if check else str(proc.returncode)


def forkctl(toolkit: Path, *args: str) -> tuple[int, dict]:
    python = os.environ.get("FORKCTL_PYTHON", sys.executable)
    proc = subprocess.run(
        [python, "-m", "forkctl", "--manifest", str(toolkit / "manifest.yaml"), *args, "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        return proc.returncode, json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise SystemExit(f"forkctl {' '.join(args)}: not JSON: {proc.stdout}{proc.stderr}") from None


def scratch_clone(clone: Path, base: str, target: str, work: Path) -> Path:
    w = work / "w"
    git(work, "clone", "-q", "--no-checkout", "--shared", str(clone), str(w))
    touched = git(w, "diff", "--name-only", "--no-renames", base, target).splitlines()
    git(w, "sparse-checkout", "set", "--no-cone", "megatron/core/__init__.py", *touched, stdin=None)
    git(w, "checkout", "-q", "-b", "series", base)
    return w


def pick(w: Path, commit: str, with_x: bool) -> bool:
    status = git(w, "cherry-pick", *(["-x"] if with_x else []), commit, check=False)
    if status != "0":
        git(w, "cherry-pick", "--abort", check=False)
        return False
    return True


def python_file_of(w: Path, commit: str) -> str | None:
    files = git(w, "diff-tree", "--no-commit-id", "--name-only", "--diff-filter=AM", "-r", commit).split()
    return next((f for f in files if f.endswith(".py") and (w / f).is_file()), None)


def amend_own_line(w: Path, number: int) -> str | None:
    path = python_file_of(w, "HEAD")
    if path is None:
        return None
    marker = f"{MARK} ({number})"
    with open(w / path, "a", encoding="utf-8") as handle:
        handle.write(f"{marker}\n")
    git(w, "commit", "-q", "-a", "--amend", "--no-edit")
    return marker


def squash_last_two(w: Path, first: str, second: str) -> None:
    subject = git(w, "log", "-1", "--format=%s", first)
    message = (
        f"{subject} (+ {git(w, 'log', '-1', '--format=%s', second)})\n\n"
        f"(cherry picked from commit {first})\n(cherry picked from commit {second})\n"
    )
    author, date = git(w, "log", "-1", "--format=%an <%ae>%x00%aI", first).split("\x00")
    git(w, "reset", "-q", "--soft", "HEAD~2")
    git(w, "commit", "-q", "--author", author, "--date", date, "-m", message)


def same_line_elsewhere(w: Path, commit: str, number: int) -> str | None:
    """An own commit appending, at the end of a file, the first line upstream's `commit` adds to it."""
    for path in git(w, "diff-tree", "--no-commit-id", "--name-only", "--diff-filter=M", "-r", commit).split():
        if not path.endswith(".py") or not (w / path).is_file():
            continue
        diff = git(w, "show", "-U0", "--format=", commit, "--", path).splitlines()
        added = [line[1:] for line in diff if line.startswith("+") and not line.startswith("+++")]
        added = [line for line in added if line.strip() and not line.startswith((" ", "\t"))]
        if added:
            with open(w / path, "a", encoding="utf-8") as handle:
                handle.write(f"{added[0]}\n")
            git(w, "commit", "-q", "-a", "-m", f"own: also {added[0][:40].strip()} at the end ({number})")
            return added[0]
    return None


def build(w: Path, base: str, target: str, picks: int, own: list[Path]) -> dict:
    upstream = git(w, "rev-list", "--reverse", "--no-merges", "--first-parent", f"{base}..{target}").split()
    if own:
        git(w, "am", "-q", "--committer-date-is-author-date", *map(str, own))
    built: dict = {"picked": 0, "with_x": 0, "amended": [], "squashed": 0, "own": len(own), "left": []}
    pending_squash: str | None = None
    for number, commit in enumerate(upstream):
        if built["picked"] >= picks:
            break
        if number % 9 == 4:  # left to upstream; sometimes our own commit adds one of its lines elsewhere
            built["left"].append(commit)
            if number % 18 == 4 and same_line_elsewhere(w, commit, number):
                built["own"] += 1
            continue
        with_x = number % 3 == 0 or pending_squash is not None
        if not pick(w, commit, with_x):
            built["left"].append(commit)
            continue
        built["picked"] += 1
        built["with_x"] += with_x
        if pending_squash is not None:
            squash_last_two(w, pending_squash, commit)
            built["squashed"] += 1
            pending_squash = None
        elif number % 11 == 5:
            pending_squash = commit
        elif number % 7 == 2:
            marker = amend_own_line(w, number)
            if marker:
                built["amended"].append(marker)
    built["commits"] = int(git(w, "rev-list", "--count", f"{base}..series"))
    return built


def toolkit_for(w: Path, base: str, out: Path) -> Path:
    (out / "patches" / "megatron-lm").mkdir(parents=True)
    url = w.resolve().as_uri()
    (out / "manifest.yaml").write_text(
        "schema: 1\n"
        f"upstream: {{repo: NVIDIA/Megatron-LM, url: '{url}', branch: main, base: {base}}}\n"
        "fork: {repo: AlignmentResearch/Megatron-LM, url: 'https://github.com/AlignmentResearch/Megatron-LM.git',"
        " branch: farai/main, tree_include: 'megatron/**'}\n"
        "series: []\n"
        "dropped: []\n"
    )
    return out


def keep_ours(text: str) -> str:
    """A file with conflict markers resolved to the upstream side of each block ("ours" when a
    rebase or port stops: the new base plus what was ported), every merged line around them kept."""
    out, side = [], "both"
    for line in text.splitlines(keepends=True):
        if line.startswith("<<<<<<< "):
            side = "ours"
        elif line.startswith("||||||| ") and side == "ours":
            side = "base"
        elif line.rstrip("\n") == "=======" and side in ("ours", "base"):
            side = "theirs"
        elif line.startswith(">>>>>>> ") and side == "theirs":
            side = "both"
        elif side in ("both", "ours"):
            out.append(line)
    return "".join(out)


def resolve(worktree: Path, paths: list[str]) -> None:
    """The same resolution on both sides: markers to upstream's side; a file upstream's side lacks
    deleted; any other conflict (no markers) takes upstream's side whole."""
    for path in paths:
        target = worktree / path
        in_head = git(worktree, "cat-file", "-e", f"HEAD:{path}", check=False) == "0"
        if not in_head:
            target.unlink(missing_ok=True)
        elif target.is_file() and "<<<<<<< " in target.read_text(errors="replace"):
            target.write_text(keep_ours(target.read_text()))
        else:
            target.write_bytes(
                subprocess.run(
                    ["git", "show", f"HEAD:{path}"], cwd=worktree, capture_output=True, check=True
                ).stdout
            )


def port_resolving(toolkit: Path, w: Path, target: str) -> tuple[dict, list[str]]:
    """forkctl port --onto TARGET, each stop resolved with `resolve` (--skip when that leaves nothing):
    (the last report, the stopped subjects)."""
    # --reapply-reverted: git rebase applies a pick upstream reverted again, so the comparison does too
    # (without it forkctl stops there for a decision, which is its point, not a disagreement).
    code, data = forkctl(toolkit, "port", "--onto", target, "--repo", str(w), "--reapply-reverted")
    stops = []
    while code == 1 and "conflict" in data:
        stops.append(data["conflict"]["subject"])
        resolve(Path(data["conflict"]["worktree"]), data["conflict"]["paths"])
        code, data = forkctl(toolkit, "port", "--continue", "--repo", str(w))
        if code == 2 and "changes nothing" in data.get("error", ""):
            code, data = forkctl(toolkit, "port", "--skip", "--repo", str(w))
    if code != 0:
        raise SystemExit(f"port failed: {json.dumps(data)[:2000]}")
    return data, stops


def rebase_resolving(w: Path, base: str, target: str) -> list[str]:
    git(w, "checkout", "-q", "-B", "rebased", "series")
    stops = []
    status = git(w, "rebase", "-q", "--onto", target, base, check=False)
    while status != "0":
        stops.append(git(w, "log", "-1", "--format=%s", "REBASE_HEAD"))
        resolve(w, git(w, "diff", "--name-only", "--diff-filter=U").split())
        git(w, "add", "-A")
        if git(w, "diff", "--cached", "--quiet", check=False) == "0":
            status = git(w, "rebase", "--skip", check=False)
        else:
            status = git(w, "-c", "core.editor=true", "rebase", "--continue", check=False)
    return stops


def subjects_and_trees(w: Path, target: str, branch: str) -> list[tuple[str, str]]:
    out = git(w, "log", "--reverse", "--format=%s%x00%T", f"{target}..{branch}")
    return [tuple(line.split("\x00")) for line in out.splitlines()]  # type: ignore[misc]


def preview_results(toolkit: Path, w: Path, target: str) -> list[str]:
    code, data = forkctl(toolkit, "status", "--onto", target, "--repo", str(w))
    if code not in (0, 1):
        raise SystemExit(f"status --onto failed: {data}")
    names = []
    for item in data["patches"]:
        result = item["result"]
        if result.startswith("applies"):
            result = "partial" if "partial" in item else "applied"
        names.append("conflict" if result == "conflicts" else result)
    return names


def port_results(steps: list[dict]) -> list[str]:
    names = []
    for step in steps:
        absorbed = step.get("absorbed")
        if absorbed:
            names.append("conflict" if absorbed["reason"] == "skipped" else "absorbed")
        elif step.get("resolved"):
            names.append("conflict")
        else:
            names.append("partial" if step.get("partial") else "applied")
    return names


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("clone", type=Path)
    parser.add_argument("base")
    parser.add_argument("target")
    parser.add_argument("--picks", type=int, default=55)
    parser.add_argument("--own", type=Path, action="append", default=[])
    parser.add_argument("--keep", type=Path, help="build here and leave it (default: a temp dir, removed)")
    options = parser.parse_args()
    work = options.keep or Path(tempfile.mkdtemp(prefix="real-series-"))
    work.mkdir(parents=True, exist_ok=True)
    os.environ["FORKCTL_CACHE"] = str(work / "cache")
    os.environ["PYTHONPATH"] = str(ROOT)
    try:
        base = git(options.clone, "rev-parse", options.base)
        target = git(options.clone, "rev-parse", options.target)
        w = scratch_clone(options.clone, base, target, work)
        built = build(w, base, target, options.picks, [p.resolve() for p in options.own])
        toolkit = toolkit_for(w, base, work / "toolkit")
        code, exported = forkctl(toolkit, "export", "--repo", str(w), "--branch", "series")
        if code != 0:
            raise SystemExit(f"export failed: {exported}")
        lines_before = sorted(
            {p.read_text().count("(cherry picked from commit") for p in toolkit.rglob("*.patch")}
        )
        git(w, "checkout", "-q", "--detach", "series")  # port writes farai/main; nothing checked out there
        previewed = preview_results(toolkit, w, target)
        data, forkctl_stops = port_resolving(toolkit, w, target)
        ported = port_results(data["steps"])
        git_stops = rebase_resolving(w, base, target)
        ours, theirs = subjects_and_trees(w, target, "farai/main"), subjects_and_trees(w, target, "rebased")
        equal = sum(a == b for a, b in zip(ours, theirs, strict=False))
        added = git(w, "diff", target, "farai/main")
        missing = [m for m in built["amended"] if f"+{m}" not in added]  # own lines forkctl's branch lacks
        git_added = git(w, "diff", target, "rebased")
        missing_in_git = [m for m in built["amended"] if f"+{m}" not in git_added]
        lint_code, _ = forkctl(toolkit, "lint")
        check_code, _ = forkctl(toolkit, "export", "--repo", str(w), "--check")
        lines_after = sorted(
            {p.read_text().count("(cherry picked from commit") for p in toolkit.rglob("*.patch")}
        )
        summary = {
            "built": {k: v for k, v in built.items() if k not in ("left", "amended")}
            | {
                "amended": len(built["amended"]),
                "left_to_upstream": len(built["left"]),
            },
            "patches": len(ported),
            "dropped": ported.count("absorbed"),
            "partial": ported.count("partial"),
            "applied": ported.count("applied"),
            "forkctl_stops": forkctl_stops,
            "git_stops": git_stops,
            "stops_agree": forkctl_stops == git_stops,
            "commits": [len(ours), len(theirs)],
            "equal_trees": equal,
            "preview_agrees": previewed == ported,
            "own_lines_missing": missing,
            "own_lines_missing_in_git_too": missing_in_git,
            "own_lines": len(built["amended"]),
            "provenance_lines_per_file": {"before_port": lines_before, "after_port": lines_after},
            "lint_exit": lint_code,
            "export_check_exit": check_code,
            "dropped_reasons": sorted(
                {(s["absorbed"]["reason"]) for s in data["steps"] if s.get("absorbed")}
            ),
        }
        print(json.dumps(summary, indent=1))
        good = (
            summary["stops_agree"]
            and len(ours) == len(theirs) == equal
            and summary["preview_agrees"]
            and set(missing) <= set(missing_in_git)  # only a stop's resolution, the same in git, may lose one
            and lines_after == [1]
            and lint_code == 0
            and check_code == 0
        )
        return 0 if good else 1
    finally:
        if not options.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
