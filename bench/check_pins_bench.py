"""Benchmark: forkctl check-pins (commit objects only) vs the same check done by checking submodules out.

Builds, with `git fast-import`, a chain the size of the real one: an upstream of ~3,000 files and a long
history, a fork whose `farai/main` is apply(series, base), a Bridge and a NeMo-RL of a few thousand files
each (NeMo-RL with the shallow Bridge submodule plus Automodel and Gym), all served as file:// bare
remotes that answer like GitHub (partial clone, reachable-SHA wants). Every chain passes; each arm must
reach that verdict. Timed, median of --runs runs:

- forkctl core: check_chain on uninitialised submodules, cold cache (what CI pays), and warm (the
  cache of a previous run, as on a maintainer's machine);
- forkctl CLI: `python -m forkctl check-pins`, cold and warm cache, process start included;
- the alternatives, each from nothing: `git clone` NeMo-RL + `git submodule update --init --recursive`
  (full clones), and the same blobless (`--filter=blob:none` on the clone and the submodule update),
  then compare the gitlinks with rev-parse and check the fork head with `git merge-base --is-ancestor`
  in the checkouts. (They take the expected fork head as given; forkctl also rebuilds it from the series.)

Objects received, per arm: every fetch or clone writes one pack (git keeps fetched packs of a partial
clone as they came, with a `.promisor` file, and a clone's pack whole), so the objects received are the
entries of the packs the arm left (read from the `.idx` files; loose objects are ones forkctl wrote
itself, not received); duplicates are entries whose object another pack of the arm already holds. For a
warm run, the packs that run added. Git processes: git processes forkctl core started (`forkctl.process`).

Run: .venv/bin/python bench/check_pins_bench.py [--files 3000] [--commits 2000] [--runs 5] [--json PATH]
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from forkctl import manifest as manifest_mod  # noqa: E402
from forkctl import process  # noqa: E402
from forkctl.chain.checks import check_chain  # noqa: E402
from forkctl.chain.sources import Source  # noqa: E402
from forkctl.git import locations  # noqa: E402
from forkctl.git.repo import GitRepo  # noqa: E402
from forkctl.ops import replay as build  # noqa: E402
from forkctl.series import parse_patch  # noqa: E402

IDENT = "Bench <bench@example.com>"
BRIDGE_GITLINK = "3rdparty/Megatron-LM"
NEMO_GITLINK = "3rdparty/Megatron-Bridge-workspace/Megatron-Bridge"
OTHERS = ("3rdparty/Automodel-workspace/Automodel", "3rdparty/Gym-workspace/Gym")


def git(cwd: Path, *args: str, stdin: bytes | None = None) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, input=stdin, capture_output=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} in {cwd}: {proc.stderr.decode()}")
    return proc.stdout.decode().strip()


def url(path: Path) -> str:
    return path.resolve().as_uri()


# --- generating the chain ----------------------------------------------------------------------------


def source_file(path: str, version: int) -> bytes:
    body = "".join(f"def f_{n}(x):\n    return x + {n} + {version if n == 3 else 0}\n" for n in range(30))
    return f"# {path}\n{body}".encode()


def history_stream(
    files: list[str], commits: int, rng: random.Random, gitlinks: dict[str, str], modules: str | None
) -> bytes:
    """A fast-import stream: commit 0 has every file (and the gitlinks), later ones touch 3 files each."""
    out: list[bytes] = []
    version = dict.fromkeys(files, 0)
    for number in range(commits):
        message = f"commit {number}\n".encode()
        stamp = 1_700_000_000 + number * 60
        out.append(f"commit refs/heads/main\ncommitter {IDENT} {stamp} +0000\n".encode())
        out.append(f"data {len(message)}\n".encode() + message)
        for path in files if number == 0 else rng.sample(files, 3):
            version[path] += 1
            blob = source_file(path, version[path])
            out.append(f"M 100644 inline {path}\ndata {len(blob)}\n".encode() + blob + b"\n")
        if number == commits - 1:  # the pins land on the tip
            if modules is not None:
                data = modules.encode()
                out.append(f"M 100644 inline .gitmodules\ndata {len(data)}\n".encode() + data + b"\n")
            for path, sha in gitlinks.items():
                out.append(f"M 160000 {sha} {path}\n".encode())
        out.append(b"\n")
    return b"".join(out)


def serve(path: Path) -> Path:
    git(path.parent, "init", "-q", "--bare", "-b", "main", str(path))
    for key in ("uploadpack.allowFilter", "uploadpack.allowReachableSHA1InWant"):
        git(path, "config", key, "true")
    return path


def generated_repo(
    path: Path,
    prefix: str,
    files: int,
    commits: int,
    gitlinks: dict[str, str] | None = None,
    modules: str = "",
) -> str:
    rng = random.Random(path.name)
    names = [f"{prefix}/d{i % 19:02d}/s{i % 5}/mod_{i:05d}.py" for i in range(files)]
    serve(path)
    git(
        path,
        "fast-import",
        "--quiet",
        stdin=history_stream(names, commits, rng, gitlinks or {}, modules or None),
    )
    return git(path, "rev-parse", "main")


def gitmodules(sections: list[tuple[str, str, bool]]) -> str:
    text = ""
    for path, target, shallow in sections:
        text += f'[submodule "{path}"]\n\tpath = {path}\n\turl = {target}\n'
        text += "\tshallow = true\n\tbranch = main\n" if shallow else ""
    return text


@dataclass
class BenchChain:
    folder: Path
    manifest: Path
    base: str
    head: str
    bridge_head: str
    nemo: Path


def make_chain(
    folder: Path, files: int, commits: int, consumer_files: int, consumer_commits: int
) -> BenchChain:
    upstream = folder / "upstream.git"
    base = generated_repo(upstream, "megatron/core", files, commits)
    # Two patches made in a scratch clone and exported like the real series.
    dev = folder / "dev"
    git(folder, "clone", "-q", str(upstream), str(dev))
    changed = git(dev, "ls-files").splitlines()[:4]
    for number, pair in enumerate((changed[:2], changed[2:])):
        for path in pair:
            target = dev / path
            target.write_text(target.read_text().replace("return x + 1 +", f"return x + {100 + number} +", 1))
        git(
            dev,
            "-c",
            "user.name=Bench",
            "-c",
            "user.email=b@example.com",
            "commit",
            "-q",
            "-a",
            "-m",
            f"perf: {number}",
        )
    toolkit = folder / "toolkit"
    names = git(
        dev, "format-patch", "--zero-commit", "--no-signature", "--full-index", "--no-stat",
        "-o", str(toolkit / "patches" / "megatron-lm"), f"{base}..HEAD",
    ).splitlines()  # fmt: skip
    shutil.rmtree(dev)
    fork = serve(folder / "fork.git")
    git(upstream, "push", "-q", url(fork), "main")
    head = build.build_series(GitRepo(fork), base, [parse_patch(Path(n)) for n in names]).head
    git(fork, "update-ref", "refs/heads/farai/main", head)

    others = {path: generated_repo(folder / f"{path.rsplit('/', 1)[1]}.git", "src", 50, 5) for path in OTHERS}
    bridge = folder / "bridge.git"
    bridge_head = generated_repo(
        bridge, "src/megatron/bridge", consumer_files, consumer_commits,
        {BRIDGE_GITLINK: head}, gitmodules([(BRIDGE_GITLINK, url(fork), False)]),
    )  # fmt: skip
    nemo = folder / "nemo.git"
    sections = [(NEMO_GITLINK, url(bridge), True)]
    sections += [(path, url(folder / f"{path.rsplit('/', 1)[1]}.git"), True) for path in OTHERS]
    generated_repo(
        nemo,
        "nemo_rl",
        consumer_files,
        consumer_commits,
        {NEMO_GITLINK: bridge_head, **others},
        gitmodules(sections),
    )
    for bare in (bridge, nemo):
        git(bare, "branch", "farai/main", "main")
    series = "".join(f"  - file: {Path(n).relative_to(toolkit)}\n" for n in names)
    consumers = "".join(
        f"  - name: {name}\n    upstream: NVIDIA-NeMo/{name}\n    fork: A/{name}\n    url: {url(path)}\n"
        f"    branch: farai/main\n    gitlink: {gitlink}\n"
        for name, path, gitlink in (
            ("megatron-bridge", bridge, BRIDGE_GITLINK),
            ("nemo-rl", nemo, NEMO_GITLINK),
        )
    )
    manifest = toolkit / "manifest.yaml"
    manifest.write_text(
        f"schema: 1\nupstream:\n  repo: NVIDIA/Megatron-LM\n  url: {url(upstream)}\n  branch: main\n  base: {base}\n"
        f"fork:\n  repo: AlignmentResearch/Megatron-LM\n  url: {url(fork)}\n  branch: farai/main\n"
        f"series:\n{series}consumers:\n{consumers}"
    )
    return BenchChain(folder, manifest, base, head, bridge_head, nemo)


# --- the arms ----------------------------------------------------------------------------------------


def reset(chain: BenchChain) -> None:
    """Start each run from nothing, outside the timer: an empty cache and no checkout."""
    shutil.rmtree(chain.folder / "cache", ignore_errors=True)
    shutil.rmtree(chain.folder / "checkout", ignore_errors=True)
    os.environ["FORKCTL_CACHE"] = str(chain.folder / "cache")


def forkctl_core(chain: BenchChain) -> bool:
    # What a command does around its work: a scope for the locations its manifest names; its repository
    # objects (and what they answered) are dropped when it returns, writing the caches' facts.
    with locations.named_by_user():
        manifest = manifest_mod.load(chain.manifest)
        return check_chain(manifest, [Source(c) for c in manifest.consumers]).ok


def forkctl_cli(chain: BenchChain) -> bool:
    proc = subprocess.run(
        [sys.executable, "-m", "forkctl", "--manifest", str(chain.manifest), "check-pins", "--json"],
        capture_output=True,
        cwd=chain.folder,
        check=False,
    )
    return proc.returncode == 0


def clone_and_compare(chain: BenchChain, blobless: bool = False) -> bool:
    work = chain.folder / "checkout"
    filters = ["--filter=blob:none"] if blobless else []
    git(chain.folder, "clone", "-q", *filters, "--branch", "farai/main", url(chain.nemo), str(work))
    git(
        work, "-c", "protocol.file.allow=always",
        "submodule", "update", "-q", "--init", "--recursive", *filters,
    )  # fmt: skip
    bridge = work / NEMO_GITLINK
    megatron = bridge / BRIDGE_GITLINK
    nemo_pin = git(work, "rev-parse", f"HEAD:{NEMO_GITLINK}")
    bridge_pin = git(bridge, "rev-parse", f"HEAD:{BRIDGE_GITLINK}")
    ok = nemo_pin == git(bridge, "rev-parse", "HEAD") and bridge_pin == git(megatron, "rev-parse", "HEAD")
    ancestor = subprocess.run(
        ["git", "merge-base", "--is-ancestor", chain.base, bridge_pin], cwd=megatron, check=False
    )
    return ok and bridge_pin == chain.head and ancestor.returncode == 0


# --- counting what arrived ----------------------------------------------------------------------------


def pack_objects(idx: Path) -> list[bytes]:
    """The object names a pack index (version 2) lists."""
    data = idx.read_bytes()
    if data[:8] != b"\xfftOc\x00\x00\x00\x02":
        raise RuntimeError(f"{idx}: not a version 2 pack index")
    count = int.from_bytes(data[8 + 255 * 4 : 8 + 256 * 4], "big")
    start = 8 + 256 * 4
    return [data[start + 20 * i : start + 20 * (i + 1)] for i in range(count)]


def packs_under(folder: Path) -> set[Path]:
    return set(folder.rglob("objects/pack/*.idx")) if folder.exists() else set()


@dataclass
class Received:
    objects: int = 0
    duplicates: int = 0


def received(idx_files: set[Path]) -> Received:
    seen: set[bytes] = set()
    total = 0
    for idx in sorted(idx_files):
        names = pack_objects(idx)
        total += len(names)
        seen.update(names)
    return Received(objects=total, duplicates=total - len(seen))


class GitCalls:
    """Counts forkctl's git processes: every one is started by `forkctl.process` (`run` for a command,
    `start` for a repository's long-lived `cat-file --batch`), with `git` as its program."""

    def __init__(self) -> None:
        self.count = 0
        self._saved = (process.run, process.start)

    def __enter__(self) -> GitCalls:
        run, start = self._saved

        def counted(real: Callable[..., Any]) -> Callable[..., Any]:
            def call(argv: Sequence[str], *args: Any, **kwargs: Any) -> Any:
                self.count += argv[0] == "git"
                return real(argv, *args, **kwargs)

            return call

        process.run, process.start = counted(run), counted(start)
        return self

    def __exit__(self, *_: object) -> None:
        process.run, process.start = self._saved


