"""check-pins and bump-bridge with a merge-only fork (fork.publish: merge): the published merge of the fork
head passes as the fork head, a merge with another tree or without the head does not, and bump-bridge
pins the published merge."""

from __future__ import annotations

from pathlib import Path

import pytest

from forkctl.git import GitRepo
from tests.chain import BRIDGE_GITLINK, Chain, make_chain, url
from tests.gitrepos import git
from tests.test_publish import WHO, commit, ported, run, set_fork, tip


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)


def _pin_chain(chain: Chain, sha: str) -> None:
    chain.pin_nemo(chain.pin_bridge(sha, url(chain.fork)))


def test_check_pins_accepts_the_published_merge(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    ported(chain)
    assert run(chain, "publish")[0] == 0
    merge = tip(chain)
    _pin_chain(chain, merge)  # type: ignore[arg-type]
    code, report = run(chain, "check-pins")
    assert code == 0, report["problems"]
    finding = next(f for f in report["links"][0]["findings"] if f["check"] == "pin")
    assert finding["kind"] == "published-merge" and merge[:12] in finding["message"]  # type: ignore[index]
    assert report["fork_branch"][0]["kind"] == "ok"


def test_check_pins_refuses_a_merge_with_another_tree_or_without_the_head(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    head = ported(chain)
    fork = GitRepo(chain.fork)
    git(chain.fork, "fetch", "-q", url(chain.upstream), f"{head}:refs/heads/farai/new")
    old_tree, head_tree = commit(chain.fork, chain.head)[0], commit(chain.fork, head)[0]
    other_tree = fork.commit_tree(old_tree, [chain.head, head], "a merge that keeps the old tree\n", WHO)
    no_head = fork.commit_tree(head_tree, [chain.head, chain.upstream_tip], "R's tree, not R\n", WHO)
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


def test_bump_bridge_in_merge_mode_pins_the_published_merge(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    head = ported(chain)
    assert run(chain, "publish")[0] == 0
    merge = tip(chain)
    code, report = run(chain, "bump-bridge", "--bridge-repo", str(chain.bridge_work.path))
    assert code == 0, report["problems"]
    assert report["steps"][0]["new"] == merge
    branch = report["steps"][0]["branch"]
    assert chain.bridge_work.git("rev-parse", f"{branch}:{BRIDGE_GITLINK}") == merge
    # In rebuild mode the default stays the reproducible head itself.
    set_fork(chain, publish="rebuild")
    code, report = run(chain, "bump-bridge", "--dry-run", "--bridge-repo", str(chain.bridge_work.path))
    assert code == 0 and report["steps"][0]["new"] == head
