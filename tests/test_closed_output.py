"""A reader that goes away (`forkctl check-pins | head -1`) is not a bug: forkctl ends quietly, with no
crash log and no traceback, and exits as the verb would have (or 141, as SIGPIPE would, when the
verb had not finished). Real processes whose stdout (and stderr) is a pipe nobody reads."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.chain import make_chain
from tests.toolkit import make_toolkit

ROOT = Path(__file__).resolve().parent.parent


def _run(args: list[str], tmp: Path, close_stderr: bool = False) -> tuple[int, str, list[str]]:
    """forkctl with its stdout (and stderr) a pipe whose reading end is already closed: (exit code,
    what reached stderr, crash logs written)."""
    crash_dir = tmp / "crash-logs"
    crash_dir.mkdir(exist_ok=True)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "FORKCTL_CACHE": str(tmp / "cache"),
        "TMPDIR": str(crash_dir),  # where a crash log would go (tempfile.mkstemp)
    }
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "forkctl", *args],
            stdout=write,
            stderr=write if close_stderr else subprocess.PIPE,
            env=env,
            cwd=tmp,
            timeout=120,
        )
    finally:
        os.close(write)
    stderr = (done.stderr or b"").decode(errors="replace")
    return done.returncode, stderr, [p.name for p in crash_dir.iterdir()]


def _exit_code(args: list[str], tmp: Path) -> int:
    """The same command's exit code when its output is read."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FORKCTL_CACHE": str(tmp / "cache")}
    return subprocess.run(
        [sys.executable, "-m", "forkctl", *args], capture_output=True, env=env, cwd=tmp, timeout=120
    ).returncode


@pytest.mark.parametrize("extra", [[], ["--json"], ["--github"]], ids=["text", "json", "github"])
def test_a_closed_stdout_ends_quietly_with_the_verbs_exit(tmp_path: Path, extra: list[str]) -> None:
    toolkit = make_toolkit(tmp_path / "t")
    args = ["--manifest", str(toolkit.manifest), "status", *extra]
    code, stderr, crashes = _run(args, tmp_path)
    assert (code, crashes) == (_exit_code(args, tmp_path), []), stderr
    assert code == 0
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr and "Exception ignored" not in stderr


def test_a_failing_verb_into_a_closed_pipe_still_exits_1(tmp_path: Path) -> None:
    """`status --repo` with a stale patch, into `| head -1`: CI with pipefail still reads the failure."""
    toolkit = make_toolkit(tmp_path / "t")
    new_base = toolkit.upstream.commit(
        "upstream edits a.py", {"megatron/core/a.py": "def a():\n    return 42\n"}
    )
    data = toolkit.manifest_data()
    data["upstream"]["base"] = new_base
    toolkit.write_manifest(data)
    code, stderr, crashes = _run(
        ["--manifest", str(toolkit.manifest), "status", "--repo", str(toolkit.upstream.path)], tmp_path
    )
    assert (code, crashes) == (1, []), stderr
    assert "Traceback" not in stderr and "unexpected error" not in stderr


def test_check_pins_with_both_streams_closed_ends_quietly(tmp_path: Path) -> None:
    """`forkctl check-pins 2>&1 | head -1`: the progress notes on stderr find the pipe closed first."""
    chain = make_chain(tmp_path / "c")
    args = ["--manifest", str(chain.manifest), "check-pins"]
    code, _, crashes = _run(args, tmp_path, close_stderr=True)
    assert crashes == []
    assert code == _exit_code(args, tmp_path)


def test_a_usage_error_into_a_closed_pipe_writes_no_crash_log(tmp_path: Path) -> None:
    code, stderr, crashes = _run(["status", "--no-such-option", "--json"], tmp_path)
    assert (code, crashes) == (2, []), stderr
