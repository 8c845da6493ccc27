"""What check-pins fetches to answer history questions: commit graphs (no trees), every answer exact.

A pin is reachable when any branch or tag of its URL contains it, however deep; the branch it is
usually on is asked first, every ref only when that one does not contain it. A pin on upstream's branch
is diagnosed from commits alone. No tree is received twice.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import budget
from tests.chain import check_pins_json, make_chain, make_fixed_chain, url, use_private_cache
from tests.gitrepos import git


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_private_cache(tmp_path, monkeypatch)


check = check_pins_json


def link_of(report: dict, consumer: str) -> dict:
    return next(link for link in report["links"] if link["consumer"] == consumer)


def received(cache: Path) -> dict[str, list[str]]:
    """{object type: object names} of every entry of every pack the cache's fetches left (git keeps one
    pack per fetch in a partial clone), repeats included."""
    by_type: dict[str, list[str]] = {}
    for idx in sorted(cache.rglob("objects/pack/*.idx")):
        for line in git(idx.parent, "verify-pack", "-v", str(idx)).splitlines():
            fields = line.split()
            if len(fields) >= 5 and len(fields[0]) == 40:
                by_type.setdefault(fields[1], []).append(fields[0])
    return by_type


def test_a_pin_deep_in_the_likely_branch_is_reachable(tmp_path: Path) -> None:
    chain = make_fixed_chain(tmp_path)
    bridge_ok = chain.bridge_work.head()
    for number in range(12):  # the Bridge's farai/main moves far past the commit NeMo-RL pins
        chain.pin_bridge(chain.head, files={f"later-{number}.txt": f"{number}\n"})
    chain.pin_nemo(bridge_ok)
    code, report = check(chain)
    assert code == 0, report["problems"]
    reachable = next(f for f in link_of(report, "nemo-rl")["findings"] if f["check"] == "reachable")
    said = f"is reachable from farai/main (the branch the manifest names) of {url(chain.bridge)}"
    assert said in reachable["message"]


def test_a_pin_only_on_another_branch_is_found_through_every_ref(tmp_path: Path) -> None:
    chain = make_fixed_chain(tmp_path)
    bridge_ok = chain.bridge_work.head()
    # The pinned Bridge commit survives only on a release branch; farai/main is rewritten without it.
    git(chain.bridge, "branch", "release/1.0", bridge_ok)
    git(chain.bridge, "update-ref", "refs/heads/farai/main", f"{bridge_ok}~1")
    chain.pin_nemo(bridge_ok)
    _, report = check(chain)
    reachable = next(f for f in link_of(report, "nemo-rl")["findings"] if f["check"] == "reachable")
    assert reachable["status"] == "OK" and "release/1.0" in reachable["message"], reachable


def test_a_pin_on_no_branch_any_more_is_unreachable(tmp_path: Path) -> None:
    chain = make_fixed_chain(tmp_path)
    bridge_ok = chain.bridge_work.head()
    dropped = chain.pin_bridge(chain.head, files={"dropped.txt": "soon on no branch\n"})
    chain.pin_nemo(dropped)
    # The server still has the object (a reachable-SHA server would not hand it out), on no ref.
    git(chain.bridge, "config", "uploadpack.allowAnySHA1InWant", "true")
    git(chain.bridge, "update-ref", "refs/heads/farai/main", bridge_ok)
    code, report = check(chain)
    assert code == 1
    reachable = next(f for f in link_of(report, "nemo-rl")["findings"] if f["check"] == "reachable")
    assert reachable["kind"] == "unreachable", reachable


@pytest.mark.budget(
    "objects check-pins receives from an empty cache on the real chain: 2,659, 5 of them twice, target none "
    "twice (bench/check_pins_real.py, 2026-11-30; README, CPU benchmarks)"
)
def test_an_upstream_pin_is_diagnosed_from_commits_and_no_tree_arrives_twice(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    chain.pin_bridge(chain.upstream_tip, url(chain.fork))
    code, report = check(chain)
    assert code == 1
    message = next(
        f["message"]
        for f in link_of(report, "megatron-bridge")["findings"]
        if f["kind"] == "unpatched-upstream"
    )
    assert f"unpatched upstream commit {chain.upstream_tip[:12]}, 2 commits ahead" in message
    got = received(tmp_path / "cache")
    trees = got.get("tree", [])
    assert trees  # trees were received (the count below sees them)
    budget.none_of("trees received twice", {tree for tree in trees if trees.count(tree) > 1})
    # The upstream tip's tree was never needed: history questions are answered by commits alone.
    tip_tree = git(chain.upstream, "rev-parse", f"{chain.upstream_tip}^{{tree}}")
    budget.none_of("trees received that a history question does not need", {tip_tree} & set(trees))
