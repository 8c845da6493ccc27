"""A stopped port's state, edited by hand: read strictly, so a value forkctl did not write is refused as
unreadable (exit 2, the way out named) instead of ending up in a commit message or a patch file."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.seriesrepo import SeriesSetup, make_series, run_json
from tests.test_port import BRANCH, prepared_fork

Edit = Callable[[dict[str, Any]], None]


def _port_data(state: dict[str, Any]) -> dict[str, Any]:
    # Where the port keeps its own data: `port` (typed), or `extra` in the states of older forkctl.
    return state["port"] if "port" in state else state["extra"]


def _old_commit(value: object) -> Edit:
    def edit(state: dict[str, Any]) -> None:
        _port_data(state)["old_commits"][state["conflict_index"]] = value

    return edit


def _port_field(key: str, value: object) -> Edit:
    return lambda state: _port_data(state).__setitem__(key, value)


def _step_commit(value: object) -> Edit:
    return lambda state: state["steps"][0].__setitem__("commit", value)


EDITS: dict[str, Edit] = {
    "old commit '-'": _old_commit("-"),
    "old commit abbreviated": _old_commit("abc1234"),
    "old commit a number": _old_commit(7),
    "old base not a SHA": _port_field("old_base", "HEAD~1"),
    "old commits not a list": _port_field("old_commits", "-"),
    "backport a string": _port_field("backport", "yes"),
    "a step's commit '-'": _step_commit("-"),
    "conflict parent '-'": lambda state: state.__setitem__("conflict_parent", "-"),
    "base uppercase": lambda state: state.__setitem__("base", state["base"].upper()),
}


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SeriesSetup:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    return make_series(tmp_path)


@pytest.mark.parametrize("label", sorted(EDITS))
def test_a_hand_edited_port_state_is_refused_and_abort_still_works(
    setup: SeriesSetup, tmp_path: Path, label: str
) -> None:
    new_base = setup.upstream.commit(
        "upstream edits helper",
        {"megatron/core/a.py": "def a():\n    return 1\n\n\ndef helper():\n    return 'up'\n"},
    )
    fork = prepared_fork(setup, tmp_path)
    tip = fork.head(BRANCH)
    code, data = run_json(setup, "port", "--onto", new_base, "--repo", str(fork.path))
    assert code == 1, data
    (Path(data["conflict"]["worktree"]) / "megatron/core/a.py").write_text(
        "def a():\n    return 10\n\n\ndef helper():\n    return 'hi up'\n"
    )
    patches = {path: path.read_bytes() for path in (setup.root / "patches").rglob("*.patch")}
    manifest = setup.manifest.read_bytes()
    state_file = fork.path / "forkctl" / "build-state.json"
    state = json.loads(state_file.read_text())
    EDITS[label](state)
    state_file.write_text(json.dumps(state, indent=2))

    code, data = run_json(setup, "port", "--continue", "--repo", str(fork.path))
    assert code == 2, data
    assert "unreadable" in data["error"] and "port --abort" in str(data.get("hint")), data
    assert {path: path.read_bytes() for path in (setup.root / "patches").rglob("*.patch")} == patches
    assert setup.manifest.read_bytes() == manifest and fork.head(BRANCH) == tip

    code, data = run_json(setup, "port", "--abort", "--repo", str(fork.path))
    assert code == 0 and data["aborted"] is True, data
    assert not state_file.exists() and fork.head(BRANCH) == tip


def test_a_port_state_written_before_the_typed_fields_is_refused_with_the_way_out(
    setup: SeriesSetup, tmp_path: Path
) -> None:
    new_base = setup.upstream.commit(
        "upstream edits helper", {"megatron/core/a.py": "def a():\n    return 2\n"}
    )
    fork = prepared_fork(setup, tmp_path)
    code, data = run_json(setup, "port", "--onto", new_base, "--repo", str(fork.path))
    assert code == 1, data
    state_file = fork.path / "forkctl" / "build-state.json"
    state = json.loads(state_file.read_text())
    state["extra"] = state.pop("port")  # how forkctl wrote a port's data before
    state_file.write_text(json.dumps(state))
    code, data = run_json(setup, "port", "--continue", "--repo", str(fork.path))
    assert code == 2 and "unreadable" in data["error"] and "port --abort" in str(data.get("hint")), data
    code, data = run_json(setup, "port", "--abort", "--repo", str(fork.path))
    assert code == 0 and data["aborted"] is True, data
