"""Progress for long work: a live bar on a terminal, plain lines everywhere else, never on stdout."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = """
import time
from forkctl import report
with report.phases("validate") as step:
    step("checking for CUDA")
    time.sleep(0.3)
    step("running the GPU tests")
    time.sleep(0.3)
print("result on stdout")
"""


def _run(stderr_is_terminal: bool) -> tuple[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm", "COLUMNS": "100"}
    if not stderr_is_terminal:
        done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env)
        return done.stdout, done.stderr
    leader, follower = pty.openpty()
    with subprocess.Popen(
        [sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE, stderr=follower, env=env
    ) as child:
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the child closed its end
                break
            if not chunk:
                break
            chunks.append(chunk)
        stdout = child.stdout.read().decode() if child.stdout else ""
    os.close(leader)
    return stdout, b"".join(chunks).decode(errors="replace")


def test_phases_show_a_live_bar_on_a_terminal() -> None:
    stdout, terminal = _run(stderr_is_terminal=True)
    assert stdout == "result on stdout\n"  # stdout stays parseable
    assert "checking for CUDA" in terminal and "running the GPU tests" in terminal
    # The bar: its description and rich's elapsed-time column, drawn with cursor control codes.
    assert "validate" in terminal and "0:00:0" in terminal and "\x1b[" in terminal


def test_phases_are_plain_lines_without_a_terminal() -> None:
    stdout, stderr = _run(stderr_is_terminal=False)
    assert stdout == "result on stdout\n"
    assert stderr.splitlines() == ["checking for CUDA", "running the GPU tests"]
