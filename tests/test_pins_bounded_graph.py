"""check-pins answers history questions in a commit graph bounded in time (fetched `--shallow-since`
a month before the manifest base's commit date), and still answers exactly what the whole history
would: a pin older than the bound, and a count whose range reaches below it, deepen the graph first.

Committer dates decide the bound, so the upstream commits made here are dated ahead of the chain's
own (which git dates now): the chain's history lies entirely before the bound."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import yaml

from forkctl.git.clonecache import cache_path
from tests.chain import Chain, check_pins_json, make_chain, url, use_private_cache
from tests.gitrepos import git

DAY = 86400
LATER = int(time.time()) + 400 * DAY  # the new base's commit date: the chain's commits are > 30 days older


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_private_cache(tmp_path, monkeypatch)


def dated(work: Path, when: int, *args: str) -> str:
    """Run `git <args>` in `work` as of `when` (author and committer date); returns HEAD."""
    stamp = f"{when} +0000"
    env = {**os.environ, "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}
    git(work, "-c", "user.name=t", "-c", "user.email=t@t", *args, env=env)
    return git(work, "rev-parse", "HEAD")


def chain_on_a_later_base(tmp_path: Path) -> tuple[Chain, Path, str]:
    """The real chain's shape (fork URL = upstream's) on a new base dated LATER, on upstream main.
    Returns the chain, a working clone of upstream, and the base."""
    chain = make_chain(tmp_path)
    work = tmp_path / "upstream-work"
    git(tmp_path, "clone", "-q", url(chain.upstream), str(work))
    base = dated(work, LATER, "commit", "-q", "--allow-empty", "-m", "upstream: the new base")
    git(work, "push", "-q", "origin", "HEAD:refs/heads/main")
    data = yaml.safe_load(chain.manifest.read_text())
    data["fork"]["url"] = url(chain.upstream)
    data["upstream"]["base"] = base
    chain.manifest.write_text(yaml.safe_dump(data, sort_keys=False))
    return chain, work, base


def check(chain: Chain) -> dict:
    code, report = check_pins_json(chain)
    assert code == 1, report  # the Bridge pins plain upstream
    return report


def findings(report: dict, commit: str) -> dict[str, dict]:
    link = next(link for link in report["links"] if link["commit"] == commit)
    return {f["check"]: f for f in link["findings"]}


def graph_objects(chain: Chain) -> set[str]:
    graph = cache_path(url(chain.upstream), graph=True)
    out = git(graph, "cat-file", "--batch-check=%(objectname)", "--batch-all-objects")
    return set(out.split())


def test_the_upstream_graph_starts_a_little_before_the_base(tmp_path: Path) -> None:
    chain, work, base = chain_on_a_later_base(tmp_path)
    tip = dated(work, LATER + DAY, "commit", "-q", "--allow-empty", "-m", "upstream: after the new base")
    git(work, "push", "-q", "origin", "HEAD:refs/heads/main")
    older = chain.pin_bridge(base)
    newer = chain.pin_bridge(tip)
    chain.pin_nemo(older)
    report = check(chain)
    pin = findings(report, newer)
    assert pin["reachable"]["status"] == "OK", pin
    assert "1 commits ahead of the manifest base" in pin["pin"]["message"], pin
    assert findings(report, older)["pin"]["kind"] == "unpatched-upstream"
    held = graph_objects(chain)
    assert {base, tip} <= held
    # The history before the bound was never fetched (before: the whole of main, every time).
    assert chain.upstream_tip not in held and chain.base not in held


def test_a_pin_older_than_the_bound_is_found_in_the_deepened_graph(tmp_path: Path) -> None:
    chain, _, base = chain_on_a_later_base(tmp_path)
    bridge = chain.pin_bridge(chain.base_parent)  # far before the bound, on upstream main
    chain.pin_nemo(bridge)  # the Bridge's commits are all older than the bound too
    report = check(chain)
    pin = findings(report, bridge)
    assert pin["reachable"]["status"] == "OK", pin
    behind = git(chain.upstream, "rev-list", "--count", f"{chain.base_parent}..{base}")
    assert f"{behind} commits behind the manifest base" in pin["pin"]["message"], pin
    nested = findings(report, git(chain.nemo, "rev-parse", "farai/main"))
    assert nested["reachable"]["status"] == "OK", nested


def side_branch(work: Path, chain: Chain, when: int) -> str:
    """A side branch that left main before the bound (a commit dated then), its last commit dated
    `when`: that one is a boundary commit of the bounded graph (its parent is left out)."""
    git(work, "checkout", "-q", "-b", "side", chain.upstream_tip)
    dated(work, LATER - 400 * DAY, "commit", "-q", "--allow-empty", "-m", "side: old work")
    side = dated(work, when, "commit", "-q", "--allow-empty", "-m", "side: new work")
    git(work, "checkout", "-q", "main")
    return side


def pin_merge_and_check(chain: Chain, work: Path, base: str, merge: str) -> tuple[dict, str]:
    """Push upstream's `merge`, pin it through the chain and check: (the Bridge pin's finding, how
    many commits git counts from the base to the merge in the whole history)."""
    git(work, "push", "-q", "origin", "HEAD:refs/heads/main")
    bridge = chain.pin_bridge(merge)
    chain.pin_nemo(bridge)
    pin = findings(check(chain), bridge)
    return pin, git(chain.upstream, "rev-list", "--count", f"{base}..{merge}")


def test_an_ancestry_question_cut_by_the_bound_is_asked_again_in_full(tmp_path: Path) -> None:
    """The merge of an old side branch is a boundary commit (git then hides all its parents): "is the
    base an ancestor of the merge?" says no in the bounded graph, and yes in the whole one."""
    chain, work, base = chain_on_a_later_base(tmp_path)
    git(work, "checkout", "-q", "-b", "side", chain.upstream_tip)
    side = dated(work, LATER - 400 * DAY, "commit", "-q", "--allow-empty", "-m", "side: old work")
    git(work, "checkout", "-q", "main")
    merge = dated(work, LATER + 2 * DAY, "merge", "-q", "--no-ff", "-m", "merge side", side)
    pin, ahead = pin_merge_and_check(chain, work, base, merge)
    assert f"{ahead} commits ahead of the manifest base" in pin["pin"]["message"], pin


