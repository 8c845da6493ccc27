"""One way forward (issue 32, item 4): when the consumers' pins stand on different upstream commits,
check-pins, describe and sync name the same one target, by one rule, with exactly one `port --onto`;
when the pins lie on two lines of upstream history, a finding says which and why, and no port line.

Real repositories (tests/chain.py: upstream -> fork -> Bridge -> NeMo-RL as local bare remotes), the
real CLI in process, a private cache per test.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from forkctl.cli import cli
from tests.chain import Chain, forkctl_json, make_chain, url, use_private_cache
from tests.gitrepos import Repo, git

PORT_LINE = re.compile(r"forkctl port --onto ([0-9a-f]+)")


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_private_cache(tmp_path, monkeypatch)


def text(chain: Chain, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--manifest", str(chain.manifest), *args])
    return result.exit_code, result.stdout


def ports(output: str) -> list[str]:
    """Every `forkctl port --onto SHA` the output prints (the SHAs)."""
    return PORT_LINE.findall(output)


def two_bases(chain: Chain) -> tuple[str, str]:
    """NeMo-RL pins a Bridge commit that pins upstream Y (2 commits after the base); the Bridge's own
    branch then moved to a fork head ported onto X (1 commit after the base, an ancestor of Y).
    Returns (X, Y)."""
    y = chain.upstream_tip
    x = git(chain.upstream, "rev-parse", f"{y}~1")
    on_y = chain.pin_bridge(y, url(chain.fork))
    chain.pin_nemo(on_y)
    chain.pin_bridge(chain.am_branch("ported-onto-x", x, chain.patches))
    return x, y


def test_two_bases_one_port_line_the_newer_one_in_check_pins(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    x, y = two_bases(chain)
    code, output = text(chain, "check-pins", "--branches")
    assert code == 1, output
    assert ports(output) == [y], output  # one line, the full SHA of the newer base
    assert x[:12] in output  # the other pin's base is named, as the ancestor it is
    code, report = forkctl_json(chain, "check-pins", "--branches")
    way = report["way_forward"]
    assert way["target"] == y and way["command"] == f"forkctl port --onto {y}"
    assert way["rule"] and way["diverged"] is None
    assert sorted(p["base"] for p in way["pins"]) == sorted([x, y])


@pytest.mark.slow
def test_describe_and_sync_name_the_same_one_target(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    _, y = two_bases(chain)
    _, pins = forkctl_json(chain, "check-pins", "--branches")
    code, described = forkctl_json(chain, "describe", "--through", "nemo-rl")
    assert code == 0, described
    parts = described["parts"]
    assert parts["wanted_base"] == y
    assert parts["way_forward"]["target"] == y and parts["way_forward"]["rule"] == pins["way_forward"]["rule"]
    assert ports(described["body"]) == [y]
    # sync's default rule reads what upstream Bridge pins (the base here); the consumers' own pins
    # stand further on, so sync ports onto the same one target, by the same rule.
    code, synced = forkctl_json(chain, "sync", "--no-gate", "--dry-run")
    assert code == 0, synced
    assert synced["target"] == y and synced["relation"] == "ahead"
    assert synced["way_forward"]["target"] == y
    assert synced["way_forward"]["rule"] == pins["way_forward"]["rule"]
    code, output = text(chain, "sync", "--no-gate", "--dry-run")
    assert code == 0 and set(ports(output)) <= {y}, output


def diverged_bases(chain: Chain) -> tuple[str, str]:
    """Upstream's main merges two lines that start at the base (A and B, neither contains the other);
    NeMo-RL pins a Bridge commit that pins B, the Bridge's branch pins A. Returns (A, B)."""
    work = Repo(chain.tmp / "upstream-lines")
    git(chain.tmp, "clone", "-q", url(chain.upstream), str(work.path))
    work.git("config", "user.name", "t")
    work.git("config", "user.email", "t@example.com")
    work.git("checkout", "-q", "-b", "line-a", chain.base)
    a = work.commit("upstream: line a", {"megatron/core/sub/la.py": "A = 1\n"})
    work.git("checkout", "-q", "-b", "line-b", chain.base)
    b = work.commit("upstream: line b", {"megatron/core/sub/lb.py": "B = 1\n"})
    work.git("checkout", "-q", "main")
    work.git("merge", "-q", "--no-edit", "line-a", "line-b")
    for remote in (chain.upstream, chain.fork):
        work.git("push", "-q", url(remote), "main:refs/heads/main")
    on_b = chain.pin_bridge(b, url(chain.fork))
    chain.pin_nemo(on_b)
    chain.pin_bridge(a)
    return a, b


