"""Ctrl-C and SIGTERM end forkctl and the git it runs: a real forkctl process blocked in a real git
talking to a server that never answers, a real signal, and a look at the process table afterwards."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sigint import sigint_delivered  # noqa: F401 (the fixture below)

# Ctrl-C reaches what these tests start even when the suite runs as a background job.
pytestmark = pytest.mark.usefixtures("sigint_delivered")
ROOT = Path(__file__).resolve().parent.parent


def _state(pid: int) -> str | None:
    """The process's state letter from /proc, None when it is gone (a zombie counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    state = stat.rsplit(")", 1)[1].split()[0]
    return None if state in ("Z", "X") else state


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def _descendants(pid: int) -> list[int]:
    pending, seen = [pid], []
    while pending:
        for child in _children(pending.pop()):
            seen.append(child)
            pending.append(child)
    return seen


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A TCP port that accepts connections and never says a word (a stalled git daemon)."""
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except TimeoutError:
                continue
            except OSError:
                return

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    for connection in held:
        connection.close()
    server.close()


@pytest.mark.parametrize(
    ("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["term", "int"]
)
def test_a_signal_ends_forkctl_and_its_git_child(
    tmp_path: Path, silent_server: int, signum: int, code: int
) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "FORKCTL_CACHE": str(tmp_path / "cache"),
        "FORKCTL_NETWORK_TIMEOUT": "600",
    }
    spec = f"git://127.0.0.1:{silent_server}/fork.git@main:manifest.yaml"
    forkctl = subprocess.Popen(
        [sys.executable, "-m", "forkctl", "--manifest", spec, "lint"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    children: list[int] = []
    try:
        deadline = time.monotonic() + 30
        while not children and time.monotonic() < deadline:
            time.sleep(0.1)
            children = [pid for pid in _descendants(forkctl.pid) if _state(pid)]
        assert children, "forkctl never started git"
        time.sleep(0.5)  # let git reach the server and block on its answer
        children = [pid for pid in _descendants(forkctl.pid) if _state(pid)]
        os.kill(forkctl.pid, signum)
        _, stderr = forkctl.communicate(timeout=20)
        assert forkctl.returncode == code, stderr
        assert b"Traceback" not in stderr
        deadline = time.monotonic() + 5
        while any(_state(pid) for pid in children) and time.monotonic() < deadline:
            time.sleep(0.05)
        survivors = [pid for pid in children if _state(pid)]
        assert not survivors, f"git processes {survivors} outlived forkctl"
    finally:
        for pid in [forkctl.pid, *children]:
            if _state(pid):
                os.kill(pid, signal.SIGKILL)
        forkctl.wait(timeout=10)


def test_sigterm_while_a_file_is_written_leaves_no_temp_file_in_the_users_checkout(tmp_path: Path) -> None:
    """A real SIGTERM right before `fork-base --write` renames its temp file into place: the command
    ends with 143 and the fork checkout holds neither a half-written record nor the temp file."""
    import json

    from tests.gitrepos import init_repo
    from tests.toolkit import make_toolkit

    toolkit = make_toolkit(tmp_path)
    fork = init_repo(tmp_path / "fork", {"README.md": "fork\n"})
    target = fork.path / ".fork-base.json"
    request = {
        "argv": ["--manifest", str(toolkit.manifest), "fork-base", "--repo", str(fork.path), "--write"],
        "kill_before": 1,
        "anchor": ["replace", str(target)],
        "signal": "SIGTERM",
    }
    done = subprocess.run(
        [sys.executable, "-m", "tests.killpoints"],
        input=json.dumps(request) + "\n",
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "FORKCTL_CACHE": str(tmp_path / "cache")},
        timeout=120,
    )
    answer = json.loads(done.stdout)
    assert not answer["killed"] and answer["exit_code"] == 143, answer
    assert sorted(p.name for p in fork.path.iterdir()) == [".git", "README.md"]


DRIVER = """
import sys
from forkctl.gpu import process
print("started", flush=True)
process.run(["sh", "-c", "sleep 600 & echo $! ; wait"], timeout=600)
"""


def test_ctrl_c_during_a_validate_child_ends_the_childs_group(tmp_path: Path) -> None:
    """`forkctl validate` runs pytest and the benchmark in their own session (gpu/process.py): Ctrl-C
    reaches only forkctl, so forkctl must end the child's group itself, grandchildren included."""
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    children: list[int] = []
    try:
        assert driver.stdout is not None and driver.stdout.readline() == b"started\n"
        deadline = time.monotonic() + 30
        while len(children) < 2 and time.monotonic() < deadline:  # sh and its sleep
            time.sleep(0.1)
            children = [pid for pid in _descendants(driver.pid) if _state(pid)]
        assert len(children) >= 2, children
        os.kill(driver.pid, signal.SIGINT)
        driver.wait(timeout=20)
        deadline = time.monotonic() + 5
        while any(_state(pid) for pid in children) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [pid for pid in children if _state(pid)], "the child's group outlived Ctrl-C"
    finally:
        for pid in [driver.pid, *children]:
            if _state(pid):
                os.kill(pid, signal.SIGKILL)
        driver.wait(timeout=10)


# Ctrl-C while the verb's module is being imported: outside the command's body, inside click's parsing.
# A finder ahead of the usual ones sends the process a real SIGINT when that import starts.
_CTRL_C_AT_IMPORT = """
import os, signal, sys
class CtrlC:
    def find_spec(self, name, path=None, target=None):
        if name == "forkctl.commands.status":
            os.kill(os.getpid(), signal.SIGINT)
        return None
sys.meta_path.insert(0, CtrlC())
sys.argv = ["forkctl", "status"]
from forkctl.cli import main
main()
"""


def test_ctrl_c_before_the_command_body_runs_exits_130(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _CTRL_C_AT_IMPORT],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT), "FORKCTL_CACHE": str(tmp_path / "cache")},
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 130, done.stderr
    assert b"Traceback" not in done.stderr
    assert b"interrupted" in done.stderr


def test_the_ctrl_c_tests_hold_when_the_suite_starts_with_sigint_ignored(tmp_path: Path) -> None:
    """A shell starts a background job (`make test &`, `( .ci/run & )`, nohup) with SIGINT ignored, and
    an ignored signal stays ignored across exec: forkctl then rightly ignores Ctrl-C as any background
    job does, and the Ctrl-C tests failed (seen on 2026-12-06, `.ci/run` started in the background as a
    non-root user). The suite puts SIGINT back to its default for the processes it starts."""
    ignore_sigint = "import signal; signal.signal(signal.SIGINT, signal.SIG_IGN)"
    nodeid = f"{Path(__file__).name}::test_ctrl_c_before_the_command_body_runs_exits_130"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            f"{ignore_sigint}; import sys, pytest; sys.exit(pytest.main(sys.argv[1:]))",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--rootdir={ROOT}",
            str(Path(__file__).parent / nodeid),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "1 passed" in done.stdout
