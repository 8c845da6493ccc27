"""A stopped apply's ways on work as printed: `forkctl apply --continue` / `--abort` carry the `--repo`
(or `--upstream-repo`) and the `--manifest` the run was given, so a shell in another folder finishes the
stop instead of answering "no apply in progress" (issue 34, item 6)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.onpath import forkctl_env
from tests.seriesrepo import SeriesSetup, clone, insert_patch, run_json
from tests.test_apply import BRANCH, add_conflicting_patch, make_series, stop_left_by_an_earlier_forkctl


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SeriesSetup:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    return make_series(tmp_path)


def printed(hint: str, verb: str) -> str:
    found = re.search(rf"(forkctl apply --{verb}\b[^;]*)", hint)
    assert found, hint
    return found.group(1).strip()


def test_the_continue_a_stopped_apply_prints_works_from_another_folder(
    setup: SeriesSetup, tmp_path: Path
) -> None:
    add_conflicting_patch(setup)  # patch 2 conflicts on the base
    initial = setup.upstream.head(f"{setup.base}^")
    insert_patch(  # and patch 4, written where b.py said 2: it conflicts with patch 2's resolution too
        setup,
        3,
        initial,
        "fix(core): b returns 4",
        {"megatron/core/b.py": "def b():\n    return 4\n"},
        "2026-02-01T13:00:00+00:00",
    )
    repo = clone(setup.upstream, tmp_path / "r", bare=True)
    worktree = stop_left_by_an_earlier_forkctl(setup, repo)
    (worktree / "megatron/core/b.py").write_text("def b():\n    return 33\n")
    code, data = run_json(setup, "apply", "--continue", "--repo", str(repo.path))
    assert code == 1, data
    assert data["conflict"]["subject"] == "fix(core): b returns 4", data
    hint = data["problems"][0]["hint"]
    command = printed(hint, "continue")
    assert (
        f"--repo {repo.path.absolute()}" in command and f"--manifest {setup.manifest.absolute()}" in command
    )
    (Path(data["conflict"]["worktree"]) / "megatron/core/b.py").write_text("def b():\n    return 44\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = forkctl_env(tmp_path / "bin")
    done = subprocess.run(command, shell=True, cwd=elsewhere, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert repo.git("show", f"{BRANCH}:megatron/core/b.py") == "def b():\n    return 44"
    assert "forkctl apply --abort" in hint and printed(hint, "abort").startswith(
        "forkctl apply --abort --repo"
    )
