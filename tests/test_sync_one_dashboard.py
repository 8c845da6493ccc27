"""One dashboard under concurrent syncs (issue 37, item 8): two `forkctl sync` runs on the same fork
at once, both finding a conflict, both looked for the dashboard before either made it, and made two.
Now the look-up and the making happen under one lock per fork repository in forkctl's cache, and the
second run, once it holds the lock, finds the first one's issue. Two real processes, the recording
stand-in for gh of tests/test_sync.py behind a wrapper whose `list` answers take a second (so the two
look-ups overlap) and which runs one gh at a time (the stand-in keeps its state in one file)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.chain import make_chain
from tests.test_gh_ours import FORK
from tests.test_sync import HELPER_HELLO, FakeGh, bridge_upstream_pins, upstream_commit

WRAPPER = """#!{python}
import fcntl, os, sys, time
if sys.argv[2:3] == ["list"]:
    time.sleep(1.0)  # what the other run may do meanwhile
lock = os.open({lock!r}, os.O_RDWR | os.O_CREAT)
os.set_inheritable(lock, True)
fcntl.flock(lock, fcntl.LOCK_EX)  # held across exec, released when the stand-in exits
os.execv({fake!r}, [{fake!r}, *sys.argv[1:]])
"""


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)


@pytest.mark.slow
def test_two_syncs_at_once_keep_one_dashboard(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    chain = make_chain(tmp_path)
    gh = FakeGh(tmp_path, monkeypatch)
    upstream_commit(chain, "refactor: helper shouts (#42)", {"megatron/core/a.py": HELPER_HELLO})
    target = upstream_commit(chain, "upstream: unrelated 2", {"megatron/core/sub/f.py": "F = 1\n"})
    bridge_upstream_pins(chain, target)
    wrapper = tmp_path / "bin-slow" / "gh"
    wrapper.parent.mkdir()
    fake = str(tmp_path / "bin-gh" / "gh")
    wrapper.write_text(WRAPPER.format(python=sys.executable, lock=str(tmp_path / "gh.lock"), fake=fake))
    wrapper.chmod(0o755)
    env = {**os.environ, "PATH": f"{wrapper.parent}:{tmp_path / 'bin-gh'}"}
    command = [
        sys.executable,
        "-m",
        "forkctl",
        "--manifest",
        str(chain.manifest),
        "sync",
        "--no-gate",
        "--json",
    ]
    runs = [
        subprocess.Popen(command, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    done = [run.communicate(timeout=300) for run in runs]
    reports = [json.loads(out) for out, _ in done]
    assert [run.returncode for run in runs] == [1, 1], [
        err.decode()[-2000:] for _, err in done
    ]  # the conflict
    issues = [i for i in gh.items("issue") if i["repo"] == FORK]
    assert len(issues) == 1, issues
    actions = sorted(r["dashboard"]["action"] for r in reports)
    assert actions[0] == "created" and actions[1] in ("unchanged", "updated"), actions
    assert {r["dashboard"]["number"] for r in reports} == {issues[0]["number"]}
