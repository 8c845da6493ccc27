"""Publishes at the same moment into one fork and one cache (real processes, a fresh cache each round):
each ends published, up to date, or "moved meanwhile" (exit 1), never bad input from a half-made
cache repository or a fetch that raced another (issue 23)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.chain import Chain, make_chain
from tests.gitrepos import git

CLI = "import sys; from forkctl.cli import main; sys.argv[0] = 'forkctl'; main()"
ROUNDS = 3
RUNS = 4


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parent.parent))


def set_fork(manifest: Path, base: str, **fork: object) -> None:
    data = yaml.safe_load(manifest.read_text())
    data["upstream"]["base"] = base
    data["fork"].update(fork)
    manifest.write_text(yaml.safe_dump(data, sort_keys=False))


def publish_at_once(manifests: list[Path], cache: Path) -> list[tuple[int, dict, str]]:
    """`forkctl publish --json` of each manifest, all started before any is waited for."""
    env = {**os.environ, "FORKCTL_CACHE": str(cache)}
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", CLI, "--manifest", str(manifest), "publish", "--no-gate", "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for manifest in manifests
    ]
    results = []
    for proc in runs:
        out, err = proc.communicate(timeout=300)
        results.append((proc.returncode, json.loads(out) if out.strip() else {}, err))
    return results


def tip(chain: Chain) -> str:
    return git(chain.fork, "rev-parse", "refs/heads/farai/main")


def reset_fork(chain: Chain) -> None:
    git(chain.fork, "update-ref", "refs/heads/farai/main", chain.head)


@pytest.mark.slow
def test_the_same_publish_four_times_at_once_into_a_fresh_cache(tmp_path: Path) -> None:
    """After a port (merge mode: upstream's history and the fork tip are fetched into the cache), four
    identical publishes at once: each says merged or already published, and the branch holds the one
    merge of the new head onto the old tip. Before the fix, processes failed on the cache repository
    that another was creating (`git init`: "could not lock config file") or on a fetch that another
    had made needless ("--unshallow on a complete repository"), with exit 2."""
    chain = make_chain(tmp_path)
    set_fork(chain.manifest, chain.upstream_tip, publish="merge")
    merges = set()
    for round_ in range(ROUNDS):
        reset_fork(chain)
        cache = tmp_path / f"cache-{round_}"
        results = publish_at_once([chain.manifest] * RUNS, cache)
        for code, data, err in results:
            assert code == 0, (data.get("action"), data.get("problems"), err[-2000:])
            assert data["action"] in ("merge", "already-published"), data
        assert sum(data["action"] == "merge" for _, data, _ in results) >= 1
        merge = tip(chain)
        assert git(chain.fork, "log", "-1", "--format=%P", merge).split()[0] == chain.head
        merges.add(merge)
        shutil.rmtree(cache)
    assert len(merges) == 1  # the same inputs made the same merge every round


def assert_lost(data: dict, *, older_base: bool) -> None:
    """A publish that exited 1 lost to another: the branch moved between its look and its push, or, for the
    toolkit on the older base, the other's merge had already landed, so publishing would go backwards."""
    errors = [p["message"] for p in data["problems"] if p["level"] == "error"]
    if data["action"] == "backwards":
        assert older_base, data  # only a newer base on the branch makes a plan go backwards
        assert "nothing was pushed" in errors[0] and "--allow-backwards" in data["problems"][0]["hint"], (
            errors
        )
        return
    assert data["action"] == "moved" and "moved meanwhile" in errors[0], data


@pytest.mark.slow
def test_two_different_series_published_at_once_one_wins_the_other_is_told_it_moved(tmp_path: Path) -> None:
    """Two toolkits (another base each) publish into the same fork branch through one cache: one
    pushes; the other finds the branch moved (exit 1, 'moved meanwhile'), already holding its merge or,
    for the older base once the newer one landed, refuses to go backwards; no run says its base is missing
    or fails on the cache. Round 0 publishes one after the other, the order in which the older base is
    always refused as backwards (before this round, CI once met that order by chance and the test failed)."""
    chain = make_chain(tmp_path)
    other = tmp_path / "toolkit-2"
    shutil.copytree(chain.toolkit, other)
    second = other / chain.manifest.relative_to(chain.toolkit)
    set_fork(chain.manifest, chain.upstream_tip, publish="merge")
    set_fork(second, git(chain.upstream, "rev-parse", f"{chain.upstream_tip}~1"), publish="merge")
    reset_fork(chain)
    newer = publish_at_once([chain.manifest], tmp_path / "cache-sequential")
    older = publish_at_once([second], tmp_path / "cache-sequential")
    assert [code for code, _, _ in newer + older] == [0, 1], newer + older
    assert_lost(older[0][1], older_base=True)
    assert older[0][1]["action"] == "backwards"
    for round_ in range(ROUNDS):
        reset_fork(chain)
        cache = tmp_path / f"cache-{round_}"
        manifests = [chain.manifest, second, chain.manifest, second]
        results = publish_at_once(manifests, cache)
        for manifest, (code, data, err) in zip(manifests, results, strict=True):
            assert code in (0, 1), (data, err[-2000:])
            if code == 1:
                assert_lost(data, older_base=manifest == second)
        pushed = [data for code, data, _ in results if code == 0 and data["action"] == "merge"]
        assert pushed, results
        assert tip(chain) in {data["tip"] for data in pushed}
        shutil.rmtree(cache)


@pytest.mark.slow
def test_a_cache_repository_a_killed_git_init_left_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder without HEAD where the cache keeps upstream's repository (a first run killed inside
    `git init`): publishes at once replace it with a whole repository, none fails."""
    from forkctl.git.clonecache import cache_path
    from tests.chain import url

    chain = make_chain(tmp_path)
    set_fork(chain.manifest, chain.upstream_tip, publish="merge")
    cache = tmp_path / "cache"
    monkeypatch.setenv("FORKCTL_CACHE", str(cache))
    partial = cache_path(url(chain.upstream))
    (partial / "objects").mkdir(parents=True)
    (partial / "config").write_text("[core]\n\tbare = true\n")
    results = publish_at_once([chain.manifest] * 2, cache)
    for code, data, err in results:
        assert code == 0, (data.get("problems"), err[-2000:])
    assert (partial / "HEAD").is_file()
    assert sorted(p.name for p in partial.parent.iterdir() if p.name.startswith(partial.name)) == [
        partial.name,
        f"{partial.name}.lock",
    ]
