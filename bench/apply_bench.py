"""Benchmark: forkctl apply (private index, no checkout) vs git clone + checkout + git am.

Generates repositories with `git fast-import` (files spread over nested folders, a long linear history),
a series of patches touching a few files each, and times, median of several runs:

- forkctl core: build.build_series on a bare repository (the work `forkctl apply` does);
- forkctl CLI: `python -m forkctl apply --base ... --repo ... --force` (process start included);
- baseline: `git clone` (local) + checkout of the base + `git am` of the series.

Run: .venv/bin/python bench/apply_bench.py [--sizes 300,1000,3000] [--commits 2000] [--runs 5]
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from forkctl.git.repo import GitRepo  # noqa: E402
from forkctl.ops import replay as build  # noqa: E402
from forkctl.series import parse_patch  # noqa: E402

IDENT = "Bench <bench@example.com>"


def git(cwd: Path, *args: str, stdin: bytes | None = None) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, input=stdin, capture_output=True, check=True)
    return proc.stdout.decode().strip()


def file_paths(count: int) -> list[str]:
    return [f"megatron/core/d{i % 17:02d}/s{i % 7}/m{i % 3}/file_{i:05d}.py" for i in range(count)]


def content(path: str, version: int) -> bytes:
    lines = [f"# {path}\n"] + [
        f"def f_{n}():\n    return {n} + {version if n == 5 else 0}\n" for n in range(40)
    ]
    return "".join(lines).encode()


def fast_import_stream(files: list[str], commits: int, rng: random.Random) -> bytes:
    out: list[bytes] = []
    version = dict.fromkeys(files, 0)
    for number in range(commits):
        stamp = 1_700_000_000 + number * 60
        message = f"commit {number}\n".encode()
        out.append(f"commit refs/heads/main\ncommitter {IDENT} {stamp} +0000\n".encode())
        out.append(f"data {len(message)}\n".encode() + message)
        touched = files if number == 0 else rng.sample(files, 3)
        for path in touched:
            version[path] += 1
            blob = content(path, version[path])
            out.append(f"M 100644 inline {path}\ndata {len(blob)}\n".encode() + blob + b"\n")
        out.append(b"\n")
    return b"".join(out)


def make_repo(folder: Path, size: int, commits: int, patches: int) -> tuple[Path, str, list[Path]]:
    rng = random.Random(size)
    files = file_paths(size)
    bare = folder / "upstream.git"
    git(folder, "init", "-q", "--bare", "-b", "main", str(bare))
    git(bare, "fast-import", "--quiet", stdin=fast_import_stream(files, commits, rng))
    base = git(bare, "rev-parse", "main")
    # The series: made in a scratch clone, exported with format-patch, like the real one.
    dev = folder / "dev"
    git(folder, "clone", "-q", str(bare), str(dev))
    git(dev, "config", "user.name", "Bench")
    git(dev, "config", "user.email", "bench@example.com")
    for number in range(patches):
        for path in rng.sample(files, 2):
            target = dev / path
            target.write_text(target.read_text().replace("return 1 +", f"return {100 + number} +", 1))
        git(dev, "commit", "-q", "-a", "-m", f"patch {number}\n\n(cherry picked from commit {'a' * 40})")
    out = folder / "toolkit" / "patches" / "megatron-lm"
    names = git(
        dev,
        "format-patch",
        "--zero-commit",
        "--no-signature",
        "--full-index",
        "--no-stat",
        "-o",
        str(out),
        f"{base}..HEAD",
    ).splitlines()
    series = "\n".join(f"  - file: {Path(n).relative_to(folder / 'toolkit')}" for n in names)
    (folder / "toolkit" / "manifest.yaml").write_text(
        "schema: 1\nupstream:\n  repo: NVIDIA/Megatron-LM\n  url: https://example.invalid/up.git\n"
        f"  base: {base}\nfork:\n  repo: A/M\n  url: https://example.invalid/f.git\n  branch: farai/main\n"
        f"series:\n{series}\n"
    )
    return bare, base, [Path(n) for n in names]


def median_ms(action, runs: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        action()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def bench_size(size: int, commits: int, patches: int, runs: int) -> tuple[float, float, float]:
    with tempfile.TemporaryDirectory(prefix="forkctl-bench-") as holder:
        folder = Path(holder)
        bare, base, patch_files = make_repo(folder, size, commits, patches)
        repo = GitRepo(bare)
        parsed = [parse_patch(p) for p in patch_files]
        core = median_ms(lambda: build.build_series(repo, base, parsed), runs)
        manifest = folder / "toolkit" / "manifest.yaml"
        cli = median_ms(
            lambda: subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "forkctl",
                    "--manifest",
                    str(manifest),
                    "apply",
                    "--base",
                    base,
                    "--repo",
                    str(bare),
                    "--force",
                ],
                check=True,
                capture_output=True,
                cwd=ROOT,
            ),
            runs,
        )

        def clone_checkout_am() -> None:
            work = folder / "work"
            shutil.rmtree(work, ignore_errors=True)
            git(folder, "clone", "-q", "--no-checkout", str(bare), str(work))
            git(work, "checkout", "-q", "-b", "fork", base)
            git(
                work,
                "-c",
                "user.name=Bench",
                "-c",
                "user.email=bench@example.com",
                "am",
                "-q",
                *[str(p) for p in patch_files],
            )

        baseline = median_ms(clone_checkout_am, runs)
    return core, cli, baseline


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="300,1000,3000")
    parser.add_argument("--commits", type=int, default=2000)
    parser.add_argument("--patches", type=int, default=10)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(
        "| files | commits | patches | forkctl core ms | forkctl CLI ms | clone+checkout+am ms | am/core | am/CLI |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for size in [int(s) for s in args.sizes.split(",")]:
        core, cli, baseline = bench_size(size, args.commits, args.patches, args.runs)
        print(
            f"| {size} | {args.commits} | {args.patches} | {core:.0f} | {cli:.0f} | {baseline:.0f} | "
            f"{baseline / core:.1f}x | {baseline / cli:.1f}x |",
            flush=True,
        )


if __name__ == "__main__":
    main()
