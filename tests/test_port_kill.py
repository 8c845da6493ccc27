"""SIGKILL at every point of a port's finishing phase (and at points before it): every ref, patch file
and the manifest is old or new, never a mix, no temp file is left in the toolkit, and a stopped port is
finished by --continue or undone exactly by --abort. The kill points are the port's own side effects
(tests/killpoints.py), so every run is the same."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.gitrepos import Repo
from tests.seriesrepo import SeriesSetup, clone, make_series, run_json

BRANCH = "farai/main"


def snapshot(setup: SeriesSetup, fork: Repo) -> dict[str, object]:
    files = {
        str(p.relative_to(setup.root)): p.read_bytes() for p in sorted(setup.root.rglob("*")) if p.is_file()
    }
    return {"files": files, "branch": fork.git("for-each-ref", "refs/heads/")}


def restore(setup: SeriesSetup, fork: Repo, state: dict) -> None:
    for path in sorted(setup.root.rglob("*")):
        if path.is_file():
            path.unlink()
    for rel, content in state["files"].items():  # type: ignore[union-attr]
        target = setup.root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    tip = state["branch"].split()[0]  # type: ignore[union-attr]
    fork.git("update-ref", f"refs/heads/{BRANCH}", tip)


class Killer:
    """tests/killpoints.py in a subprocess: runs forkctl, killed before its Nth side effect."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.killpoints"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def run(
        self, setup: SeriesSetup, kill_before: int, anchor: list[str] | None, *args: str
    ) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        argv = ["--manifest", str(setup.manifest), *args, "--json"]
        request = {"argv": argv, "kill_before": kill_before, "anchor": anchor}
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


@pytest.mark.slow
def test_sigkill_anywhere_leaves_old_or_new_and_continue_or_abort_recovers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parent.parent))
    setup = make_series(tmp_path)
    for number in range(3):
        setup.upstream.commit(f"upstream {number}", {f"megatron/core/up_{number}.py": f"U = {number}\n"})
    # Upstream takes the README patch: the port drops it, renames the patch after it and deletes two files.
    setup.upstream.commit("upstream: readme", {"README.md": "upstream\nforked\n"})
    new_base = setup.upstream.head()
    fork = clone(setup.upstream, tmp_path / "fork.git", bare=True)
    code, data = run_json(setup, "apply", "--base", setup.base, "--repo", str(fork.path))
    assert code == 0, data
    old = snapshot(setup, fork)
    killer = Killer()
    port = ("port", "--onto", new_base, "--repo", str(fork.path))
    full = killer.run(setup, 0, None, *port)
    assert not full["killed"]
    new = snapshot(setup, fork)
    assert new != old
    assert len(new["files"]) == len(old["files"]) - 1  # type: ignore[arg-type]
    state_file = fork.path / "forkctl" / "build-state.json"
    events = full["events"]
    # Kill points in the finishing phase count from its first side effect, the first backup written:
    # a run that first sweeps what a killed one left in the git dir does more before it.
    anchor = next(event for event in events if "/forkctl/backup/" in event[1])
    start = events.index(anchor)
    state_written = events.index(["replace", str(state_file)]) - start + 1
    # Before the state is written a kill leaves the old files and branch: a few points there. After it,
    # every side effect but the deletions inside one rmtree (relative names).
    points: list[tuple[int, list[str] | None]] = [(1, None), (start // 2, None), (2, anchor)]
    points += [
        (n, anchor)
        for n in range(state_written, len(events) - start + 1)
        if Path(events[start + n - 1][1] or "/").is_absolute()
    ]
    outcomes = {"old": 0, "new": 0, "continued": 0, "aborted": 0}
    for trial, (point, since) in enumerate(points):
        restore(setup, fork, old)
        assert snapshot(setup, fork) == old
        assert killer.run(setup, point, since, *port)["killed"], point
        if state_file.exists():
            if trial % 2:
                code, data = run_json(setup, "port", "--continue", "--repo", str(fork.path))
                assert code == 0, (point, data)
                assert snapshot(setup, fork) == new, point
                outcomes["continued"] += 1
            else:
                code, data = run_json(setup, "port", "--abort", "--repo", str(fork.path))
                assert code == 0, (point, data)
                assert snapshot(setup, fork) == old, point
                outcomes["aborted"] += 1
        else:
            now = snapshot(setup, fork)
            assert now in (old, new), f"a kill before side effect {point} (from {since}) left a mix"
            outcomes["new" if now == new else "old"] += 1
        assert not state_file.exists()
    killer.close()
    print("kill outcomes", outcomes)
    assert outcomes["continued"] and outcomes["aborted"] and outcomes["old"] and outcomes["new"]
