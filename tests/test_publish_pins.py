"""check-pins and bump-bridge with a merge-only fork (fork.publish: merge): the published merge of the fork
head passes as the fork head, a merge with another tree or without the head does not, and bump-bridge
pins the published merge."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from forkctl.git.repo import GitRepo
from tests.chain import BRIDGE_GITLINK, Chain, make_chain, url
from tests.gitrepos import git
from tests.test_publish import (
    WHO,
    changed,
    commit,
    fork_base_record,
    on_tip,
    ported,
    run,
    set_fork,
    tip,
)


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)


def _pin_chain(chain: Chain, sha: str) -> None:
    chain.pin_nemo(chain.pin_bridge(sha, url(chain.fork)))


@pytest.mark.slow
def test_check_pins_accepts_the_published_merge(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    ported(chain)
    assert run(chain, "publish", "--no-gate")[0] == 0
    merge = tip(chain)
    _pin_chain(chain, merge)  # type: ignore[arg-type]
    code, report = run(chain, "check-pins")
    assert code == 0, report["problems"]
    finding = next(f for f in report["links"][0]["findings"] if f["check"] == "pin")
    assert finding["kind"] == "published-merge" and merge[:12] in finding["message"]  # type: ignore[index]
    assert report["fork_branch"][0]["kind"] == "ok"


@pytest.mark.slow
def test_check_pins_refuses_a_merge_with_another_tree_or_without_the_head(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    head = ported(chain)
    fork = GitRepo(chain.fork)
    git(chain.fork, "fetch", "-q", url(chain.upstream), f"{head}:refs/heads/farai/new")
    old_tree, head_tree = commit(chain.fork, chain.head)[0], commit(chain.fork, head)[0]
    other_tree = fork.commits.commit_tree(
        old_tree, [chain.head, head], "a merge that keeps the old tree\n", WHO
    )
    no_head = fork.commits.commit_tree(head_tree, [chain.head, chain.upstream_tip], "R's tree, not R\n", WHO)
    for name, sha in (("other-tree", other_tree), ("no-head", no_head)):
        git(chain.fork, "update-ref", f"refs/heads/{name}", sha)
    _pin_chain(chain, other_tree)
    code, report = run(chain, "check-pins")
    assert code == 1
    bridge = report["links"][0]["findings"]
    assert [f["kind"] for f in bridge if f["status"] != "OK"] == ["publish-merge-tree"]
    _pin_chain(chain, no_head)
    code, report = run(chain, "check-pins")
    assert code == 1
    bridge = report["links"][0]["findings"]
    assert "publish-merge-parents" in [f["kind"] for f in bridge if f["status"] != "OK"]


@pytest.mark.slow
def test_bump_bridge_in_merge_mode_pins_the_published_merge(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    head = ported(chain)
    assert run(chain, "publish", "--no-gate")[0] == 0
    merge = tip(chain)
    code, report = run(chain, "bump-bridge", "--bridge-repo", str(chain.bridge_work.path))
    assert code == 0, report["problems"]
    assert report["steps"][0]["new"] == merge
    branch = report["steps"][0]["branch"]
    assert chain.bridge_work.git("rev-parse", f"{branch}:{BRIDGE_GITLINK}") == merge
    # In rebuild mode the default stays the reproducible head itself.
    set_fork(chain, publish="rebuild")
    code, report = run(
        chain, "bump-bridge", "--no-gate", "--dry-run", "--bridge-repo", str(chain.bridge_work.path)
    )
    assert code == 0 and report["steps"][0]["new"] == head


def with_files(
    bare: Path, commit_sha: str, files: dict[str, str], parents: list[str], mode: str = "100644"
) -> str:
    """A merge made by hand: `commit_sha`'s tree with `files` written over it (as `mode`: 120000 makes
    each a symbolic link whose target is its text), the given parents."""
    index = {"GIT_INDEX_FILE": str(bare / "hand-index"), "PATH": os.environ["PATH"]}
    git(bare, "read-tree", commit_sha, env=index)
    for path, text in files.items():
        blob = git(bare, "hash-object", "-w", "--stdin", input=text.encode())
        git(bare, "update-index", "--add", "--cacheinfo", f"{mode},{blob},{path}", env=index)
    tree = git(bare, "write-tree", env=index)
    return GitRepo(bare).commits.commit_tree(tree, parents, "a merge made by hand\n", WHO)


@pytest.mark.slow
def test_check_pins_accepts_the_published_merge_carrying_the_forks_own_files(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    old_tip = on_tip(chain, "fork: record the base", {".fork-base.json": fork_base_record(chain.base)})
    head = ported(chain)
    assert run(chain, "publish", "--no-gate")[0] == 0
    merge = tip(chain)
    assert changed(chain.fork, head, merge) == [".fork-base.json"]  # type: ignore[arg-type]
    _pin_chain(chain, merge)  # type: ignore[arg-type]
    code, report = run(chain, "check-pins")
    assert code == 0, report["problems"]
    finding = next(f for f in report["links"][0]["findings"] if f["check"] == "pin")
    assert finding["kind"] == "published-merge" and "own files" in finding["message"]
    assert report["fork_branch"][0]["kind"] == "ok"
    assert [n["kind"] for n in report["fork_branch"] if n["check"] == "fork-base"] == ["ok"]
    # The same shape made by hand (not by publish) passes too: the check is about the tree, not the maker.
    record = fork_base_record(chain.upstream_tip)
    by_hand = with_files(chain.fork, head, {".fork-base.json": record}, [old_tip, head])
    git(chain.fork, "update-ref", "refs/heads/by-hand", by_hand)
    _pin_chain(chain, by_hand)
    assert run(chain, "check-pins")[0] == 0
    # A file the manifest names under fork.own_paths, committed on the published tip: published again.
    set_fork(chain, own_paths=[".fork-base.json", "docs/fork/**"])
    on_tip(chain, "fork: our docs", {"docs/fork/README.md": "FAR.AI fork\n"})
    assert run(chain, "publish", "--no-gate")[0] == 0
    again = tip(chain)
    assert changed(chain.fork, head, again) == [".fork-base.json", "docs/fork/README.md"]  # type: ignore[arg-type]
    _pin_chain(chain, again)  # type: ignore[arg-type]
    code, report = run(chain, "check-pins")
    assert code == 0, report["problems"]


@pytest.mark.slow
def test_check_pins_flags_a_merge_carrying_anything_else(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    old_tip = on_tip(chain, "fork: record the base", {".fork-base.json": fork_base_record(chain.base)})
    head = ported(chain)
    git(chain.fork, "fetch", "-q", url(chain.upstream), f"{head}:refs/heads/farai/new")
    record = fork_base_record(chain.upstream_tip)  # what publish writes there
    hotfix = {".fork-base.json": record, "megatron/core/b.py": "def b():\n    return 3\n"}
    stale = {".fork-base.json": fork_base_record(chain.base)}  # the old tip's file, not rewritten
    for name, files in (("hotfix", hotfix), ("stale-fork-base", stale)):
        sha = with_files(chain.fork, head, files, [old_tip, head])
        git(chain.fork, "update-ref", f"refs/heads/{name}", sha)
        _pin_chain(chain, sha)
        code, report = run(chain, "check-pins")
        assert code == 1, name
        bad = [f for f in report["links"][0]["findings"] if f["status"] != "OK"]
        assert [f["kind"] for f in bad] == ["publish-merge-tree"], name
        said = bad[0]["message"]
        if name == "hotfix":
            assert "megatron/core/b.py" in said and ".fork-base.json" not in said
        else:
            assert ".fork-base.json" in said
