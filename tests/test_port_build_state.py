"""A stopped series build keeps its state under names that say what they hold (`build-state.json`, the
scratch `build-worktree`), and a stop left by the previous version (`apply-state.json`, `apply-worktree`,
a dropped patch's evidence as a plain dict) still resumes, aborts and shows in `status`.

The previous version's stop is made here from a real one: its files moved back to the old names (the
worktree with git's own bookkeeping, as that version registered it) and its drop written in the shape
that version wrote, a dict in the order it built it, nulls kept.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.gitrepos import Repo
from tests.seriesrepo import SeriesSetup, make_series, run_json
from tests.test_port import A_TEN, BRANCH, prepared_fork

UPSTREAM_HELPER = "def a():\n    return 10\n\n\ndef helper():\n    return 'up'\n"
RESOLVED = "def a():\n    return 10\n\n\ndef helper():\n    return 'hi up'\n"
CONFLICTED = "megatron/core/a.py"


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SeriesSetup:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    return make_series(tmp_path)


def _stopped(setup: SeriesSetup, tmp_path: Path) -> tuple[Repo, str, str]:
    """A port that dropped patch 1 (upstream took its change) and stopped on patch 4 (upstream rewrote
    helper()): (the fork clone, the commit that absorbed patch 1, the new base)."""
    absorbed_by = setup.upstream.commit("Make a() return ten (#123)", {CONFLICTED: A_TEN})
    new_base = setup.upstream.commit("upstream edits helper", {CONFLICTED: UPSTREAM_HELPER})
    fork = prepared_fork(setup, tmp_path)
    code, data = run_json(setup, "port", "--onto", new_base, "--repo", str(fork.path))
    assert code == 1 and data["conflict"]["paths"] == [CONFLICTED], data
    assert data["steps"][0]["absorbed"]["reason"] == "patch-id", data
    return fork, absorbed_by, new_base


def _as_the_previous_version_left_it(fork: Repo) -> tuple[Path, Path]:
    """Move a stop to the old names, its drop to the old shape: (the state file, the worktree)."""
    folder = fork.path / "forkctl"
    old_worktree, admin = folder / "apply-worktree", fork.path / "worktrees" / "apply-worktree"
    (folder / "build-worktree").rename(old_worktree)
    (fork.path / "worktrees" / "build-worktree").rename(admin)
    (old_worktree / ".git").write_text(f"gitdir: {admin}\n")
    (admin / "gitdir").write_text(f"{old_worktree / '.git'}\n")
    state = json.loads((folder / "build-state.json").read_text())
    (folder / "build-state.json").unlink()
    state["worktree"] = str(old_worktree)
    drop = state["steps"][0]["absorbed"]
    state["steps"][0]["absorbed"] = {
        "subject": drop["subject"],
        "file": drop["file"],
        "reason": drop["reason"],
        "upstream_commit": drop["upstream_commit"],
        "proof": None,
        "base": drop["base"],
        "provenance": drop["provenance"],
    }
    old_state = folder / "apply-state.json"
    old_state.write_text(json.dumps(state, indent=2) + "\n")
    assert len(fork.git("worktree", "list").splitlines()) == 2  # git still knows the moved worktree
    return old_state, old_worktree


def test_a_stopped_port_keeps_its_state_under_the_build_names(setup: SeriesSetup, tmp_path: Path) -> None:
    fork, _, _ = _stopped(setup, tmp_path)
    folder = fork.path / "forkctl"
    assert (folder / "build-state.json").is_file() and (folder / "build-worktree" / CONFLICTED).is_file()
    assert not (folder / "apply-state.json").exists() and not (folder / "apply-worktree").exists()
    _, shown = run_json(setup, "status", "--repo", str(fork.path))
    assert shown["in_progress"]["worktree"] == str(folder / "build-worktree"), shown


def test_a_stop_left_by_the_previous_version_shows_and_continues(setup: SeriesSetup, tmp_path: Path) -> None:
    fork, absorbed_by, new_base = _stopped(setup, tmp_path)
    state_file, worktree = _as_the_previous_version_left_it(fork)
    dev_commit = setup.dev_commits[0]
    first_file = setup.manifest_data()["series"][0]["file"]

    code, shown = run_json(setup, "status", "--repo", str(fork.path))
    progress = shown["in_progress"]
    assert progress["operation"] == "port" and progress["worktree"] == str(worktree), shown
    assert progress["unresolved"] == [CONFLICTED], shown

    (worktree / CONFLICTED).write_text(RESOLVED)
    code, data = run_json(setup, "port", "--continue", "--repo", str(fork.path))
    assert code == 0, data
    assert data["steps"][0]["absorbed"] == {
        "subject": "feat(core): a returns 10",
        "file": first_file,
        "reason": "patch-id",
        "upstream_commit": absorbed_by,
        "proof": None,
        "base": new_base,
        "provenance": [dev_commit],
    }
    # The drop reaches the manifest as the previous version wrote it: the same keys, in the same order.
    assert setup.manifest.read_text().endswith(
        "dropped:\n"
        "  - subject: 'feat(core): a returns 10'\n"
        f"    file: {first_file}\n"
        "    reason: patch-id\n"
        f"    upstream_commit: {absorbed_by}\n"
        f"    base: {new_base}\n"
        "    provenance:\n"
        f"    - {dev_commit}\n"
    )
    assert "'hi up'" in fork.git("show", f"{BRANCH}:{CONFLICTED}")
    assert not state_file.exists() and not worktree.exists() and not (fork.path / "forkctl").exists()
    assert len(fork.git("worktree", "list").splitlines()) == 1
    code, shown = run_json(setup, "status", "--repo", str(fork.path))
    assert shown["in_progress"] is None, shown


def test_a_stop_left_by_the_previous_version_aborts(setup: SeriesSetup, tmp_path: Path) -> None:
    manifest = setup.manifest.read_bytes()
    fork, _, _ = _stopped(setup, tmp_path)
    tip = fork.head(BRANCH)  # a stopped port moves no ref
    state_file, worktree = _as_the_previous_version_left_it(fork)
    code, data = run_json(setup, "port", "--abort", "--repo", str(fork.path))
    assert code == 0 and data["aborted"] is True, data
    assert setup.manifest.read_bytes() == manifest and fork.head(BRANCH) == tip
    assert not state_file.exists() and not worktree.exists() and not (fork.path / "forkctl").exists()
    assert len(fork.git("worktree", "list").splitlines()) == 1
    code, shown = run_json(setup, "status", "--repo", str(fork.path))
    assert shown["in_progress"] is None, shown
