"""forkctl bump-bridge on a real chain: new branches only, one gitlink each, then check-pins passes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from forkctl.cli import cli
from tests.chain import BRIDGE_GITLINK, NEMO_GITLINK, Chain, make_chain, url
from tests.gitrepos import git


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)


def run(chain: Chain, *args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(cli, ["--manifest", str(chain.manifest), *args, "--json"])
    return result.exit_code, json.loads(result.stdout)


def all_refs(chain: Chain) -> dict[str, dict[str, str]]:
    repos = [chain.bridge, chain.nemo, chain.fork, chain.bridge_work.path, chain.nemo_work.path]
    return {str(path): chain.refs(path) for path in repos}


@pytest.mark.slow
def test_bump_through_nemo_rl_then_check_pins_passes(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    bridge_before, nemo_before = chain.refs(chain.bridge), chain.refs(chain.nemo)
    status_before = [w.git("status", "--porcelain") for w in (chain.bridge_work, chain.nemo_work)]
    index_before = [(w.path / ".git" / "index").read_bytes() for w in (chain.bridge_work, chain.nemo_work)]
    code, report = run(
        chain,
        "bump-bridge",
        "--through",
        "nemo-rl",
        "--bridge-repo",
        str(chain.bridge_work.path),
        "--through-repo",
        str(chain.nemo_work.path),
    )
    assert code == 0, report["problems"]
    branch = f"forkctl/bump-{chain.head[:12]}"
    bridge_step, nemo_step = report["steps"]
    # Bridge: one commit on top of farai/main, gitlink moved, .gitmodules pointed at the fork.
    bridge = chain.bridge_work
    assert bridge.head(f"refs/heads/{branch}") == bridge_step["commit"]
    assert bridge.head(f"{branch}~1") == bridge.head("origin/farai/main")
    assert bridge.git("diff", "--name-only", f"{branch}~1", branch).splitlines() == [
        ".gitmodules",
        BRIDGE_GITLINK,
    ]
    assert bridge.git("rev-parse", f"{branch}:{BRIDGE_GITLINK}") == chain.head
    assert git(
        bridge.path, "config", "--blob", f"{branch}:.gitmodules", f"submodule.{BRIDGE_GITLINK}.url"
    ) == url(chain.fork)
    message = bridge.git("log", "-1", "--format=%B", branch)
    assert chain.base in message and "feat(core): a returns 10" in message
    assert f"{chain.base} -> {chain.head}" in message
    # NeMo-RL: only the Bridge gitlink moves; Automodel/Gym and the shallow/branch settings stay.
    nemo = chain.nemo_work
    assert nemo.git("diff", "--name-only", f"{branch}~1", branch).splitlines() == [NEMO_GITLINK]
    assert nemo.git("rev-parse", f"{branch}:{NEMO_GITLINK}") == bridge_step["commit"]
    assert nemo_step["commit"] == nemo.head(branch)
    assert (
        git(nemo.path, "config", "--blob", f"{branch}:.gitmodules", f"submodule.{NEMO_GITLINK}.shallow")
        == "true"
    )
    # The user's checkouts are untouched: same branch, clean worktree, same index.
    assert bridge.git("symbolic-ref", "--short", "HEAD") == "main"
    assert [w.git("status", "--porcelain") for w in (bridge, nemo)] == status_before
    assert [(w.path / ".git" / "index").read_bytes() for w in (bridge, nemo)] == index_before
    # Without --push nothing reached the remotes, and the report says how to push.
    assert chain.refs(chain.bridge) == bridge_before and chain.refs(chain.nemo) == nemo_before
    assert report["links"][0]["status"] == "OK" and report["links"][1]["status"] == "OK"
    # Pushed by hand, check-pins on the new branches passes (the consumers' branch heads still fail).
    bridge.git("push", "-q", "origin", branch)
    nemo.git("push", "-q", "origin", branch)
    result = CliRunner().invoke(
        cli,
        [
            "--manifest",
            str(chain.manifest),
            "check-pins",
            "--consumer",
            f"{url(chain.bridge)}@{branch}",
            "--consumer",
            f"{url(chain.nemo)}@{branch}",
        ],
    )
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(cli, ["--manifest", str(chain.manifest), "check-pins"])
    assert result.exit_code == 1


def test_dry_run_changes_no_ref(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    before = all_refs(chain)
    code, report = run(
        chain,
        "bump-bridge",
        "--no-gate",
        "--through",
        "nemo-rl",
        "--dry-run",
        "--bridge-repo",
        str(chain.bridge_work.path),
    )
    assert code == 0, report["problems"]
    assert all(not step["created"] for step in report["steps"])
    assert all_refs(chain) == before
    cached = list((tmp_path / "cache").glob("repos/*"))
    assert cached  # the dry run read the consumers through the cache: it must have made no branch there
    for repo in cached:
        assert not [r for r in chain.refs(repo) if r.startswith("refs/heads/forkctl/")], repo


def test_push_pushes_new_branches_only_and_never_forces(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    before = chain.refs(chain.bridge), chain.refs(chain.nemo)
    code, report = run(chain, "bump-bridge", "--no-gate", "--through", "nemo-rl", "--push")
    assert code == 0, report["problems"]
    branch = f"refs/heads/forkctl/bump-{chain.head[:12]}"
    for bare, old, step in zip((chain.bridge, chain.nemo), before, report["steps"], strict=True):
        now = chain.refs(bare)
        assert now[branch] == step["commit"]
        assert {k: v for k, v in now.items() if k != branch} == old  # farai/main and main unmoved
    # The same branch name now exists remotely with other commits: a second bump must not force it.
    chain.pin_bridge(chain.base, files={"newer.txt": "farai/main moved\n"})
    code, again = run(chain, "bump-bridge", "--no-gate", "--push")
    assert code == 2
    assert "failed" in again["error"] or "already exists" in again["error"]
    assert chain.refs(chain.bridge)[branch] == report["steps"][0]["commit"]


def test_refuses_a_fork_commit_that_fails_the_fork_link_check(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    before = all_refs(chain)
    code, report = run(chain, "bump-bridge", "--fork-commit", chain.base)
    assert code == 2
    assert "not the reproducible fork head" in report["error"]
    assert all_refs(chain) == before
    code, report = run(chain, "bump-bridge", "--no-gate", "--fork-commit", chain.head[:12], "--dry-run")
    assert code == 0, report


def test_bump_fails_check_when_the_fork_head_is_not_pushed(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    git(chain.fork, "update-ref", "-d", "refs/heads/farai/main")
    before = all_refs(chain)
    code, report = run(chain, "bump-bridge", "--bridge-repo", str(chain.bridge_work.path))
    assert code == 1
    assert any("not reachable" in p["message"] for p in report["problems"])
    assert all_refs(chain) == before


def test_bridge_repo_alone_commits_in_that_clone_not_in_the_cache(tmp_path: Path) -> None:
    """`--bridge-repo CLONE` without --through: the new branch lands in CLONE (and nowhere else)."""
    chain = make_chain(tmp_path)
    cache = tmp_path / "cache"
    code, report = run(chain, "bump-bridge", "--bridge-repo", str(chain.bridge_work.path))
    assert code == 0, report["problems"]
    branch = f"forkctl/bump-{chain.head[:12]}"
    (step,) = report["steps"]
    assert Path(step["repo"]).resolve() == (chain.bridge_work.path / ".git").resolve()
    assert chain.bridge_work.head(f"refs/heads/{branch}") == step["commit"]
    for repo in cache.glob("repos/*"):  # the Bridge's cache (if any) holds no new branch
        assert not [r for r in chain.refs(repo) if r.startswith("refs/heads/forkctl/")], repo