@pytest.mark.slow
def test_pins_on_two_lines_of_history_are_a_finding_without_a_port_line(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    a, b = diverged_bases(chain)
    code, output = text(chain, "check-pins", "--branches")
    assert code == 1, output
    assert ports(output) == [], output
    assert a[:12] in output and b[:12] in output and "neither" in output
    code, report = forkctl_json(chain, "check-pins", "--branches")
    way = report["way_forward"]
    assert way["target"] is None and way["command"] is None
    assert sorted(way["diverged"]) == sorted([a, b])
    assert any("one line of" in p["message"] for p in report["problems"])
    code, described = forkctl_json(chain, "describe", "--through", "nemo-rl")
    assert code == 0 and ports(described["body"]) == [], described["body"]
    assert described["parts"]["way_forward"]["target"] is None
    code, synced = forkctl_json(chain, "sync", "--no-gate", "--dry-run")
    assert code == 1 and synced["way_forward"]["target"] is None, synced
    assert "port --onto" not in json.dumps(synced["problems"])


# --- describe: the previous pin's own base (issue 32, item 7) -----------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("pinned", ["fork-head", "plain-upstream"])
def test_describe_lists_no_upstream_commit_as_a_removed_patch(tmp_path: Path, pinned: str) -> None:
    """The previous pin stands on a newer base than the manifest's: the range-diff compares the series
    on each pin's own base, so the upstream commits between the bases are no patch of either side."""
    chain = make_chain(tmp_path)
    newer = chain.upstream_tip
    previous = newer if pinned == "plain-upstream" else chain.am_branch("on-newer", newer, chain.patches)
    chain.pin_bridge(previous, url(chain.fork))
    code, described = forkctl_json(chain, "describe")
    assert code == 0, described
    parts = described["parts"]
    upstream_subjects = git(chain.upstream, "log", "--format=%s", f"{chain.base}..{newer}").splitlines()
    assert upstream_subjects  # the commits between the bases
    shown = parts["range_diff"] or ""
    assert not [s for s in upstream_subjects if s in shown], shown
    if pinned == "fork-head":
        assert parts["previous_base"] == newer
        assert "feat(core): a returns 10" in shown  # the patches themselves are still compared
    else:
        assert parts["range_diff"] is None and "plain upstream commit" in described["body"]


# --- reachability: which branch, and how many (issue 32, item 7) --------------------------------------


@pytest.mark.slow
def test_the_reachability_finding_names_the_default_branch_and_the_count(tmp_path: Path) -> None:
    """NeMo-RL pins a Bridge commit that neither the manifest's branch nor any tip holds, but `main`
    (the Bridge's default branch) and five branches named before it do: the finding names `main` and
    says how many of the Bridge's branches hold the commit, not the first three in name order."""
    chain = make_chain(tmp_path)
    work = chain.bridge_work
    pinned = work.commit("bridge: a change", {"src/bridge/extra.py": "E = 1\n"})
    work.commit("bridge: a later change", {"src/bridge/later.py": "L = 1\n"})
    for branch in ["main", *(f"aa-{n}" for n in range(5))]:
        work.git("push", "-q", "origin", f"HEAD:refs/heads/{branch}")
    chain.pin_nemo(pinned)
    branches = git(chain.bridge, "for-each-ref", "--format=%(refname)", "refs/heads/").splitlines()
    holding = git(chain.bridge, "for-each-ref", "--contains", pinned, "--format=%(refname)").splitlines()
    assert (len(branches), len(holding)) == (7, 6)  # farai/main does not hold it
    _, report = forkctl_json(chain, "check-pins", "--branches")
    nemo = next(link for link in report["links"] if link["consumer"] == "nemo-rl")
    (reachable,) = [f for f in nemo["findings"] if f["check"] == "reachable"]
    assert reachable["status"] == "OK", reachable
    message = reachable["message"]
    assert f"reachable from main (its default branch) of {url(chain.bridge)}" in message, message
    assert "6 of its 7 branches hold it" in message and "aa-" not in message, message
