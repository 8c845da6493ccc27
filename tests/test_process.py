"""forkctl.process, the one way forkctl runs a child: real children that start grandchildren, real
timeouts and real signals, and a look at the process table afterwards."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from forkctl import process
from forkctl.git import runner
from tests.sigint import sigint_delivered  # noqa: F401 (a fixture)
from tests.test_signals import _state

ROOT = Path(__file__).resolve().parent.parent


def _gone(pid: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while _state(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return _state(pid) is None


def _pid_in(path: Path, within: float = 30.0) -> int:
    deadline = time.monotonic() + within
    while not path.is_file() or not path.read_text().strip():
        assert time.monotonic() < deadline, f"{path} was never written"
        time.sleep(0.05)
    return int(path.read_text())


def _end(driver: subprocess.Popen, pid_file: Path) -> None:
    """Whatever a failed test left running: the grandchild named in `pid_file`, and the driver."""
    if pid_file.is_file() and pid_file.read_text().strip() and _state(int(pid_file.read_text())):
        os.kill(int(pid_file.read_text()), signal.SIGKILL)
    if _state(driver.pid):
        driver.kill()
    driver.wait(timeout=10)


def test_text_bytes_input_merged_output_and_check(tmp_path: Path) -> None:
    done = process.run(["sh", "-c", "cat; echo oops >&2; exit 3"], timeout=30, input="héllo\n", text=True)
    assert (done.returncode, done.stdout, done.stderr) == (3, "héllo\n", "oops\n")
    raw = process.run(["sh", "-c", "printf '\\377'; echo err >&2"], timeout=30, merge_stderr=True)
    assert raw.stdout == b"\xfferr\n" and raw.stderr == b""
    assert process.run(["pwd"], timeout=30, cwd=tmp_path, text=True).stdout.strip() == str(tmp_path)
    with pytest.raises(process.Failed) as failed:
        process.run(["sh", "-c", "exit 4"], timeout=30, check=True)
    assert failed.value.exited.returncode == 4


def test_a_timeout_kills_the_grandchild_and_keeps_what_was_written() -> None:
    started = time.monotonic()
    with pytest.raises(process.TimedOut) as late:
        process.run(["sh", "-c", "sleep 300 & echo $!; wait"], timeout=1, text=True)
    assert time.monotonic() - started < 30
    assert _gone(int(str(late.value.stdout)))


def test_git_has_a_time_limit_that_ends_what_git_started(tmp_path: Path) -> None:
    # Before: run_bytes (one of the four ways to run git then) took no timeout: a hanging git hung forkctl.
    pid_file = tmp_path / "pid"
    hang = f"alias.hang=!sleep 300 & echo $! > {pid_file}; wait"
    with pytest.raises(runner.GitTimeout):
        runner.git(["-c", hang, "hang"], cwd=tmp_path, timeout=1)
    assert _gone(_pid_in(pid_file))


DRIVER = """
import sys
from pathlib import Path
from forkctl.gpu import signing
print("started", flush=True)
signing.sign(Path(sys.argv[1]), Path(sys.argv[2]))
"""


@pytest.mark.usefixtures("sigint_delivered")  # Ctrl-C reaches the child, even from a background job
def test_ctrl_c_while_ssh_keygen_signs_ends_its_whole_group(tmp_path: Path) -> None:
    # Before: gpu/signing.py used subprocess.run, which kills only ssh-keygen itself, not what it started.
    pid_file = tmp_path / "pid"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "ssh-keygen"
    fake.write_text(f"#!/bin/sh\nsleep 300 &\necho $! > {pid_file}\nwait\n")
    fake.chmod(0o755)
    (tmp_path / "evidence.json").write_text("{}")
    (tmp_path / "key").write_text("not used: the fake ssh-keygen never reads it")
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(tmp_path / "evidence.json"), str(tmp_path / "key")],
        env={**os.environ, "PYTHONPATH": str(ROOT), "PATH": f"{bin_dir}:{os.environ['PATH']}"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert driver.stdout is not None and driver.stdout.readline() == b"started\n"
        grandchild = _pid_in(pid_file)
        os.kill(driver.pid, signal.SIGINT)
        driver.wait(timeout=20)
        assert _gone(grandchild), "ssh-keygen's group outlived Ctrl-C"
    finally:
        _end(driver, pid_file)


SIGTERM_DRIVER = """
import sys
from forkctl import process
process.run(["sh", "-c", "sleep 300 & echo $! > " + sys.argv[1] + "; wait"], timeout=600)
"""


# The same, but the driver is held for a second right after the child starts, as a loaded machine's
# scheduler may hold it: the SIGTERM lands between the child's start and the wait (a flaky failure of the
# test above under load). Only the timing is changed, by a Popen that sleeps once it has started the child.
SIGTERM_WHILE_STARTING_DRIVER = """
import subprocess, sys, time

class HeldAfterStart(subprocess.Popen):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        time.sleep(1.0)

subprocess.Popen = HeldAfterStart
from forkctl import process
process.run(["sh", "-c", "sleep 300 & echo $! > " + sys.argv[1] + "; wait"], timeout=600)
"""


@pytest.mark.parametrize(
    "driver_code",
    [SIGTERM_DRIVER, SIGTERM_WHILE_STARTING_DRIVER],
    ids=["while-it-waits", "while-the-child-starts"],
)
def test_sigterm_under_its_default_disposition_ends_the_group_then_the_process(
    tmp_path: Path, driver_code: str
) -> None:
    pid_file = tmp_path / "pid"
    driver = subprocess.Popen(
        [sys.executable, "-c", driver_code, str(pid_file)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        start_new_session=True,
    )
    try:
        grandchild = _pid_in(pid_file)
        os.kill(driver.pid, signal.SIGTERM)
        assert driver.wait(timeout=20) == -signal.SIGTERM  # died of the signal, as it would have
        assert _gone(grandchild), "the child's group outlived SIGTERM"
    finally:
        _end(driver, pid_file)
