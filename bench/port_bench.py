"""Benchmark: `forkctl port --onto` against `git rebase --onto`, a clean port and one that stops, side by
side and interleaved run by run in one process (median of --runs; the forkctl arm is the CLI, process
start included; the rebase arm runs in a warm clone checked out at the series head).

| arm | forkctl | git | target (issue 34) |
|---|---|---|---|
| port-clean | `port --onto` of N patches that all merge: manifest, files, branch | `git rebase --onto` | <= 1.0 |
| port-stop | `port --onto` of N patches, the middle one conflicting: stops there | `git rebase --onto`, stops there | <= 1.5 |

After each run its side is undone untimed (`port --abort` and the branch put back, `git rebase
--abort`), and the toolkit is copied back untimed, so every run starts from the same place. With
`--before DIR` (another forkctl, e.g. an export of an earlier commit) that forkctl is timed in the same
interleaved runs, so a before/after comparison shares one machine state.

The upstream: by default a repository built here from the installed megatron-core package's files
(copied under a few folders up to --files files, as the demo builds its upstream from that package),
whose next commit range (base..onto) edits --upstream-commits files; or, when FORKCTL_BENCH_MEGATRON names
a clone of Megatron-LM (e.g. /work/.mirror/NVIDIA+Megatron-LM/repo), that repository from --base
(default d12f6c8c) to --onto (default main). The series is made the same way on both: clean patches
append a line to a file upstream leaves alone; the conflicting one rewrites a line upstream changed.

Run: .venv/bin/python bench/port_bench.py [--files 3000] [--patches 10] [--runs 5] [--before DIR]
     [--json bench/results-cpu-port.json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
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
sys.path.insert(0, str(ROOT))

from forkctl.files import atomic_write_text  # noqa: E402  (a kill leaves old or new results)

IDENT = "Bench <bench@example.com>"
GIT_ID = ["-c", "user.name=Bench", "-c", "user.email=bench@example.com"]
TARGETS = {"port-clean": 1.0, "port-stop": 1.5}
MEGATRON_ENV = "FORKCTL_BENCH_MEGATRON"
PYCACHE = Path(tempfile.gettempdir()) / "forkctl-port-bench-pycache"


def git(cwd: Path, *args: str, stdin: bytes | None = None, ok: tuple[int, ...] = (0,)) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, input=stdin, capture_output=True, check=False)
    if proc.returncode not in ok:
        raise SystemExit(f"git {' '.join(args)} failed in {cwd}: {proc.stderr.decode()[-800:]}")
    return proc.stdout.decode(errors="replace").strip()


def _env(root: Path) -> dict[str, str]:
    """forkctl's environment: compiled modules kept (in PYCACHE, not in the checkout) as an installed
    forkctl has them, also where this shell says PYTHONDONTWRITEBYTECODE."""
    env = {**os.environ, "PYTHONPATH": str(root), "PYTHONPYCACHEPREFIX": str(PYCACHE)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def forkctl(*args: str, ok: tuple[int, ...] = (0,), root: Path = ROOT) -> int:
    """`python -m forkctl ARGS` of the forkctl at `root` (this checkout, or --before's)."""
    proc = subprocess.run(
        [sys.executable, "-m", "forkctl", *args], cwd=root, capture_output=True, env=_env(root), check=False
    )
    if proc.returncode not in ok:
        raise SystemExit(
            f"forkctl {' '.join(args)} exited {proc.returncode}: "
            f"{proc.stdout.decode()[-800:]}{proc.stderr.decode()[-800:]}"
        )
    return proc.returncode


def _package_files(count: int) -> dict[str, bytes]:
    """`count` files from the installed megatron package (found without importing it), copied under
    a few top folders until there are enough."""
    import importlib.util

    spec = importlib.util.find_spec("megatron")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("megatron-core is not installed in this Python: make setup, or set " + MEGATRON_ENV)
    folder = Path(next(iter(spec.submodule_search_locations)))
    found = sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)
    files: dict[str, bytes] = {}
    for copy in range(1 + count // max(len(found), 1)):
        top = "megatron" if copy == 0 else f"copies/c{copy}/megatron"
        for path in found:
            if len(files) < count:
                files[f"{top}/{path.relative_to(folder).as_posix()}"] = path.read_bytes()
    return files


def _fast_import(
    bare: Path, ref: str, commits: list[tuple[str, dict[str, bytes]]], parent: str | None
) -> str:
    stream: list[bytes] = []
    for number, (message, changes) in enumerate(commits):
        text = message.encode() + b"\n"
        stream.append(f"commit {ref}\ncommitter {IDENT} {1_800_000_000 + number * 60} +0000\n".encode())
        stream.append(f"data {len(text)}\n".encode() + text)
        if number == 0 and parent:
            stream.append(f"from {parent}\n".encode())
        for path, blob in changes.items():
            stream.append(f"M 100644 inline {path}\ndata {len(blob)}\n".encode() + blob + b"\n")
        stream.append(b"\n")
    git(bare, "fast-import", "--quiet", "--force", stdin=b"".join(stream))
    return git(bare, "rev-parse", ref)


def _generated(folder: Path, files: int, moves: int) -> tuple[Path, str, str]:
    """(bare repository, base, onto): the package's files at the base; `moves` upstream commits each
    rewriting the first line of 4 files and adding one in 4 commits (onto d12f6c8c..main of the real
    repository moves 841 files in 196 commits)."""
    bare = folder / "upstream.git"
    git(folder, "init", "-q", "--bare", "-b", "main", str(bare))
    tree = _package_files(files)
    base = _fast_import(bare, "refs/heads/main", [("upstream: the package", tree)], None)
    rng = random.Random(34)
    commits = []
    paths = rng.sample(sorted(tree), min(len(tree), 4 * moves))
    for number in range(moves):
        changes = {}
        for path in paths[4 * number : 4 * number + 4]:
            lines = tree[path].split(b"\n")
            lines[0] = f"# upstream change {number}".encode()
            tree[path] = changes[path] = b"\n".join(lines)
        if number % 4 == 0:
            changes[f"megatron/core/upstream_new_{number}.py"] = f"NEW = {number}\n".encode()
        commits.append((f"upstream: change {number}", changes))
    onto = _fast_import(bare, "refs/heads/main", commits, base)
    return bare, base, onto


def _cloned(folder: Path, source: Path, base: str, onto: str) -> tuple[Path, str, str]:
    bare = folder / "upstream.git"
    git(folder, "clone", "-q", "--bare", "--local", str(source), str(bare))
    return bare, git(bare, "rev-parse", f"{base}^{{commit}}"), git(bare, "rev-parse", f"{onto}^{{commit}}")


def _changed_line(bare: Path, base: str, onto: str, path: str) -> int | None:
    """A line number of `path` at the base that upstream rewrote by `onto` (None: only additions)."""
    diff = git(bare, "diff", "-U0", "--no-renames", base, onto, "--", path)
    for match in re.finditer(r"^@@ -(\d+)(?:,(\d+))? ", diff, re.M):
        if match.group(2) != "0":
            return int(match.group(1))
    return None


def _series(bare: Path, base: str, onto: str, patches: int, stop: bool) -> str:
    """A series branch of `patches` commits on the base: each appends a line to a file upstream leaves
    alone; with `stop`, the middle one rewrites a line upstream changed (a conflict)."""
    listing = git(bare, "ls-tree", "-r", "--name-only", base).splitlines()
    touched = set(git(bare, "diff", "--name-only", "--no-renames", base, onto).splitlines())
    rng = random.Random(7)
    quiet = rng.sample(sorted(p for p in listing if p.endswith(".py") and p not in touched), patches)
    contents = {path: git(bare, "cat-file", "blob", f"{base}:{path}").encode() + b"\n" for path in quiet}
    commits = [
        (f"feat: series change {n}", {p: contents[p] + b"# series change\n"}) for n, p in enumerate(quiet)
    ]
    if stop:
        for path in sorted(p for p in touched if p.endswith(".py") and p in listing):
            line = _changed_line(bare, base, onto, path)
            if line is not None:
                lines = git(bare, "cat-file", "blob", f"{base}:{path}").encode().split(b"\n")
                lines[line - 1] = b"# the series rewrites this line"
                commits[patches // 2] = ("feat: series rewrites an upstream line", {path: b"\n".join(lines)})
                break
        else:
            raise SystemExit("no upstream-changed line to conflict with")
    return _fast_import(bare, f"refs/heads/series-{'stop' if stop else 'clean'}", commits, base)


def _toolkit(folder: Path, bare: Path, base: str, branch: str) -> Path:
    toolkit = folder / f"toolkit-{branch}"
    (toolkit / "patches").mkdir(parents=True)
    (toolkit / "manifest.yaml").write_text(
        f"schema: 1\nupstream:\n  repo: Bench/upstream\n  url: file://{bare}\n  base: {base}\n"
        f"fork:\n  repo: Bench/fork\n  url: file://{bare}\n  branch: {branch}\nseries: []\n"
    )
    forkctl("--manifest", str(toolkit / "manifest.yaml"), "export", "--repo", str(bare), "--from", branch)
    # The branch the port moves is the one forkctl builds from the files, as in real use.
    forkctl(
        "--manifest", str(toolkit / "manifest.yaml"), "apply", "--base", base, "--repo", str(bare), "--force"
    )
    return toolkit


Step = tuple[Callable[[], None], Callable[[], None]]  # (what is timed, the untimed undoing after it)


@dataclass
class Arm:
    prepare: Callable[[], None]
    steps: dict[str, Step]  # "forkctl", "rebase" and, with --before, "before"


def _arm(folder: Path, scene: tuple[Path, str, str], patches: int, stops: bool, before: Path | None) -> Arm:
    bare, base, onto = scene
    branch = f"series-{'stop' if stops else 'clean'}"
    _series(bare, base, onto, patches, stops)
    toolkit = _toolkit(folder, bare, base, branch)
    head = git(bare, "rev-parse", branch)
    work = folder / f"rebase-{branch}"
    git(folder, "clone", "-q", "--no-checkout", str(bare), str(work))
    git(work, "-c", "advice.detachedHead=false", "checkout", "-q", "--detach", head)
    roots = {"forkctl": ROOT, **({"before": before} if before else {})}
    ported = {name: folder / f"ported-{name}-{branch}" for name in roots}

    def prepare() -> None:
        for copy in ported.values():
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(toolkit, copy)
        git(work, "-c", "advice.detachedHead=false", "checkout", "-q", "--detach", head)

    def port(name: str) -> Step:
        manifest, root = str(ported[name] / "manifest.yaml"), roots[name]

        def run() -> None:
            forkctl(
                "--manifest",
                manifest,
                "port",
                "--onto",
                onto,
                "--repo",
                str(bare),
                ok=(int(stops),),
                root=root,
            )

        def undo() -> None:
            if stops:
                forkctl("--manifest", manifest, "port", "--abort", "--repo", str(bare), root=root)
            git(bare, "update-ref", f"refs/heads/{branch}", head)

        return run, undo

    def rebase() -> None:
        git(work, *GIT_ID, "rebase", "-q", "--onto", onto, base, ok=(int(stops),))

    def rebase_undo() -> None:
        if stops:
            git(work, "rebase", "--abort")

    return Arm(prepare, {**{name: port(name) for name in roots}, "rebase": (rebase, rebase_undo)})


def timed(action: Callable[[], None]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def _scene(folder: Path, args: argparse.Namespace) -> tuple[Path, str, str, str]:
    source = os.environ.get(MEGATRON_ENV)
    if source:
        bare, base, onto = _cloned(folder, Path(source), args.base, args.onto)
        return bare, base, onto, f"{source} {base[:12]}..{onto[:12]}"
    bare, base, onto = _generated(folder, args.files, args.upstream_commits)
    return (
        bare,
        base,
        onto,
        f"megatron-core package files, {args.files} files, {args.upstream_commits} upstream commits",
    )


def _measure(arms: dict[str, Arm], runs: int) -> dict[str, dict[str, list[float]]]:
    """Every step of every arm once untimed (caches warm for all), then `runs` rounds, interleaved."""
    times: dict[str, dict[str, list[float]]] = {
        name: {step: [] for step in arm.steps} for name, arm in arms.items()
    }
    for round_number in range(runs + 1):
        for name, arm in arms.items():
            arm.prepare()
            for step, (action, undo) in arm.steps.items():
                took = timed(action)
                undo()
                if round_number:
                    times[name][step].append(took)
    return times


def _report(times: dict[str, dict[str, list[float]]]) -> dict[str, dict[str, object]]:
    before = any("before" in steps for steps in times.values())
    print(
        f"{'arm':<12} {'forkctl s':>10} {'rebase s':>10} {'ratio':>7} {'target':>7}  verdict"
        + ("   before s  before ratio" if before else "")
    )
    results: dict[str, dict[str, object]] = {}
    for name, steps in times.items():
        mine, alt = statistics.median(steps["forkctl"]), statistics.median(steps["rebase"])
        ratio = mine / alt
        results[name] = {
            "forkctl_s": mine,
            "rebase_s": alt,
            "ratio": ratio,
            "target": TARGETS[name],
            "met": ratio <= TARGETS[name],
            "runs_s": steps,
        }
        line = f"{name:<12} {mine:>10.3f} {alt:>10.3f} {ratio:>7.2f} {TARGETS[name]:>7.2f}  "
        line += "met   " if ratio <= TARGETS[name] else "MISSED"
        if before:
            old = statistics.median(steps["before"])
            results[name] |= {"before_s": old, "before_ratio": old / alt}
            line += f" {old:>10.3f} {old / alt:>12.2f}"
        print(line)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", type=int, default=3000)
    parser.add_argument("--upstream-commits", type=int, default=196)
    parser.add_argument("--patches", type=int, default=10)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--base", default="d12f6c8c", help=f"with {MEGATRON_ENV}: the series' base")
    parser.add_argument("--onto", default="main", help=f"with {MEGATRON_ENV}: the port's target")
    parser.add_argument(
        "--before",
        type=Path,
        help="the root of another forkctl (e.g. `git archive COMMIT | tar -x -C DIR`), timed in the same runs",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="forkctl-port-bench-") as holder:
        folder = Path(holder)
        os.environ["FORKCTL_CACHE"] = str(folder / "cache")
        bare, base, onto, where = _scene(folder, args)
        with (bare / "config").open("a") as config:
            config.write("[uploadpack]\n\tallowFilter = true\n\tallowAnySHA1InWant = true\n")
        scene = (bare, base, onto)
        arms = {
            "port-clean": _arm(folder, scene, args.patches, False, args.before),
            "port-stop": _arm(folder, scene, args.patches, True, args.before),
        }
        times = _measure(arms, args.runs)
    load = os.getloadavg()
    print(f"port vs git rebase, {where}; N = {args.patches} patches; median of {args.runs} interleaved runs")
    print(
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
        + (f"; before = {args.before}" if args.before else "")
    )
    results = _report(times)
    if args.json:
        record = {
            "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "load": load,
            "scene": where,
            "patches": args.patches,
            "runs": args.runs,
            "before": str(args.before) if args.before else None,
            "arms": results,
        }
        atomic_write_text(args.json, json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
