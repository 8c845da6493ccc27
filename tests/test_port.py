"""forkctl port --onto: absorbed patches dropped with evidence, others moved, conflicts resumable."""

from __future__ import annotations

from pathlib import Path

import pytest

from forkctl.series import parse_patch
from tests.gitrepos import Repo
from tests.seriesrepo import SeriesSetup, clone, make_series, run_json

BRANCH = "farai/main"
A_TEN = "def a():\n    return 10\n\n\ndef helper():\n    return 'h'\n"


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SeriesSetup:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    return make_series(tmp_path)


def prepared_fork(setup: SeriesSetup, tmp_path: Path) -> Repo:
    """A clone holding the upstream's new commits and the fork branch built on the old base."""
    fork = clone(setup.upstream, tmp_path / "fork", bare=True)
    code, data = run_json(setup, "apply", "--base", setup.base, "--repo", str(fork.path))
    assert code == 0, data
    return fork


def test_port_drops_absorbed_patch_and_keeps_others(setup: SeriesSetup, tmp_path: Path) -> None:
    upstream = setup.upstream
    # Upstream takes patch 1's change under its own message, then moves on elsewhere.
    absorbed_by = upstream.commit("Make a() return ten (#123)", {"megatron/core/a.py": A_TEN})
    new_base = upstream.commit("unrelated upstream work", {"megatron/core/sub/c.py": "C = 4\n"})
    fork = prepared_fork(setup, tmp_path)
    old_commits = fork.git("rev-list", "--reverse", f"{setup.base}..{BRANCH}").split()
    old_files = [e["file"] for e in setup.manifest_data()["series"]]
    code, data = run_json(setup, "port", "--onto", new_base[:10], "--repo", str(fork.path))
    assert code == 0, data
    assert data["new_base"] == new_base
    absorbed = [s for s in data["steps"] if s["absorbed"]]
    assert len(absorbed) == 1
    assert absorbed[0]["file"] == old_files[0]
    assert absorbed[0]["absorbed"]["reason"] == "patch-id"
    assert absorbed[0]["absorbed"]["upstream_commit"] == absorbed_by
    manifest = setup.manifest_data()
    assert manifest["upstream"]["base"] == new_base
    assert manifest["dropped"][0]["upstream_commit"] == absorbed_by
    assert manifest["dropped"][0]["subject"] == "feat(core): a returns 10"
    assert len(manifest["series"]) == 3
    assert not (setup.root / old_files[0]).exists()
    # The branch moved; the new commits keep their one provenance line: the commit each was picked from.
    head = fork.head(BRANCH)
    assert head == data["head"]
    assert fork.git("rev-list", "--count", f"{new_base}..{head}") == "3"
    for entry, old_commit, dev_commit in zip(
        manifest["series"], old_commits[1:], setup.dev_commits[1:], strict=True
    ):
        patch = parse_patch(setup.root / entry["file"])
        assert patch.provenance == [dev_commit] and old_commit not in patch.message
        assert entry["provenance"] == dev_commit
    assert data["range_diff"].strip() != ""
    # The re-exported series applied on the new base rebuilds exactly the ported branch.
    code, again = run_json(setup, "apply", "--base", new_base, "--repo", str(fork.path), "--branch", "check")
    assert code == 0, again
    assert again["head"] == head


def test_port_conflict_abort_changes_nothing(setup: SeriesSetup, tmp_path: Path) -> None:
    new_base = setup.upstream.commit(
        "upstream edits helper",
        {"megatron/core/a.py": "def a():\n    return 1\n\n\ndef helper():\n    return 'up'\n"},
    )
    fork = prepared_fork(setup, tmp_path)
    tip = fork.head(BRANCH)
    manifest_text = setup.manifest.read_text()
    code, data = run_json(setup, "port", "--onto", new_base, "--repo", str(fork.path))
    assert code == 1, data
    assert data["conflict"]["subject"] == "fix(core): helper says hi"
    assert data["conflict"]["paths"] == ["megatron/core/a.py"]
    code, data = run_json(setup, "port", "--abort", "--repo", str(fork.path))
    assert code == 0, data
    assert setup.manifest.read_text() == manifest_text
    assert fork.head(BRANCH) == tip
    assert len(fork.git("worktree", "list").splitlines()) == 1


def test_port_conflict_continue(setup: SeriesSetup, tmp_path: Path) -> None:
    new_base = setup.upstream.commit(
        "upstream edits helper",
        {"megatron/core/a.py": "def a():\n    return 1\n\n\ndef helper():\n    return 'up'\n"},
    )
    fork = prepared_fork(setup, tmp_path)
    code, data = run_json(setup, "port", "--onto", new_base, "--repo", str(fork.path))
    assert code == 1
    worktree = Path(data["conflict"]["worktree"])
    (worktree / "megatron/core/a.py").write_text(
        "def a():\n    return 10\n\n\ndef helper():\n    return 'hi up'\n"
    )
    code, data = run_json(setup, "port", "--continue", "--repo", str(fork.path))
    assert code == 0, data
    assert [s["resolved"] for s in data["steps"]] == [False, False, False, True]
    assert setup.manifest_data()["upstream"]["base"] == new_base
    assert "'hi up'" in fork.git("show", f"{BRANCH}:megatron/core/a.py")
    assert not worktree.exists()


def test_a_port_belongs_to_the_checkout_that_started_it(setup: SeriesSetup, tmp_path: Path) -> None:
    """Two checkouts of the toolkit share one repository (here --repo; without it, the cache clone): the
    second may neither abort nor continue the first one's stopped port, and the resolution survives."""
    import shutil

    new_base = setup.upstream.commit(
        "upstream edits helper",
        {"megatron/core/a.py": "def a():\n    return 1\n\n\ndef helper():\n    return 'up'\n"},
    )
    fork = prepared_fork(setup, tmp_path)
    other = SeriesSetup(
        root=tmp_path / "checkout-b" / "toolkit",
        upstream=setup.upstream,
        base=setup.base,
        dev_commits=setup.dev_commits,
    )
    shutil.copytree(setup.root, other.root)
    code, data = run_json(setup, "port", "--onto", new_base, "--repo", str(fork.path))
    assert code == 1, data
    resolved = Path(data["conflict"]["worktree"]) / "megatron/core/a.py"
    resolution = "def a():\n    return 10\n\n\ndef helper():\n    return 'hi up'\n"
    resolved.write_text(resolution)
    for verb in ("--abort", "--continue", "--skip"):
        code, refused = run_json(other, "port", verb, "--repo", str(fork.path))
        assert code == 2, refused
        assert f"was started from {setup.manifest}" in refused["error"], refused
        assert str(setup.manifest) in refused["hint"]
        assert resolved.read_text() == resolution
    code, data = run_json(setup, "port", "--continue", "--repo", str(fork.path))
    assert code == 0, data
    assert "'hi up'" in fork.git("show", f"{BRANCH}:megatron/core/a.py")
