"""bump-bridge moves the chain forward only (issue 22): a bump never takes away upstream commits the
consumer's pin has, unless --allow-backwards says so.

Real repositories (tests/chain.py), the real CLI in process, a private cache per test.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.chain import Chain, commit_index, forkctl_json, make_chain, url, use_private_cache
from tests.gitrepos import git


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_private_cache(tmp_path, monkeypatch)


run = forkctl_json


def all_refs(chain: Chain) -> dict[str, dict[str, str]]:
    return {str(p): chain.refs(p) for p in (chain.bridge, chain.nemo, chain.fork, chain.bridge_work.path)}


# --- bump-bridge: forward only ----------------------------------------------------------------------


def test_bump_refuses_to_take_upstream_commits_away_unless_told(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    chain.pin_bridge(chain.upstream_tip, url(chain.fork))
    before = all_refs(chain)
    code, report = run(chain, "bump-bridge", "--bridge-repo", str(chain.bridge_work.path))
    assert code == 1, report
    port = f"forkctl port --onto {chain.upstream_tip}"
    refusal = next(p for p in report["problems"] if "back" in p["message"])
    assert port in (refusal["hint"] or "")
    assert report["backwards"][0]["wants_base"]["commit"] == chain.upstream_tip
    assert all(not step["created"] for step in report["steps"])
    assert all_refs(chain) == before  # no branch anywhere
    # Meaning it: the same bump goes back, and says so.
    code, report = run(
        chain, "bump-bridge", "--bridge-repo", str(chain.bridge_work.path), "--allow-backwards"
    )
    assert code == 0, report["problems"]
    (step,) = report["steps"]
    assert step["created"] and step["new"] == chain.head
    assert any("--allow-backwards" in p["message"] for p in report["problems"])


def test_port_onto_the_consumers_base_then_bump_passes(tmp_path: Path) -> None:
    """The way out the refusal names: port the toolkit's series onto the consumer's commit (the fork
    branch moves in the fork's repository), then bump: the new pin contains the old one."""
    chain = make_chain(tmp_path)
    chain.pin_bridge(chain.upstream_tip, url(chain.fork))
    code, ported = run(chain, "port", "--onto", chain.upstream_tip, "--repo", str(chain.fork))
    assert code == 0, ported
    head = ported["head"]
    assert chain.refs(chain.fork)["refs/heads/farai/main"] == head
    code, report = run(chain, "check-pins")
    assert f"forkctl port --onto {chain.upstream_tip}" not in json.dumps(report)  # now it is a bump
    code, report = run(
        chain, "bump-bridge", "--through", "nemo-rl", "--bridge-repo", str(chain.bridge_work.path)
    )
    assert code == 0, report["problems"]
    assert not report["backwards"]
    bridge_step = report["steps"][0]
    assert bridge_step["old"] == chain.upstream_tip and bridge_step["new"] == head
    git(chain.fork, "merge-base", "--is-ancestor", chain.upstream_tip, head)  # nothing lost


def test_nemo_rl_bump_must_contain_the_bridge_commit_it_pins_now(tmp_path: Path) -> None:
    """NeMo-RL pins a Bridge commit that the Bridge branch does not contain (pushed to a side branch):
    the new NeMo-RL pin, a bump commit on the Bridge branch, would drop it."""
    chain = make_chain(tmp_path)
    work = chain.bridge_work
    work.git("checkout", "-q", "-b", "side", "origin/farai/main")
    side = commit_index(work, "bridge: a side change", {"src/bridge/side.py": "S = 1\n"})
    work.git("push", "-q", "origin", "HEAD:refs/heads/side")
    work.git("checkout", "-q", "main")
    chain.pin_nemo(side)
    code, report = run(chain, "bump-bridge", "--through", "nemo-rl")
    assert code == 1, report
    refusal = next(p for p in report["problems"] if "back" in p["message"])
    assert side[:12] in refusal["message"] and "nemo-rl" in refusal["message"]
    assert report["backwards"][0]["consumer"] == "nemo-rl"
    code, report = run(chain, "bump-bridge", "--through", "nemo-rl", "--allow-backwards")
    assert code == 0, report["problems"]


def test_nemo_rl_bump_on_the_bridge_branch_it_pins_passes_the_rule(tmp_path: Path) -> None:
    """NeMo-RL pins an older commit of the Bridge branch: the bump commit on that branch contains it."""
    chain = make_chain(tmp_path)
    older = chain.bridge_work.head()
    chain.pin_bridge(chain.base, files={"src/bridge/later.py": "L = 1\n"})  # the branch moves on
    chain.pin_nemo(older)
    code, report = run(chain, "bump-bridge", "--through", "nemo-rl")
    assert code == 0, report["problems"]
    assert report["backwards"] == []
