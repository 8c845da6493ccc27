"""SIGKILL at many points of a port: every ref, patch file and the manifest is old or new, never a mix,
and a stopped port is finished by --continue or undone exactly by --abort."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.gitrepos import Repo
from tests.seriesrepo import SeriesSetup, clone, make_series

BRANCH = "farai/main"


def forkctl(setup: SeriesSetup, *args: str) -> subprocess.Popen[bytes]:
    code = "import sys; from forkctl.cli import main; sys.argv[0] = 'forkctl'; main()"
    return subprocess.Popen(
        [sys.executable, "-c", code, "--manifest", str(setup.manifest), *args, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def finished(setup: SeriesSetup, *args: str) -> tuple[int, dict]:
    proc = forkctl(setup, *args)
    out, err = proc.communicate(timeout=120)
    return proc.returncode, json.loads(out or b"{}") if out else {"stderr": err.decode()}


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


@pytest.mark.slow
def test_sigkill_anywhere_leaves_old_or_new_and_continue_or_abort_recovers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parent.parent))
    setup = make_series(tmp_path)
    for number in range(30):
        setup.upstream.commit(f"upstream {number}", {f"megatron/core/up_{number}.py": f"U = {number}\n"})
    new_base = setup.upstream.head()
    fork = clone(setup.upstream, tmp_path / "fork.git", bare=True)
    code, data = finished(setup, "apply", "--base", setup.base, "--repo", str(fork.path))
    assert code == 0, data
    old = snapshot(setup, fork)
    started = time.perf_counter()
    code, data = finished(setup, "port", "--onto", new_base, "--repo", str(fork.path))
    full_run = time.perf_counter() - started
    assert code == 0, data
    new = snapshot(setup, fork)
    assert new != old
    state_file = fork.path / "forkctl" / "apply-state.json"
    outcomes = {"old": 0, "new": 0, "continued": 0, "aborted": 0}
    for trial in range(12):
        restore(setup, fork, old)
        assert snapshot(setup, fork) == old
        proc = forkctl(setup, "port", "--onto", new_base, "--repo", str(fork.path))
        time.sleep(full_run * (0.45 + 0.05 * trial))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        time.sleep(0.2)  # git children of the killed process finish what they were doing
        if state_file.exists():
            if trial % 2:
                code, data = finished(setup, "port", "--continue", "--repo", str(fork.path))
                assert code == 0, data
                assert snapshot(setup, fork) == new
                outcomes["continued"] += 1
            else:
                code, data = finished(setup, "port", "--abort", "--repo", str(fork.path))
                assert code == 0, data
                assert snapshot(setup, fork) == old
                outcomes["aborted"] += 1
        else:
            now = snapshot(setup, fork)
            assert now in (old, new), "a kill left a mix of old and new state"
            outcomes["new" if now == new else "old"] += 1
        assert not state_file.exists()
    print("kill outcomes", outcomes)
    assert sum(outcomes.values()) == 12
