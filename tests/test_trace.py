"""FORKCTL_TRACE logs every git call a command makes (argv, cwd, duration, exit status), credentials
redacted; git's own GIT_TRACE* variables reach git, its stderr ones on forkctl's stderr, never in the
output forkctl reads from git. Counted against tests/gitshim.py, which records every git exec."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from forkctl.cli import cli
from forkctl.errors import BadInput
from forkctl.git import remote
from tests.gitshim import make_git_shim
from tests.seriesrepo import SeriesSetup, clone, make_series

ROOT = Path(__file__).resolve().parent.parent
LINE = re.compile(r"^forkctl trace: git (?P<argv>.*) \| cwd (?P<cwd>\S+) \| (?P<what>.*)$")


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SeriesSetup:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    return make_series(tmp_path)


def apply_args(setup: SeriesSetup, fork: Path) -> list[str]:
    return ["--manifest", str(setup.manifest), "apply", "--base", setup.base, "--repo", str(fork), "--json"]


def subcommand(argv: str) -> str:
    words = shlex.split(argv)
    while words and words[0].startswith("-"):
        words = words[2:] if words[0] in ("-c", "-C", "--git-dir", "--work-tree") else words[1:]
    return words[0] if words else ""


def test_forkctl_trace_names_every_git_call_of_a_command(
    setup: SeriesSetup, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fork = clone(setup.upstream, tmp_path / "fork.git", bare=True)
    shim = make_git_shim(tmp_path)
    trace = tmp_path / "trace.log"
    monkeypatch.setenv("PATH", shim.env()["PATH"])
    monkeypatch.setenv("FORKCTL_TRACE", str(trace))
    result = CliRunner().invoke(cli, apply_args(setup, fork.path))
    assert result.exit_code == 0, result.output
    lines = trace.read_text().splitlines()
    parsed = [LINE.match(line) for line in lines]
    assert all(parsed), lines
    assert [subcommand(m["argv"]) for m in parsed if m] == shim.calls() != []
    for match in parsed:
        assert match is not None and Path(match["cwd"]).is_absolute()
        assert re.fullmatch(r"\d+\.\d ms \| exit -?\d+|started \(answers until closed\)", match["what"])
    assert "forkctl trace" not in result.stdout and "forkctl trace" not in result.stderr


def test_forkctl_trace_1_writes_to_stderr_and_keeps_stdout_clean(
    setup: SeriesSetup, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fork = clone(setup.upstream, tmp_path / "fork.git", bare=True)
    monkeypatch.setenv("FORKCTL_TRACE", "1")
    result = CliRunner().invoke(cli, apply_args(setup, fork.path))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["ok"] is True
    traced = [line for line in result.stderr.splitlines() if line.startswith("forkctl trace: git ")]
    assert any(" commit-tree " in line or " hash-object " in line for line in traced), result.stderr


def test_the_trace_names_no_credentials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trace = tmp_path / "trace.log"
    monkeypatch.setenv("FORKCTL_TRACE", str(trace))
    monkeypatch.setenv("FORKCTL_NETWORK_TIMEOUT", "20")
    with pytest.raises(BadInput):
        remote.ls_remote("https://someone:s3cret-token@127.0.0.1:9/nothing.git")
    text = trace.read_text()
    assert "ls-remote" in text and "s3cret-token" not in text
    assert re.search(r"\| exit [1-9]\d*$", text, re.MULTILINE), text


def test_gits_own_trace_variables_reach_git(
    setup: SeriesSetup, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fork = clone(setup.upstream, tmp_path / "fork.git", bare=True)
    events = tmp_path / "trace2.json"
    monkeypatch.setenv("GIT_TRACE2_EVENT", str(events))
    result = CliRunner().invoke(cli, apply_args(setup, fork.path))
    assert result.exit_code == 0, result.output
    starts = [json.loads(line) for line in events.read_text().splitlines()]
    assert any(event["event"] == "start" and "hash-object" in event["argv"] for event in starts)


def test_git_trace_1_goes_to_forkctls_stderr_not_into_what_forkctl_reads(
    setup: SeriesSetup, tmp_path: Path
) -> None:
    """GIT_TRACE=1 means git's stderr, which forkctl captures and reads: the trace goes to forkctl's own
    stderr instead, and the JSON report (built from git's answers) is the same as without it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    heads = []
    for name, extra in (("plain", {}), ("traced", {"GIT_TRACE": "1"})):
        fork = clone(setup.upstream, tmp_path / f"{name}.git", bare=True)
        done = subprocess.run(
            [sys.executable, "-m", "forkctl", *apply_args(setup, fork.path)],
            env={**env, **extra},
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        heads.append(json.loads(done.stdout)["head"])
        assert ("trace: built-in: git" in done.stderr) == bool(extra), done.stderr
    assert heads[0] == heads[1]
