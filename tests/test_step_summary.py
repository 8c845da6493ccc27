"""--github appends to $GITHUB_STEP_SUMMARY only when it is a regular file: a FIFO nobody reads (or a
folder) is skipped with a warning instead of hanging the run. Real forkctl processes, real FIFOs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.gitrepos import init_repo
from tests.toolkit import flat, make_toolkit

ROOT = Path(__file__).resolve().parent.parent


def _fork_base(tmp_path: Path, summary: Path) -> subprocess.CompletedProcess[str]:
    toolkit = make_toolkit(tmp_path)
    fork = init_repo(tmp_path / "fork", {"README.md": "fork\n"})
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GITHUB_STEP_SUMMARY": str(summary)}
    return subprocess.run(
        [sys.executable, "-m", "forkctl", "--manifest", str(toolkit.manifest), "fork-base", "--github"],
        cwd=fork.path,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,  # a hang is the failure: the run must end on its own
    )


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_a_step_summary_that_is_not_a_regular_file_is_skipped_with_a_warning(
    tmp_path: Path, kind: str
) -> None:
    summary = tmp_path / "summary"
    if kind == "fifo":
        os.mkfifo(summary)
    else:
        summary.mkdir()
    done = _fork_base(tmp_path, summary)
    assert done.returncode == 1, done.stderr  # the finding: .fork-base.json is missing
    assert "::error" in done.stdout
    assert f"the step summary {summary} is not a regular file" in flat(done.stderr)


def test_a_regular_step_summary_is_still_appended(tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    done = _fork_base(tmp_path, summary)
    assert done.returncode == 1, done.stderr
    text = summary.read_text()
    assert text.startswith("earlier step\n") and ".fork-base.json is missing" in text
