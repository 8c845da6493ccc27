"""A cold check-pins downloads each tree once and starts few git processes: on a chain shaped like the
real one (the fork URL is upstream's, the Bridge's branch pins an upstream commit, NeMo-RL pins an
older Bridge commit that pins another), no tree is an entry of two packs of the cache (git keeps one
pack per fetch) and nothing is received twice into one repository."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests import budget
from tests.chain import Chain, check_pins_json, make_chain, url, use_private_cache
from tests.gitrepos import git
from tests.gitshim import Trace2

ROOT = Path(__file__).resolve().parent.parent
CHECK_PINS = (
    "check-pins on the real chain: 1.12 s cold and 0.24 s warm against 5.04 s for blobless clones, targets "
    "ratios of 0.3 and 0.1 (bench/check_pins_real.py, 2026-11-30; README, CPU benchmarks)"
)


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_private_cache(tmp_path, monkeypatch)


check = check_pins_json


def pack_entries(cache: Path) -> dict[str, list[str]]:
    """{object: the cache repositories whose packs hold it, once per pack} (`git verify-pack -v` of
    every pack index; git keeps one pack per fetch in a partial clone)."""
    holders: dict[str, list[str]] = {}
    for idx in sorted(cache.rglob("objects/pack/*.idx")):
        for line in git(idx.parent, "verify-pack", "-v", str(idx)).splitlines():
            fields = line.split()
            if len(fields) >= 5 and len(fields[0]) == 40:
                holders.setdefault(fields[0], []).append(idx.parent.parent.parent.name)
    return holders


def real_shaped(tmp_path: Path) -> tuple[Chain, str]:
    """The real chain's shape: fork URL = upstream URL; the Bridge branch pins upstream's tip, NeMo-RL
    pins the Bridge commit before it (which pins the upstream commit before the tip). Returns the
    chain and that older Bridge commit."""
    chain = make_chain(tmp_path)
    data = yaml.safe_load(chain.manifest.read_text())
    data["fork"]["url"] = url(chain.upstream)
    chain.manifest.write_text(yaml.safe_dump(data, sort_keys=False))
    before_tip = git(chain.upstream, "rev-parse", f"{chain.upstream_tip}~1")
    older = chain.pin_bridge(before_tip, files={"src/bridge/older.py": "O = 1\n"})
    chain.pin_bridge(chain.upstream_tip, files={"src/bridge/newer.py": "N = 1\n"})
    chain.pin_nemo(older)
    return chain, older


@pytest.mark.budget(
    "objects check-pins receives from an empty cache on the real chain: 2,659, 5 of them twice, target none "
    "twice (bench/check_pins_real.py, 2026-11-30; README, CPU benchmarks)"
)
@pytest.mark.slow
def test_a_cold_check_of_the_real_shaped_chain_receives_no_object_twice(tmp_path: Path) -> None:
    chain, older = real_shaped(tmp_path)
    code, report = check(chain)
    assert code == 1  # the Bridge pins plain upstream, as the real one does
    kinds = {(link["consumer"], f["kind"]) for link in report["links"] for f in link["findings"]}
    assert ("megatron-bridge", "unpatched-upstream") in kinds
    assert any(link["commit"] == older for link in report["links"])
    holders = pack_entries(tmp_path / "cache")
    assert holders, "nothing was fetched"
    twice = {name: repos for name, repos in holders.items() if len(repos) > 1}
    # No tree twice, nothing twice into one repository. What remains: a commit read for its trees (the
    # tree cache) that comes again with its URL's commit graph (one commit object per such pin; see
    # forkctl/git/clonecache.py _graph_fetch for why that is kept).
    kinds = dict(
        line.split()
        for line in git(
            chain.bridge, "cat-file", "--batch-check=%(objectname) %(objecttype)", "--batch-all-objects"
        ).splitlines()
    )
    kinds |= dict(
        line.split()
        for line in git(
            chain.upstream, "cat-file", "--batch-check=%(objectname) %(objecttype)", "--batch-all-objects"
        ).splitlines()
    )
    budget.none_of(
        "objects other than commits received twice",
        {
            f"{kinds.get(name)} {name}: {repos}"
            for name, repos in twice.items()
            if kinds.get(name) != "commit"
        },
    )
    budget.none_of(
        "commits received twice other than into a cache repository and its commit graph",
        {
            f"{name}: {repos}"
            for name, repos in twice.items()
            if sorted(repos) != _tree_cache_and_graph(repos)
        },
    )
    # the base, the Bridge's branch tip and the commit NeMo-RL pins
    budget.at_most("objects received twice", len(twice), 3, twice)


def _tree_cache_and_graph(repos: list[str]) -> list[str]:
    name = repos[0].removesuffix("-graph.git")
    return sorted([name + ".git", name + "-graph.git"])


def git_processes(tmp_path: Path, chain: Chain) -> int:
    return len(git_argvs(tmp_path, chain))


def git_argvs(tmp_path: Path, chain: Chain) -> list[list[str]]:
    """The git processes forkctl starts for one check-pins (git's own children not counted), read
    from git's trace2 events (a global config file that names the event target). Each check runs in
    a process of its own, as a user's does: what one run remembers must not make the next look cheap."""
    trace = Trace2(tmp_path, str(len(list(tmp_path.glob("trace2-*")))))
    env = {**os.environ, **trace.env, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "forkctl", "--manifest", str(chain.manifest), "check-pins", "--json"]
    done = subprocess.run(argv, env=env, capture_output=True, check=False)
    assert done.returncode == 1, done.stderr  # the Bridge pins plain upstream
    return trace.argvs()


@pytest.mark.budget(CHECK_PINS)
def test_cold_and_warm_checks_start_few_git_processes(tmp_path: Path) -> None:
    chain, _ = real_shaped(tmp_path)
    cold = git_processes(tmp_path, chain)
    warm = git_processes(tmp_path, chain)
    # Before: 129 cold (eight `git config` per cache repository, one fetch per commit) and 29 warm
    # (counted in one process with the cold run; 34 in a process of its own, as here).
    budget.at_most("git processes of a cold check-pins", cold, 85)
    budget.at_most("git processes of a warm check-pins", warm, 11)


@pytest.mark.slow
@pytest.mark.budget(CHECK_PINS)
def test_each_gitmodules_blob_is_parsed_once_and_existence_asked_in_batches(tmp_path: Path) -> None:
    chain, _ = real_shaped(tmp_path)
    cold = git_argvs(tmp_path, chain)
    warm = git_argvs(tmp_path, chain)
    parsed = [argv[argv.index("--blob") + 1] for argv in cold if "--blob" in argv]
    # The Bridge's branch tip and the older commit NeMo-RL pins hold the same .gitmodules blob: before,
    # it was parsed twice a run (3 `config --blob` for 2 blobs). A warm run reads what the cold one
    # recorded (git/facts.py) and parses none.
    assert len(set(parsed)) == 2, parsed  # both blobs are read
    budget.at_most("`git config --blob` parses of 2 .gitmodules blobs, cold", len(parsed), 2, parsed)
    budget.none_of("`git config --blob` parses, warm", {" ".join(argv) for argv in warm if "--blob" in argv})
    # Which objects are here is asked in one batch per repository: the base and the built fork head
    # together, each consumer's commits together (before: 4 batches and 3 `cat-file -e`, plus 2
    # `rev-parse`, in those repositories).
    trees = [
        argv
        for argv in warm
        if "--git-dir" in argv and not argv[argv.index("--git-dir") + 1].endswith("-graph.git")
    ]
    batches = [argv for argv in trees if any(arg.startswith("--batch-check") for arg in argv)]
    budget.at_most("`cat-file --batch-check` runs of a warm check-pins", len(batches), 3, batches)
    budget.none_of(
        "single-object questions (`cat-file -e`, `rev-parse`) of a warm check-pins",
        {" ".join(argv) for argv in trees if "-e" in argv or "rev-parse" in argv},
    )


@pytest.mark.slow
def test_a_second_check_in_one_process_asks_git_what_a_new_process_asks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What one command learnt (objects present, branch tips held, parsed `.gitmodules`) is kept for
    that command only: a tool that runs check-pins twice in one process gets the second answer from
    the disk and the servers, as a new process would, not from the first run's memory."""
    chain, _ = real_shaped(tmp_path)
    git_argvs(tmp_path, chain)  # cold, in a process of its own
    in_a_new_process = git_argvs(tmp_path, chain)
    seen = []
    for run in ("first", "second"):
        trace = Trace2(tmp_path, f"in-process-{run}")
        monkeypatch.setenv("GIT_CONFIG_GLOBAL", trace.env["GIT_CONFIG_GLOBAL"])
        code, _report = check(chain)
        assert code == 1  # the Bridge pins plain upstream
        seen.append(trace.argvs())
    assert seen[1] == seen[0] == in_a_new_process
