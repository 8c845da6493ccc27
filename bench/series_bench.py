"""Benchmark: forkctl's series verbs against the plain-git way of doing the same, in one run.

On one real-size upstream (a generated one of --files files and --commits commits, or a clone of a
real repository with --upstream PATH --base SHA), with a series of --patches commits (each changing
one or two files) exported by forkctl, it times, side by side and interleaved run by run (median of
--runs; every forkctl arm is the CLI, process start included; stdout to a pipe):

| arm | forkctl | the alternative | target (issue 11) |
|---|---|---|---|
| apply, 2 patches | `apply --base --repo` (new branch) | `git clone` + checkout + `git am` | <= 0.33 |
| apply, N patches | same | same | <= 0.5 |
| re-apply, 2 patches | `apply --force` on the existing branch | `git am` in a warm worktree | <= 2.0 |
| export --check, N | `export --check` | `git format-patch` of the range | <= 2.0 |
| port, N patches | `port --onto` (manifest, files, branch) | `git rebase --onto` in a worktree | <= 1.0 |

Run: .venv/bin/python bench/series_bench.py [--files 3000] [--commits 2000] [--patches 100] [--runs 5]
     [--upstream /path/to/Megatron-LM.git --base SHA] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from apply_bench import fast_import_stream, file_paths  # noqa: E402

from forkctl.files import atomic_write_text  # noqa: E402  (a kill leaves old or new results)

IDENT = "Bench <bench@example.com>"
GIT_ID = ["-c", "user.name=Bench", "-c", "user.email=bench@example.com"]
TARGETS = {"apply-2": 0.33, "apply-N": 0.5, "reapply-2": 2.0, "export-check-N": 2.0, "port-N": 1.0}


def git(cwd: Path, *args: str, stdin: bytes | None = None) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, input=stdin, capture_output=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed in {cwd}: {proc.stderr.decode()[-800:]}")
    return proc.stdout.decode().strip()


def forkctl(*args: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "forkctl", *args],
        cwd=ROOT,
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(
            f"forkctl {' '.join(args)} failed: {proc.stdout.decode()[-800:]}{proc.stderr.decode()[-800:]}"
        )


@dataclass
class Scene:
    folder: Path
    upstream: Path  # a bare repository: the user's clone of upstream, holding the series branches
    base: str
    onto: str  # a newer upstream commit for the port
    toolkits: dict[int, Path]  # patches -> toolkit folder (manifest.yaml + patches/)
    patch_files: dict[int, list[Path]]


def _generated_upstream(folder: Path, files: int, commits: int) -> tuple[Path, str, list[str]]:
    bare = folder / "upstream.git"
    git(folder, "init", "-q", "--bare", "-b", "main", str(bare))
    paths = file_paths(files)
    git(bare, "fast-import", "--quiet", stdin=fast_import_stream(paths, commits, random.Random(files)))
    return bare, git(bare, "rev-parse", "main"), paths


def _cloned_upstream(folder: Path, source: Path, base: str) -> tuple[Path, str, list[str]]:
    bare = folder / "upstream.git"
    git(folder, "clone", "-q", "--bare", "--local", str(source), str(bare))
    base = git(bare, "rev-parse", "--verify", f"{base}^{{commit}}")
    listing = git(bare, "ls-tree", "-r", "--name-only", base).splitlines()
    return bare, base, [p for p in listing if p.endswith(".py") and "\n" not in p]


def _commits_on(bare: Path, parent: str, ref: str, edits: list[tuple[str, str]], tag: str) -> str:
    """One commit per (path, line) on top of `parent`: the line appended to the file, via fast-import."""
    contents = {path: git(bare, "cat-file", "blob", f"{parent}:{path}") for path, _ in edits}
    stream: list[bytes] = []
    for number, (path, line) in enumerate(edits):
        contents[path] += f"\n{line}\n"
        blob = contents[path].encode()
        message = f"{tag} {number}: touch {path.rsplit('/', 1)[-1]}\n".encode()
        stream.append(f"commit {ref}\ncommitter {IDENT} {1_800_000_000 + number * 60} +0000\n".encode())
        stream.append(f"data {len(message)}\n".encode() + message)
        if number == 0:
            stream.append(f"from {parent}\n".encode())
        stream.append(f"M 100644 inline {path}\ndata {len(blob)}\n".encode() + blob + b"\n\n")
    git(bare, "fast-import", "--quiet", "--force", stdin=b"".join(stream))
    return git(bare, "rev-parse", ref)


def _toolkit(folder: Path, bare: Path, base: str, branch: str) -> tuple[Path, list[Path]]:
    toolkit = folder / f"toolkit-{branch.replace('/', '-')}"
    (toolkit / "patches").mkdir(parents=True)
    (toolkit / "manifest.yaml").write_text(
        "schema: 1\nupstream:\n  repo: Bench/upstream\n"
        f"  url: file://{bare}\n  base: {base}\n"
        f"fork:\n  repo: Bench/fork\n  url: file://{bare}\n  branch: {branch}\nseries: []\n"
    )
    forkctl("--manifest", str(toolkit / "manifest.yaml"), "export", "--repo", str(bare), "--from", branch)
    return toolkit, sorted((toolkit / "patches").rglob("*.patch"))


def build_scene(folder: Path, args: argparse.Namespace) -> Scene:
    if args.upstream:
        bare, base, paths = _cloned_upstream(folder, args.upstream, args.base)
    else:
        bare, base, paths = _generated_upstream(folder, args.files, args.commits)
    rng = random.Random(7)
    chosen = rng.sample(paths, args.patches + 60)
    series = [(chosen[i], f"# series change {i}") for i in range(args.patches)]
    _commits_on(bare, base, "refs/heads/series-n", series, "feat")
    _commits_on(bare, base, "refs/heads/series-2", series[:2], "feat")
    # Upstream moves on: 60 commits on other files (the port's new base).
    onto = _commits_on(
        bare, base, "refs/heads/upstream-next", [(p, "# upstream change") for p in chosen[-60:]], "up"
    )
    toolkits, patch_files = {}, {}
    for count, branch in ((2, "series-2"), (args.patches, "series-n")):
        toolkits[count], patch_files[count] = _toolkit(folder, bare, base, branch)
    return Scene(folder, bare, base, onto, toolkits, patch_files)


def arms(scene: Scene, patches: int) -> dict[str, tuple[Callable[[], None], Callable[[], None]]]:
    """name -> (forkctl, alternative); each leaves the scene as it found it."""
    bare, base, folder = scene.upstream, scene.base, scene.folder
    counter = iter(range(1_000_000))

    def manifest(count: int) -> str:
        return str(scene.toolkits[count] / "manifest.yaml")

    def apply(count: int, branch: str, *extra: str) -> None:
        forkctl(
            "--manifest",
            manifest(count),
            "apply",
            "--base",
            base,
            "--repo",
            str(bare),
            "--branch",
            branch,
            *extra,
        )

    def apply_new(count: int) -> Callable[[], None]:
        def run() -> None:
            branch = f"bench/apply-{next(counter)}"
            apply(count, branch)
            git(bare, "update-ref", "-d", f"refs/heads/{branch}")

        return run

    def clone_checkout_am(count: int) -> Callable[[], None]:
        def run() -> None:
            work = folder / "am-work"
            shutil.rmtree(work, ignore_errors=True)
            git(folder, "clone", "-q", "--no-checkout", str(bare), str(work))
            git(work, "-c", "advice.detachedHead=false", "checkout", "-q", base)
            git(work, *GIT_ID, "am", "-q", *map(str, scene.patch_files[count]))

        return run

    warm = folder / "warm"
    git(folder, "clone", "-q", str(bare), str(warm))
    git(warm, "-c", "advice.detachedHead=false", "checkout", "-q", base)
    apply(2, "bench/again")

    def reapply() -> None:
        apply(2, "bench/again", "--force")

    def am_warm() -> None:
        git(warm, "reset", "-q", "--hard", base)
        git(warm, *GIT_ID, "am", "-q", *map(str, scene.patch_files[2]))

    # export --check as CI runs it: against the branch forkctl apply built from the committed files.
    apply(patches, "bench/built")

    def export_check() -> None:
        forkctl(
            "--manifest", manifest(patches), "export", "--check", "--repo", str(bare), "--from", "bench/built"
        )

    def format_patch() -> None:
        out = folder / "format-patch-out"
        shutil.rmtree(out, ignore_errors=True)
        git(
            bare,
            "format-patch",
            "-q",
            "--zero-commit",
            "--full-index",
            "-o",
            str(out),
            f"{base}..bench/built",
        )

    # The branch being ported is the one forkctl built, as in real use.
    series_head = git(bare, "rev-parse", "bench/built")
    ported = folder / "ported-toolkit"
    rebase_work = folder / "rebase-work"
    git(folder, "clone", "-q", str(bare), str(rebase_work))
    git(rebase_work, "checkout", "-q", "-B", "work", series_head)

    def port() -> None:
        shutil.rmtree(ported, ignore_errors=True)
        shutil.copytree(scene.toolkits[patches], ported)
        git(bare, "update-ref", "refs/heads/bench/port", series_head)
        forkctl(
            "--manifest",
            str(ported / "manifest.yaml"),
            "port",
            "--onto",
            scene.onto,
            "--repo",
            str(bare),
            "--branch",
            "bench/port",
        )

    def rebase() -> None:
        git(rebase_work, "reset", "-q", "--hard", series_head)
        git(rebase_work, *GIT_ID, "rebase", "-q", "--onto", scene.onto, base)

    return {
        "apply-2": (apply_new(2), clone_checkout_am(2)),
        "apply-N": (apply_new(patches), clone_checkout_am(patches)),
        "reapply-2": (reapply, am_warm),
        "export-check-N": (export_check, format_patch),
        "port-N": (port, rebase),
    }


def timed(action: Callable[[], None]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", type=int, default=3000)
    parser.add_argument("--commits", type=int, default=2000)
    parser.add_argument("--patches", type=int, default=100)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--upstream", type=Path, help="a clone of a real upstream instead of a generated one")
    parser.add_argument("--base", help="with --upstream: the commit to build the series on")
    parser.add_argument("--only", help="comma-separated arms to run (default: all)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.upstream and not args.base:
        parser.error("--upstream needs --base")
    with tempfile.TemporaryDirectory(prefix="forkctl-series-bench-") as holder:
        scene = build_scene(Path(holder), args)
        selected = arms(scene, args.patches)
        if args.only:
            selected = {k: v for k, v in selected.items() if k in args.only.split(",")}
        times: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in selected}
        for ours, theirs in selected.values():  # once each, untimed: caches warm for both
            ours()
            theirs()
        for _ in range(args.runs):
            for name, (ours, theirs) in selected.items():
                times[name][0].append(timed(ours))
                times[name][1].append(timed(theirs))
    where = (
        f"{args.upstream} at {args.base[:12]}"
        if args.upstream
        else f"generated, {args.files} files, {args.commits} commits"
    )
    print(f"series verbs, {where}; N = {args.patches} patches; median of {args.runs} interleaved runs")
    print(f"{'arm':<16} {'forkctl s':>10} {'alternative s':>14} {'ratio':>7} {'target':>7}  verdict")
    results = {}
    for name, (ours, theirs) in times.items():
        mine, alt = statistics.median(ours), statistics.median(theirs)
        ratio = mine / alt
        verdict = "met" if ratio <= TARGETS[name] else "MISSED"
        results[name] = {
            "forkctl_s": mine,
            "alternative_s": alt,
            "ratio": ratio,
            "target": TARGETS[name],
            "met": ratio <= TARGETS[name],
        }
        print(f"{name:<16} {mine:>10.3f} {alt:>14.3f} {ratio:>7.2f} {TARGETS[name]:>7.2f}  {verdict}")
    if args.json:
        atomic_write_text(
            args.json,
            json.dumps(
                {
                    "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "load": os.getloadavg(),
                    "scene": where,
                    "patches": args.patches,
                    "runs": args.runs,
                    "arms": results,
                },
                indent=2,
            )
            + "\n",
        )


if __name__ == "__main__":
    main()
