"""check-pins and bump-bridge read commits and trees, never file contents: no blob is fetched beyond the
few whose contents the check needs, and a warm cache answers with every server gone (telling that they
are gone: a fresh clone would fail)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from forkctl.cli import cli
from forkctl.series import parse_patch
from tests.chain import NEMO_GITLINK, Chain, make_chain, make_fixed_chain
from tests.gitrepos import git


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)


def forkctl(chain: Chain, *args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(cli, ["--manifest", str(chain.manifest), *args, "--json"])
    return result.exit_code, json.loads(result.stdout)


def servers(chain: Chain) -> list[Path]:
    """Every bare remote the chain's manifest and .gitmodules name."""
    others = [chain.tmp / "automodel.git", chain.tmp / "gym.git"]
    return [chain.upstream, chain.fork, chain.bridge, chain.bridge_upstream, chain.nemo, *others]


def take_servers_away(chain: Chain) -> None:
    for bare in servers(chain):
        bare.rename(bare.with_name(bare.name + ".gone"))


def bring_servers_back(chain: Chain) -> None:
    for bare in servers(chain):
        bare.with_name(bare.name + ".gone").rename(bare)


def failure_kinds(report: dict) -> list[tuple[str, str, list[str]]]:
    return [
        (link["consumer"], link["commit"], sorted(f["kind"] for f in link["findings"] if f["status"] != "OK"))
        for link in report["links"]
    ]


def cache_blobs(cache: Path) -> set[str]:
    """Every blob object stored in the cache's repositories (their own object stores)."""
    blobs: set[str] = set()
    for repo in (cache / "repos").glob("*.git"):
        out = git(repo, "cat-file", "--batch-all-objects", "--batch-check=%(objecttype) %(objectname)")
        blobs |= {line.split()[1] for line in out.splitlines() if line.startswith("blob ")}
    return blobs


def blobs_at(bare: Path, commit: str, paths: list[str]) -> set[str]:
    out = git(bare, "ls-tree", "-r", "--full-tree", commit, "--", *paths)
    return {line.split()[2] for line in out.splitlines() if line.split()[1] == "blob"}


@pytest.mark.slow
def test_warm_cache_checks_with_every_server_gone_and_says_they_are_gone(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)  # the Bridge pins the plain upstream base: check-pins finds problems
    code, cold = forkctl(chain, "check-pins")
    assert code == 1, cold
    code, planned = forkctl(chain, "bump-bridge", "--no-gate", "--through", "nemo-rl", "--dry-run")
    assert code == 0, planned["problems"]

    take_servers_away(chain)
    code, warm = forkctl(chain, "check-pins")
    assert code == 1, warm
    # The same findings, read from the cache, and on every link one more: the URL of its pin does not
    # answer now, so a fresh clone would fail (a recorded listing speeds a check up, it never passes one).
    # A branch read from its recorded listing says so too (its tip may have moved meanwhile).
    recorded = [["branch-recorded"] if link["role"].startswith("branch ") else [] for link in cold["links"]]
    assert failure_kinds(warm) == [
        (consumer, commit, sorted([*found, "cannot-reach", *more]))
        for (consumer, commit, found), more in zip(failure_kinds(cold), recorded, strict=True)
    ]
    # The bump is planned from the cache, but its re-check refuses it: the branches would pin a fork
    # that a fresh clone cannot fetch now. No branch is created.
    code, refused = forkctl(chain, "bump-bridge", "--through", "nemo-rl")
    assert code == 1, refused
    assert "cannot reach" in json.dumps(refused["problems"]), refused["problems"]
    assert not any(step.get("created") for step in refused.get("steps", [])), refused["steps"]
    bring_servers_back(chain)
    code, bumped = forkctl(chain, "bump-bridge", "--through", "nemo-rl")
    assert code == 0, bumped
    assert [step["created"] for step in bumped["steps"]] == [True, True]
    # The changes planned with the servers there: only the gitlinks (and the Bridge's .gitmodules) moved,
    # the Bridge to the same tree (NeMo-RL's differs by the new Bridge commit's SHA, which has a date).
    for plan, step in zip(planned["steps"], bumped["steps"], strict=True):
        changed = [
            git(Path(s["repo"]), "diff-tree", "--name-only", "--no-commit-id", s["parent"], s["commit"])
            for s in (plan, step)
        ]
        assert changed[0] == changed[1] and changed[1]
    bridge_steps = (planned["steps"][0], bumped["steps"][0])
    trees = [git(Path(s["repo"]), "rev-parse", f"{s['commit']}^{{tree}}") for s in bridge_steps]
    assert trees[0] == trees[1]
    nemo_step = bumped["steps"][1]
    pinned = git(Path(nemo_step["repo"]), "rev-parse", f"{nemo_step['commit']}:{NEMO_GITLINK}")
    assert pinned == bumped["steps"][0]["commit"]


def test_a_cold_check_fetches_only_the_blobs_it_reads(tmp_path: Path) -> None:
    """The blobs a pin check needs are the consumers' .gitmodules (submodule URLs) and, to rebuild the
    fork head, the series' files at the base (`git apply` needs their old contents) with what the
    patches make of them. No other file of upstream or of a consumer is fetched."""
    chain = make_fixed_chain(tmp_path)
    code, report = forkctl(chain, "check-pins")
    assert code == 0, report["problems"]
    series = [parse_patch(path) for path in chain.patches]
    touched = sorted({path for patch in series for path in patch.paths})
    fork_commits = git(chain.fork, "rev-list", f"{chain.base}^..{chain.head}").split()
    needed = set().union(*(blobs_at(chain.fork, commit, touched) for commit in fork_commits))
    checked = [(chain.bridge, link["commit"]) for link in report["links"] if link["consumer"] != "nemo-rl"]
    checked += [(chain.nemo, link["commit"]) for link in report["links"] if link["consumer"] == "nemo-rl"]
    gitmodules = set().union(*(blobs_at(bare, commit, [".gitmodules"]) for bare, commit in checked))
    assert len(gitmodules) == 2  # one .gitmodules per consumer commit checked
    fetched = cache_blobs(tmp_path / "cache")
    assert fetched <= needed | gitmodules, sorted(fetched - needed - gitmodules)
    every_file = set().union(
        *(blobs_at(bare, "HEAD", []) for bare in (chain.upstream, chain.bridge, chain.nemo))
    )
    assert len(every_file - needed - gitmodules) >= 8  # there were other files to fetch, and none came