def test_a_count_reaching_below_the_bound_is_exact(tmp_path: Path) -> None:
    """Main goes on from the base and merges a side branch that left before the bound: the base is
    an ancestor inside the bounded graph, but the side's old commit counts too, and only the whole
    history has it (the side's newer commit is a boundary commit among those counted)."""
    chain, work, base = chain_on_a_later_base(tmp_path)
    dated(work, LATER + DAY, "commit", "-q", "--allow-empty", "-m", "upstream: after the base")
    side = side_branch(work, chain, LATER + 2 * DAY)
    merge = dated(work, LATER + 3 * DAY, "merge", "-q", "--no-ff", "-m", "merge side", side)
    pin, ahead = pin_merge_and_check(chain, work, base, merge)
    assert ahead == "4"  # the merge, the commit after the base, the side's two
    assert f"{ahead} commits ahead of the manifest base" in pin["pin"]["message"], pin


def test_a_count_the_bound_cuts_is_not_recorded_when_the_graph_cannot_deepen(tmp_path: Path) -> None:
    """Recorded counts are facts every later run trusts: a count the bound cuts, in a graph that cannot
    be deepened (the server is gone), is no answer, and nothing is recorded."""
    from forkctl.git import locations
    from forkctl.git.clonecache import graph_for
    from forkctl.git.graph import fetch_graph

    chain, work, base = chain_on_a_later_base(tmp_path)
    dated(work, LATER + DAY, "commit", "-q", "--allow-empty", "-m", "upstream: after the base")
    side = side_branch(work, chain, LATER + 2 * DAY)
    merge = dated(work, LATER + 3 * DAY, "merge", "-q", "--no-ff", "-m", "merge side", side)
    git(work, "push", "-q", "origin", "HEAD:refs/heads/main")
    with locations.named_by_user([url(chain.upstream)]):  # called directly: the test names the upstream
        graph = graph_for(url(chain.upstream))
        since = lambda: LATER - 30 * DAY  # noqa: E731
        assert fetch_graph(graph, url(chain.upstream), {"refs/heads/main": merge}, since=since)
        assert graph.bounded()
        chain.upstream.rename(tmp_path / "server-gone")
        assert graph.history.ahead_behind(base, merge) is None
    assert graph.facts is not None and graph.facts.get(f"ahead-behind {base} {merge}") is None
