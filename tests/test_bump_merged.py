"""bump-bridge follows the consumer's merge (issue 32, item 2): once the Bridge has merged a bump pull
request (squash, rebase or merge commit; its branch deleted or not), `bump-bridge --through nemo-rl`
pins NeMo-RL at the Bridge branch commit that now pins the fork head: no new Bridge commit or branch,
never an empty commit, and NeMo-RL's bump branch moves forward only (never forced).

Real repositories (tests/chain.py), the real CLI in process, a private cache per test. The Bridge's
merge is done as GitHub does it, with git in a maintainer's clone of the Bridge fork.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chain import BRIDGE_GITLINK, DATE, NEMO_GITLINK, Chain, forkctl_json, make_chain, use_private_cache
from tests.gitrepos import git


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_private_cache(tmp_path, monkeypatch)


run = forkctl_json
FARAI = "refs/heads/farai/main"


def _maintainer(chain: Chain) -> Path:
    """A clone of the Bridge fork, as the maintainer who merges pull requests has it."""
    path = chain.tmp / "bridge-maintainer"
    git(chain.tmp, "clone", "-q", chain.bridge.as_uri(), str(path))
    git(path, "config", "user.name", "Bridge Maintainer")
    git(path, "config", "user.email", "maintainer@example.invalid")
    return path


def merge_on_the_bridge(chain: Chain, branch: str, how: str, delete: bool) -> str:
    """Merge the pushed bump `branch` into the Bridge fork's farai/main the way GitHub's `how` button
    does (farai/main has moved on by one commit first), optionally deleting the branch: the new tip."""
    work = _maintainer(chain)
    git(work, "checkout", "-q", "-b", "farai/main", "origin/farai/main")
    (work / "src/bridge/later.py").write_text("L = 1\n")
    git(work, "add", "src/bridge/later.py")
    git(work, "commit", "-q", "-m", "bridge: a later change (#11)", "--date", DATE)
    if how == "squash":
        git(work, "merge", "-q", "--squash", f"origin/{branch}")
        git(work, "commit", "-q", "-m", "build: pin megatron at the fork head (#12)")
    elif how == "rebase":
        git(work, "checkout", "-q", "-b", "rebased", f"origin/{branch}")
        git(work, "rebase", "-q", "farai/main")
        git(work, "checkout", "-q", "farai/main")
        git(work, "merge", "-q", "--ff-only", "rebased")
    else:
        git(work, "merge", "-q", "--no-ff", "-m", f"Merge pull request #12 from {branch}", f"origin/{branch}")
    git(work, "push", "-q", "origin", "farai/main")
    if delete:
        git(work, "push", "-q", "origin", "--delete", branch)
    return git(work, "rev-parse", "HEAD")


def _gitlink(bare: Path, commit: str, path: str) -> str:
    return git(bare, "rev-parse", f"{commit}:{path}")


@pytest.mark.parametrize(
    ("how", "delete"), [("squash", True), ("rebase", True), ("merge", False), ("squash", False)]
)
@pytest.mark.slow
def test_nemo_rl_follows_the_bridges_merge_of_the_bump(tmp_path: Path, how: str, delete: bool) -> None:
    chain = make_chain(tmp_path)
    branch = f"forkctl/bump-{chain.head[:12]}"
    ref = f"refs/heads/{branch}"
    code, first = run(chain, "bump-bridge", "--no-gate", "--through", "nemo-rl", "--push")
    assert code == 0, first["problems"]
    stranded_bridge, first_nemo = first["steps"][0]["commit"], first["steps"][1]["commit"]
    merged = merge_on_the_bridge(chain, branch, how, delete)
    assert _gitlink(chain.bridge, merged, BRIDGE_GITLINK) == chain.head
    bridge_before = chain.refs(chain.bridge)

    code, report = run(chain, "bump-bridge", "--no-gate", "--through", "nemo-rl", "--push")
    assert code == 0, report.get("problems") or report.get("error")
    bridge_step, nemo_step = report["steps"]
    # The Bridge: already done on farai/main; no commit made, no branch created or pushed.
    assert bridge_step["commit"] == merged and bridge_step["done"]
    assert chain.refs(chain.bridge) == bridge_before
    # NeMo-RL pins the merged Bridge commit; its bump branch moved forward (the stranded one is kept in
    # its history), and the new commit changes the gitlink only: never an empty commit.
    nemo_tip = chain.refs(chain.nemo)[ref]
    assert nemo_tip == nemo_step["commit"] != first_nemo
    assert _gitlink(chain.nemo, nemo_tip, NEMO_GITLINK) == merged
    git(chain.nemo, "merge-base", "--is-ancestor", first_nemo, nemo_tip)
    assert git(chain.nemo, "diff", "--name-only", f"{nemo_tip}~1", nemo_tip).splitlines() == [NEMO_GITLINK]
    assert _gitlink(chain.nemo, first_nemo, NEMO_GITLINK) == stranded_bridge
    # check-pins agrees: the NeMo-RL bump branch pins a Bridge commit a fresh clone can fetch.
    nemo_branch = f"{chain.nemo.as_uri()}@{branch}"
    code, check = run(chain, "check-pins", "--consumer", chain.bridge.as_uri(), "--consumer", nemo_branch)
    assert code == 0, check["problems"]

    # A rerun finds everything already there and changes nothing.
    refs_before = chain.refs(chain.bridge), chain.refs(chain.nemo)
    code, again = run(chain, "bump-bridge", "--no-gate", "--through", "nemo-rl", "--push")
    assert code == 0, again.get("problems") or again.get("error")
    assert [step["commit"] for step in again["steps"]] == [merged, nemo_tip]
    assert again["steps"][1]["push"] == "already there"
    assert (chain.refs(chain.bridge), chain.refs(chain.nemo)) == refs_before


def test_a_fresh_nemo_rl_bump_pins_the_merged_bridge_commit(tmp_path: Path) -> None:
    """The Bridge alone was bumped and squash-merged (its branch deleted, the cache still holding it):
    `--through nemo-rl` makes one NeMo-RL commit on farai/main pinning the merged commit, no Bridge step."""
    chain = make_chain(tmp_path)
    branch = f"forkctl/bump-{chain.head[:12]}"
    code, first = run(chain, "bump-bridge", "--no-gate", "--push")
    assert code == 0, first["problems"]
    merged = merge_on_the_bridge(chain, branch, "squash", delete=True)
    bridge_before = chain.refs(chain.bridge)
    code, report = run(chain, "bump-bridge", "--no-gate", "--through", "nemo-rl", "--push")
    assert code == 0, report.get("problems") or report.get("error")
    bridge_step, nemo_step = report["steps"]
    assert bridge_step["done"] and bridge_step["commit"] == merged
    assert chain.refs(chain.bridge) == bridge_before  # the deleted branch stays deleted
    nemo_tip = chain.refs(chain.nemo)[f"refs/heads/{branch}"]
    assert nemo_tip == nemo_step["commit"]
    assert git(chain.nemo, "rev-parse", f"{nemo_tip}~1") == chain.refs(chain.nemo)[FARAI]
    assert _gitlink(chain.nemo, nemo_tip, NEMO_GITLINK) == merged


def test_a_stranded_pin_names_the_bump_that_follows_the_merge(tmp_path: Path) -> None:
    """check-pins on NeMo-RL's old bump branch: its Bridge pin is reachable from no branch any more (the
    squash merge deleted it); the finding's fix is the bump that pins the merged commit, not a hand
    edit inside forkctl's cache."""
    chain = make_chain(tmp_path)
    branch = f"forkctl/bump-{chain.head[:12]}"
    code, first = run(chain, "bump-bridge", "--no-gate", "--through", "nemo-rl", "--push")
    assert code == 0, first["problems"]
    merge_on_the_bridge(chain, branch, "squash", delete=True)
    nemo_branch = f"{chain.nemo.as_uri()}@{branch}"
    code, check = run(chain, "check-pins", "--consumer", chain.bridge.as_uri(), "--consumer", nemo_branch)
    assert code == 1, check
    stranded = next(p for p in check["problems"] if first["steps"][0]["commit"][:12] in p["message"])
    assert "forkctl bump-bridge --through nemo-rl" in (stranded["hint"] or "")
    assert str(tmp_path / "cache") not in str(check)