def timed(action: Callable[[], bool], before: Callable[[], None], runs: int) -> list[float]:
    seconds = []
    for _ in range(runs):
        before()
        start = time.perf_counter()
        if not action():
            raise RuntimeError(f"{action} did not reach the passing verdict")
        seconds.append(time.perf_counter() - start)
    return seconds


def isolate_git(folder: Path) -> None:
    config = folder / "gitconfig"
    config.write_text("[user]\n\tname = Bench\n\temail = bench@example.com\n[init]\n\tdefaultBranch = main\n")
    os.environ.update({"GIT_CONFIG_GLOBAL": str(config), "GIT_CONFIG_NOSYSTEM": "1"})


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", type=int, default=3000, help="upstream files (default 3000)")
    parser.add_argument("--commits", type=int, default=2000, help="upstream commits (default 2000)")
    parser.add_argument("--consumer-files", type=int, default=2500, help="files per consumer (default 2500)")
    parser.add_argument(
        "--consumer-commits", type=int, default=300, help="commits per consumer (default 300)"
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", type=Path, help="also write the timings here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="forkctl-pins-bench-") as holder:
        folder = Path(holder)
        isolate_git(folder)
        start = time.perf_counter()
        chain = make_chain(folder, args.files, args.commits, args.consumer_files, args.consumer_commits)
        print(f"built the chain in {time.perf_counter() - start:.1f} s", file=sys.stderr)
        results, counts = run_arms(chain, args.runs)
    blobless = statistics.median(results[BLOBLESS])
    print(
        f"\ncheck-pins on upstream {args.files} files / {args.commits} commits, Bridge and NeMo-RL "
        f"{args.consumer_files} files / {args.consumer_commits} commits each; median of {args.runs} runs\n"
    )
    print(
        "| method | median s | min s | max s | ratio to the blobless alternative | objects received "
        "| of which duplicates | git processes |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, seconds in results.items():
        median = statistics.median(seconds)
        got = counts[name]
        calls = got.get("git_processes", "-")
        print(
            f"| {name} | {median:.2f} | {min(seconds):.2f} | {max(seconds):.2f} | {median / blobless:.2f} "
            f"| {got['objects']:,} | {got['duplicates']:,} | {calls} |"
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {"parameters": vars(args) | {"json": str(args.json)}, "seconds": results, "received": counts},
                indent=2,
            )
            + "\n"
        )


