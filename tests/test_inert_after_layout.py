"""Output is inert after layout (issue 37): a line is checked after it is wrapped, on every channel.

GitHub's runner executes a line of a step's output that starts with `::` once leading blanks are trimmed.
Escaping data before it is wrapped is not enough: a long `.gitmodules` URL or an upstream commit subject
with a space before `::stop-commands::` is wrapped there, and the continuation line then starts with
`::`. forkctl runs here as a CI job runs it, a child process whose stdout and stderr a runner reads.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.chain import BRIDGE_GITLINK, make_chain, url
from tests.gitrepos import git
from tests.seriesrepo import make_series, run_json

COMMANDS = " ::stop-commands::tok ::add-mask::secret ##[warning]forged"
OWN_ANNOTATION_RE = re.compile(r"::(error|warning|notice)(?: [^:]*)?::.*")


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


def as_ci(manifest: Path, cwd: Path, *args: str, width: str = "") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "PYTEST_", "COLUMNS"))}
    env |= {"GITHUB_STEP_SUMMARY": str(cwd / "summary.md"), "GITHUB_WORKSPACE": str(cwd)}
    env |= {"FORKCTL_LOG_WIDTH": width} if width else {}
    return subprocess.run(
        [sys.executable, "-m", "forkctl", "--manifest", str(manifest), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
    )


def assert_inert(text: str) -> None:
    """No line the runner would execute but forkctl's own annotations (which start the line)."""
    for line in text.splitlines():
        assert "##[" not in line, line
        if line.lstrip().startswith("::"):
            assert line == line.lstrip() and OWN_ANNOTATION_RE.fullmatch(line), line


@pytest.mark.parametrize("width", ["", "40", "77"])
def test_a_long_gitmodules_url_wrapped_in_a_table_and_a_progress_note_stays_inert(
    tmp_path: Path, width: str
) -> None:
    chain = make_chain(tmp_path)
    work = chain.bridge_work
    work.git(
        "config",
        "-f",
        ".gitmodules",
        f"submodule.{BRIDGE_GITLINK}.url",
        url(chain.fork) + "/" + "a" * 90 + COMMANDS,
    )
    chain.pin_bridge(chain.head)
    result = as_ci(chain.manifest, tmp_path, "check-pins", "--github", width=width)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "stop-commands" in result.stdout and "stop-commands" in result.stderr  # shown, not dropped
    assert_inert(result.stdout)
    assert_inert(result.stderr)
    assert_inert((tmp_path / "summary.md").read_text())


def test_an_upstream_commit_subject_wrapped_in_a_cell_stays_inert(tmp_path: Path) -> None:
    setup = make_series(
        tmp_path,
        changes=[("feat: other", {"megatron/core/other.py": "X = 5\n"})],
        extra_upstream_files={"megatron/core/other.py": "X = 1\n"},
    )
    upstream = setup.upstream
    subject = "upstream: rewrite other.py " + " ".join(["with a long reason"] * 8) + COMMANDS
    culprit = upstream.commit(subject, {"megatron/core/other.py": "X = 9\n"})
    fork = tmp_path / "fork.git"
    git(tmp_path, "clone", "-q", "--bare", url(upstream.path), str(fork))
    code, data = run_json(setup, "apply", "--base", setup.base, "--repo", str(fork))
    assert code == 0, data
    result = as_ci(
        setup.manifest,
        tmp_path,
        "status",
        "--onto",
        culprit,
        "--repo",
        str(fork),
        "--first-break",
        "--github",
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "stop-commands" in result.stdout, result.stdout
    assert_inert(result.stdout)
    assert_inert(result.stderr)


@pytest.mark.parametrize("exists", [True, False], ids=["forkctl-error", "usage-error"])
def test_a_wrapped_error_message_stays_inert(tmp_path: Path, exists: bool) -> None:
    """Bad input (exit 2) whose message names data, found by forkctl or by click: its lines on stderr
    and, for forkctl's, its annotations and step summary."""
    setup = make_series(tmp_path)
    missing = tmp_path / ("x" * 100 + COMMANDS)
    if exists:
        missing.mkdir()  # a folder that is no repository
    result = as_ci(setup.manifest, tmp_path, "status", "--onto", "main", "--repo", str(missing), "--github")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "stop-commands" in result.stderr
    assert_inert(result.stdout)
    assert_inert(result.stderr)
    if exists:
        assert_inert((tmp_path / "summary.md").read_text())


def test_a_pull_request_body_holds_no_workflow_command(tmp_path: Path) -> None:
    """The body a CI job writes to a file (and may print): a commit message line in the range-diff
    keeps its indent, so `::` after it would be read as a command."""
    chain = make_chain(tmp_path)
    work = chain.fork_work()
    work.git("checkout", "-q", "--detach", chain.base)
    work.git("am", "-q", "--keep-non-patch", str(chain.patches[0]))
    subject = work.git("log", "-1", "--format=%s")
    work.git("commit", "-q", "--amend", "-m", f"{subject}\n\n::stop-commands::tok\n##[warning]forged")
    work.git("push", "-q", "origin", "HEAD:refs/heads/old-series")
    chain.pin_bridge(work.head())
    result = as_ci(chain.manifest, tmp_path, "describe", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    body = json.loads(result.stdout)["body"]
    assert "stop-commands::tok" in body, body  # shown, not dropped
    assert_inert(body)
    text = as_ci(chain.manifest, tmp_path, "describe")
    assert text.returncode == 0 and "stop-commands" in text.stdout
    assert_inert(text.stdout)
