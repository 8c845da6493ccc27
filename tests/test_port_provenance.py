"""A pick's provenance proved against the upstream commit U it names, and a pick upstream reverted.

A patch whose `(cherry picked from commit U)` names a commit of the new base's history is compared with U
itself: the same patch-id, or U picked onto the patch's own parent gives the patch's tree (an empty
interdiff). Then U's change is the patch's change and the new base holds U: the patch is dropped with U
and the proof named, even where upstream edited U's lines later and a 3-way merge of the pick stops (as
plain `git rebase <new base>` drops it too: its patch-id is upstream's). An amended pick ports only what
it adds to U (the interdiff), and a stop on those lines names them. A pick whose U upstream reverted in
the range is never re-applied silently: port and `status --onto` name the reverting commit and stop.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.gitrepos import Repo
from tests.seriesrepo import SeriesSetup, run_json
from tests.test_port_absorb import (
    BRANCH,
    LONG,
    OTHER,
    dev_at_base,
    edited,
    empty_setup,
    export_dev,
    fork_with_branch,
    own,
    pick_amended,
    port,
    port_results,
    preview,
    preview_results,
)


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))


def tree_of(repo: Repo, rev: str) -> str:
    return repo.git("rev-parse", f"{rev}^{{tree}}")


def state_of(setup: SeriesSetup, fork: Repo) -> tuple[str, str, list[str]]:
    """What a stop must leave alone: the branch, the manifest's bytes, the patch files' bytes."""
    files = sorted(p.read_text() for p in (setup.root / "patches" / "megatron-lm").glob("*.patch"))
    return fork.head(BRANCH), setup.manifest.read_text(), files


@pytest.mark.parametrize("older_base", [False, True], ids=["on-U-parent", "on-older-base"])
def test_exact_pick_whose_lines_upstream_edited_later_is_dropped_with_the_proof(
    tmp_path: Path, older_base: bool
) -> None:
    setup = empty_setup(tmp_path)
    upstream = setup.upstream
    if older_base:
        # Upstream changes line 8 before U: U's context differs from the pick's, so do their patch-ids.
        upstream.commit("upstream: line 8", {LONG: edited(l8="EIGHT")})
    u_lines = {"l8": "EIGHT"} if older_base else {}
    picked = upstream.commit("upstream: line 10 (#7)", {LONG: edited(l10="TEN", **u_lines)})
    new_base = upstream.commit("upstream: line 10 again", {LONG: edited(l10="TEN!", **u_lines)})
    dev = dev_at_base(setup)
    own(dev, "feat: other is five", {OTHER: "X = 5\n"}, 1)
    dev.git("cherry-pick", "-x", picked)  # onto the base: an older commit than U's parent when older_base
    export_dev(setup, dev)
    fork = fork_with_branch(setup, tmp_path)
    previewed = preview(setup, fork, new_base)
    code, data = port(setup, fork, new_base)
    assert code == 0, data  # today: a conflict stop on LONG, as `git rebase --onto` stops
    assert port_results(data) == ["applied", "absorbed"] == preview_results(previewed)
    absorbed = data["steps"][1]["absorbed"]
    proof = "patch-id" if not older_base else "interdiff"
    assert (absorbed["reason"], absorbed["upstream_commit"]) == ("provenance", picked)
    assert absorbed["proof"].startswith(proof) and picked in absorbed["proof"]
    assert (previewed[1]["reason"], previewed[1]["upstream_commit"]) == ("provenance", picked)
    assert previewed[1]["proof"] == absorbed["proof"]
    dropped = setup.manifest_data()["dropped"]
    assert [(d["reason"], d["upstream_commit"], d["proof"]) for d in dropped] == [
        ("provenance", picked, absorbed["proof"])
    ]
    # The port is the new base plus the own patch: upstream's newer line stands, nothing own is lost.
    assert fork.git("show", f"{BRANCH}:{LONG}") == edited(l10="TEN!", **u_lines).rstrip("\n")
    assert fork.git("show", f"{BRANCH}:{OTHER}") == "X = 5"
    assert fork.git("rev-list", "--count", f"{new_base}..{BRANCH}") == "1"


def test_amended_pick_whose_upstream_lines_moved_on_ports_its_own_lines(tmp_path: Path) -> None:
    setup = empty_setup(tmp_path)
    upstream = setup.upstream
    picked = upstream.commit("upstream: line 10 (#7)", {LONG: edited(l10="TEN")})
    new_base = upstream.commit("upstream: line 10 again", {LONG: edited(l10="TEN!")})
    dev = dev_at_base(setup)
    own(dev, "feat: other", {OTHER: "X = 5\n"}, 1)
    pick_amended(dev, picked, {LONG: edited(l10="TEN", l17="OWN")})
    export_dev(setup, dev)
    fork = fork_with_branch(setup, tmp_path)
    previewed = preview(setup, fork, new_base)
    code, data = port(setup, fork, new_base)
    assert code == 0, data  # today: the whole pick conflicts on line 10
    assert port_results(data) == ["applied", "partial"] == preview_results(previewed)
    partial = data["steps"][1]["partial"]
    assert partial["upstream_commit"] == picked == previewed[1]["partial"]["upstream_commit"]
    assert "+OWN" in partial["own_lines"] and "TEN" not in partial["own_lines"]
    # Upstream's newer line 10 and our own line 17, nothing else.
    assert fork.git("show", f"{BRANCH}:{LONG}") == edited(l10="TEN!", l17="OWN").rstrip("\n")
    assert setup.manifest_data()["dropped"] == []


def test_amended_pick_whose_own_lines_conflict_stops_naming_them(tmp_path: Path) -> None:
    setup = empty_setup(tmp_path)
    upstream = setup.upstream
    picked = upstream.commit("upstream: line 10 (#7)", {LONG: edited(l10="TEN")})
    new_base = upstream.commit("upstream: lines 10 and 12", {LONG: edited(l10="TEN!", l12="TWELVE!")})
    dev = dev_at_base(setup)
    pick_amended(dev, picked, {LONG: edited(l10="TEN", l12="OWN12")})
    export_dev(setup, dev)
    fork = fork_with_branch(setup, tmp_path)
    before = state_of(setup, fork)
    previewed = preview(setup, fork, new_base)
    code, data = port(setup, fork, new_base)
    assert code == 1, data
    assert port_results(data) == ["conflicts"] == preview_results(previewed)
    conflict = data["conflict"]
    assert conflict["upstream_commit"] == picked
    own_lines = conflict["own_lines"]  # the interdiff: our line 12, not upstream's line 10
    assert "+OWN12" in own_lines and "-line 12" in own_lines and "TEN" not in own_lines
    assert previewed[0]["own_lines"] == own_lines
    # The worktree holds only the own lines' conflict: upstream's line 10 is taken as it stands.
    worktree = Path(conflict["worktree"])
    merged = (worktree / LONG).read_text()
    assert "TEN!" in merged and "\nTEN\n" not in merged and "OWN12" in merged and "<<<<<<<" in merged
    assert state_of(setup, fork) == before


def reverted_setup(tmp_path: Path) -> tuple[SeriesSetup, Repo, str, str, str]:
    """Upstream takes U (line 10), reverts it with `git revert`, moves on; the fork picked U."""
    setup = empty_setup(tmp_path)
    upstream = setup.upstream
    picked = upstream.commit("upstream: line 10 (#7)", {LONG: edited(l10="TEN")})
    upstream.git("revert", "--no-edit", picked)
    reverting = upstream.head()
    new_base = upstream.commit("upstream: unrelated", {"megatron/core/u.py": "U = 1\n"})
    dev = dev_at_base(setup)
    own(dev, "feat: other", {OTHER: "X = 5\n"}, 1)
    dev.git("cherry-pick", "-x", picked)
    export_dev(setup, dev)
    return setup, fork_with_branch(setup, tmp_path), picked, reverting, new_base


def test_pick_upstream_reverted_is_flagged_and_stops_for_a_decision(tmp_path: Path) -> None:
    setup, fork, picked, reverting, new_base = reverted_setup(tmp_path)
    before = state_of(setup, fork)
    code, status = run_json(setup, "status", "--onto", new_base, "--repo", str(fork.path))
    assert code == 1, status  # today: "applies with 3-way", exit 0: upstream's revert undone silently
    item = status["patches"][1]
    assert (item["result"], item["upstream_commit"], item["reverted_by"]) == ("reverted", picked, reverting)
    assert any(reverting[:12] in p["message"] for p in status["problems"])
    code, data = port(setup, fork, new_base)
    assert code == 1, data
    assert port_results(data) == ["applied", "conflicts"]
    assert data["conflict"]["reverted_by"] == reverting
    problem = next(p for p in data["problems"] if reverting[:12] in p["message"])
    assert "--skip" in problem["hint"] and "--reapply-reverted" in problem["hint"]
    assert state_of(setup, fork) == before  # nothing moved
    # `status` shows the stop with the ways on that work as printed; --continue alone does not re-apply.
    code, shown = run_json(setup, "status", "--repo", str(fork.path))
    commands = shown["in_progress"]["commands"]
    assert set(commands) == {"reapply-reverted", "skip", "abort"}, commands
    code, refused = run_json(setup, "port", "--continue", "--repo", str(fork.path))
    assert code == 2, refused
    code, data = run_json(setup, "port", "--skip", "--repo", str(fork.path))
    assert code == 0, data
    dropped = setup.manifest_data()["dropped"]
    assert [(d["reason"], d["upstream_commit"], d["reverted_by"]) for d in dropped] == [
        ("skipped", picked, reverting)
    ]
    assert fork.git("show", f"{BRANCH}:{LONG}") == edited().rstrip("\n")


def test_pick_upstream_reverted_is_reapplied_only_when_asked(tmp_path: Path) -> None:
    setup, fork, picked, reverting, new_base = reverted_setup(tmp_path)
    code, data = port(setup, fork, new_base)
    assert code == 1, data
    code, data = run_json(setup, "port", "--reapply-reverted", "--repo", str(fork.path))
    assert code == 0, data
    assert port_results(data) == ["applied", "applied"]
    assert data["steps"][1]["resolved"]
    assert data["steps"][1]["reapplied"] == {"upstream_commit": picked, "reverted_by": reverting}
    assert fork.git("show", f"{BRANCH}:{LONG}") == edited(l10="TEN").rstrip("\n")
    assert setup.manifest_data()["dropped"] == []


def test_pick_upstream_reverted_is_reapplied_up_front_when_asked(tmp_path: Path) -> None:
    setup, fork, picked, reverting, new_base = reverted_setup(tmp_path)
    code, data = run_json(setup, "port", "--onto", new_base, "--repo", str(fork.path), "--reapply-reverted")
    assert code == 0, data
    assert port_results(data) == ["applied", "applied"]
    assert data["steps"][1]["reapplied"] == {"upstream_commit": picked, "reverted_by": reverting}
    assert fork.git("show", f"{BRANCH}:{LONG}") == edited(l10="TEN").rstrip("\n")
