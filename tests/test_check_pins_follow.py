"""check-pins follows the consumer (issue 22): a consumer already built on upstream commits the manifest
base lacks is answered with the port that moves the fork there, not with a bump that takes them away.

Real repositories (tests/chain.py), the real CLI in process, a private cache per test.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from forkctl.cli import cli
from tests.chain import forkctl_json, make_chain, url, use_private_cache


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_private_cache(tmp_path, monkeypatch)


run = forkctl_json


def pin_finding(report: dict) -> dict:
    """The failing `pin` finding of the Bridge at the commit checked first."""
    link = next(link for link in report["links"] if link["consumer"] == "megatron-bridge")
    return next(f for f in link["findings"] if f["check"] == "pin")


# --- check-pins -------------------------------------------------------------------------------------


@pytest.mark.parametrize("pinned", ["plain-upstream", "fork-head"])
def test_check_pins_names_the_port_onto_the_consumers_base(tmp_path: Path, pinned: str) -> None:
    """Upstream moved on and the consumer followed (a plain upstream commit, or a fork head built on
    it): the fix is the exact `forkctl port --onto <full sha>`, not a bump that goes back, printed once
    as the chain's way forward (the finding points there)."""
    chain = make_chain(tmp_path)
    ahead = chain.upstream_tip  # 2 upstream commits after the manifest base
    sha = ahead if pinned == "plain-upstream" else chain.am_branch("ported", ahead, chain.patches)
    chain.pin_bridge(sha, url(chain.fork))
    code, report = run(chain, "check-pins")
    assert code == 1
    finding = pin_finding(report)
    assert finding["kind"] == ("unpatched-upstream" if pinned == "plain-upstream" else "wrong-base")
    assert ahead[:12] in finding["fix"] and "way forward" in finding["fix"]
    assert report["way_forward"]["command"] == f"forkctl port --onto {ahead}"
    assert finding["wants_base"] == {
        "commit": ahead,
        "lacks": 2,
        "descends_from_base": True,
        "command": f"forkctl port --onto {ahead}",
    }
    assert "already builds on" in finding["message"] and "2 upstream commits" in finding["message"]
    # The text report prints the command once, as the way forward's fix.
    result = CliRunner().invoke(cli, ["--manifest", str(chain.manifest), "check-pins"])
    assert result.output.count("forkctl port --onto") == 1
    assert f"forkctl port --onto {ahead}, then forkctl bump-bridge" in result.output


def test_a_pin_behind_the_base_is_still_fixed_by_the_bump(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    chain.pin_bridge(chain.base_parent, url(chain.fork))
    code, report = run(chain, "check-pins")
    assert code == 1
    finding = pin_finding(report)
    assert "1 commits behind" in finding["message"]
    assert "bump-bridge" in finding["fix"] and "port" not in finding["fix"]
    assert "wants_base" not in finding