def test_a_bump_branch_from_an_older_consumer_head_is_refused_with_a_fix_outside_the_cache(
    tmp_path: Path,
) -> None:
    """The Bridge's farai/main moved on after the bump branch was pushed, and the branch was not merged:
    the branch is not built on farai/main, so forkctl neither forces it nor adopts it (exit 2, nothing
    moved), and the way forward names the URL's branch, never a command inside forkctl's cache."""
    chain = make_chain(tmp_path)
    branch = f"forkctl/bump-{chain.head[:12]}"
    code, first = run(chain, "bump-bridge", "--no-gate", "--push")
    assert code == 0, first["problems"]
    chain.pin_bridge(chain.base, files={"newer.txt": "farai/main moved\n"})
    before = chain.refs(chain.bridge)
    code, again = run(chain, "bump-bridge", "--no-gate", "--push")
    assert code == 2, again
    assert "already exists" in again["error"] and chain.bridge.as_uri() in again["error"]
    assert f"--delete {branch}" in again["hint"] and "merge farai/main" in again["hint"]
    cache = str(tmp_path / "cache")
    assert cache not in again["error"] and cache not in again["hint"]
    assert chain.refs(chain.bridge) == before


def test_nemo_rl_that_merged_the_stranded_pin_moves_to_the_merged_bridge_commit(tmp_path: Path) -> None:
    """Both pull requests were squash-merged (branches deleted): NeMo-RL's farai/main now pins the
    stranded Bridge bump commit, whose change the Bridge's farai/main holds as its squash. Moving NeMo-RL
    to the merged commit loses nothing, so it is not "backwards": one commit on NeMo-RL's farai/main."""
    chain = make_chain(tmp_path)
    branch = f"forkctl/bump-{chain.head[:12]}"
    code, first = run(chain, "bump-bridge", "--no-gate", "--through", "nemo-rl", "--push")
    assert code == 0, first["problems"]
    stranded = first["steps"][0]["commit"]
    merged = merge_on_the_bridge(chain, branch, "squash", delete=True)
    nemo = chain.nemo_work  # NeMo-RL's maintainer squash-merges its pull request too
    nemo.git("fetch", "-q", "--no-recurse-submodules", "origin")
    nemo.git("checkout", "-q", "-B", "farai/main", "origin/farai/main")
    nemo.git("merge", "-q", "--squash", f"origin/{branch}")
    nemo.git("commit", "-q", "-m", "build: pin the Bridge at the fork head (#7)")
    nemo.git("push", "-q", "origin", "farai/main", f":{branch}")
    nemo_head = chain.refs(chain.nemo)[FARAI]
    assert _gitlink(chain.nemo, nemo_head, NEMO_GITLINK) == stranded
    code, report = run(chain, "bump-bridge", "--no-gate", "--through", "nemo-rl", "--push")
    assert code == 0, report.get("problems") or report.get("error")
    assert report["backwards"] == []
    nemo_tip = chain.refs(chain.nemo)[f"refs/heads/{branch}"]
    assert git(chain.nemo, "rev-parse", f"{nemo_tip}~1") == nemo_head
    assert _gitlink(chain.nemo, nemo_tip, NEMO_GITLINK) == merged