CORE_COLD = "forkctl check-pins (core, cold cache)"
CLI_COLD = "forkctl check-pins (CLI process, cold cache)"
CORE_WARM = "forkctl check-pins (core, warm cache)"
CLI_WARM = "forkctl check-pins (CLI process, warm cache)"
FULL = "git clone + submodule update --init --recursive + rev-parse/merge-base"
BLOBLESS = (
    "blobless: clone --filter=blob:none + submodule update --init --recursive --filter=blob:none + same"
)


def run_arms(chain: BenchChain, runs: int) -> tuple[dict[str, list[float]], dict[str, dict[str, int]]]:
    """Time every arm; count what each received (and forkctl core's git processes) on one more run."""
    cache, checkout = chain.folder / "cache", chain.folder / "checkout"
    cold: dict[str, tuple[Callable[[], bool], Path]] = {
        CORE_COLD: (lambda: forkctl_core(chain), cache),
        CLI_COLD: (lambda: forkctl_cli(chain), cache),
        FULL: (lambda: clone_and_compare(chain), checkout),
        BLOBLESS: (lambda: clone_and_compare(chain, blobless=True), checkout),
    }
    results = {name: timed(action, lambda: reset(chain), runs) for name, (action, _) in cold.items()}
    counts: dict[str, dict[str, int]] = {}
    for name, (action, folder) in cold.items():
        reset(chain)
        with GitCalls() as calls:
            action()
        counts[name] = vars(received(packs_under(folder)))
        if name == CORE_COLD:
            counts[name]["git_processes"] = calls.count
    # Warm: the cache a cold run left (re-filled once, untimed); nothing removed between runs.
    reset(chain)
    forkctl_core(chain)
    for name, action in ((CORE_WARM, lambda: forkctl_core(chain)), (CLI_WARM, lambda: forkctl_cli(chain))):
        results[name] = timed(action, lambda: None, runs)
        before = packs_under(cache)
        with GitCalls() as calls:
            action()
        counts[name] = vars(received(packs_under(cache) - before))
        if name == CORE_WARM:
            counts[name]["git_processes"] = calls.count
    order = [CORE_COLD, CLI_COLD, CORE_WARM, CLI_WARM, FULL, BLOBLESS]
    return {name: results[name] for name in order}, counts


if __name__ == "__main__":
    main()
