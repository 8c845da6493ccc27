"""A stopped port's ways on (continue / skip / abort) work as printed, run verbatim by a shell from
another folder, and its message names the upstream commit it stopped on (issue 34, item 6)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from forkctl.series import parse_patch
from tests import onpath
from tests.onpath import forkctl_env
from tests.seriesrepo import SeriesSetup, clone, make_series, run_json

BRANCH = "farai/main"
RESOLVED = "def a():\n    return 10\n\n\ndef helper():\n    return 'hi up'\n"


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SeriesSetup:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    return make_series(tmp_path)


def stopped_port(setup: SeriesSetup, tmp_path: Path) -> tuple[str, dict]:
    """A port with --manifest and --repo that stops at the last patch, three ported before it:
    (the new base, the report)."""
    new_base = setup.upstream.commit(
        "upstream edits helper",
        {"megatron/core/a.py": "def a():\n    return 1\n\n\ndef helper():\n    return 'up'\n"},
    )
    fork = clone(setup.upstream, tmp_path / "fork", bare=True)
    assert run_json(setup, "apply", "--base", setup.base, "--repo", str(fork.path))[0] == 0
    code, data = run_json(setup, "port", "--onto", new_base, "--repo", str(fork.path))
    assert code == 1, data
    return new_base, data


def printed(data: dict, verb: str) -> str:
    """The `forkctl port --VERB ...` command as the stop's hint prints it."""
    hint = data["problems"][0]["hint"]
    found = re.search(rf"(forkctl port --{verb}\b[^;]*)", hint)
    assert found, hint
    return found.group(1).strip()


def run_printed(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`command` through a shell, in `cwd` (not the toolkit), with this environment's forkctl first."""
    env = forkctl_env(cwd.parent / "forkctl-bin")
    return subprocess.run(command, shell=True, cwd=cwd, env=env, capture_output=True, text=True)


def test_the_printed_continue_resumes_the_port(setup: SeriesSetup, tmp_path: Path) -> None:
    new_base, data = stopped_port(setup, tmp_path)
    problem = data["problems"][0]
    # The stop names the upstream commit the patch was ported onto, not the previous patch's new commit.
    ported_before = [step["commit"] for step in data["steps"] if step["commit"]]
    assert len(ported_before) == 3
    assert new_base[:12] in problem["message"]
    assert not any(commit[:12] in problem["message"] for commit in ported_before)
    assert data["conflict"]["commands"]["continue"] == printed(data, "continue")
    (Path(data["conflict"]["worktree"]) / "megatron/core/a.py").write_text(RESOLVED)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = run_printed(printed(data, "continue"), elsewhere)
    assert done.returncode == 0, done.stdout + done.stderr
    assert setup.manifest_data()["upstream"]["base"] == new_base
    fork = tmp_path / "fork"
    shown = subprocess.run(
        ["git", "-C", str(fork), "show", f"{BRANCH}:megatron/core/a.py"], capture_output=True, text=True
    )
    assert "'hi up'" in shown.stdout


@pytest.mark.parametrize("verb", ["skip", "abort"])
def test_the_printed_skip_and_abort_work(setup: SeriesSetup, tmp_path: Path, verb: str) -> None:
    new_base, data = stopped_port(setup, tmp_path)
    before = setup.manifest.read_text()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = run_printed(printed(data, verb), elsewhere)
    assert done.returncode == 0, done.stdout + done.stderr
    manifest = setup.manifest_data()
    if verb == "abort":
        assert setup.manifest.read_text() == before
    else:
        assert manifest["upstream"]["base"] == new_base
        assert [d["reason"] for d in manifest["dropped"]] == ["skipped"]


def run_split(setup: SeriesSetup, *args: str) -> tuple[int, dict, list[str]]:
    """`forkctl <args> --json` as a separate process: (exit code, stdout's document, stderr's lines)."""
    return onpath.run_split(setup.manifest, forkctl_env(setup.root.parent / "forkctl-bin"), *args)


def test_port_and_first_break_tell_their_progress_on_stderr(setup: SeriesSetup, tmp_path: Path) -> None:
    new_base = setup.upstream.commit(
        "upstream edits helper",
        {"megatron/core/a.py": "def a():\n    return 1\n\n\ndef helper():\n    return 'up'\n"},
    )
    fork = clone(setup.upstream, tmp_path / "fork", bare=True)
    assert run_json(setup, "apply", "--base", setup.base, "--repo", str(fork.path))[0] == 0
    subjects = [parse_patch(path).subject for path in setup.patch_files]
    code, data, progress = run_split(
        setup, "status", "--onto", new_base, "--first-break", "--repo", str(fork.path)
    )
    assert code == 1 and data["command"] == "status", data  # stdout stays one JSON document
    assert any("first break" in line and subjects[-1] in line for line in progress), progress
    code, data, progress = run_split(setup, "port", "--onto", new_base, "--repo", str(fork.path))
    assert code == 1 and data["conflict"]["subject"] == subjects[-1], data
    for number, subject in enumerate(subjects, start=1):
        assert any(f"{number}/{len(subjects)}" in line and subject in line for line in progress), progress
    (Path(data["conflict"]["worktree"]) / "megatron/core/a.py").write_text(RESOLVED)
    code, data, progress = run_split(setup, "port", "--continue", "--repo", str(fork.path))
    assert code == 0, data
    assert any("writing" in line for line in progress), progress


def test_the_continue_status_shows_for_a_stopped_port_works_from_another_folder(
    setup: SeriesSetup, tmp_path: Path
) -> None:
    """`forkctl status` found the stop through the manifest: its ways on name that manifest (and the
    clone), so the printed continue resumes from any folder."""
    new_base, _ = stopped_port(setup, tmp_path)
    code, shown = run_json(setup, "status")
    assert code == 0, shown
    commands = shown["in_progress"]["commands"]
    assert f"--manifest {setup.manifest.resolve()}" in commands["continue"], commands
    (Path(shown["in_progress"]["worktree"]) / "megatron/core/a.py").write_text(RESOLVED)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = run_printed(commands["continue"], elsewhere)
    assert done.returncode == 0, done.stdout + done.stderr
    assert setup.manifest_data()["upstream"]["base"] == new_base


def test_continue_with_markers_left_points_at_a_continue_that_works_as_printed(
    setup: SeriesSetup, tmp_path: Path
) -> None:
    """--continue before the conflict is resolved is refused (markers remain); the refusal's own way on
    carries --repo and --manifest, so run from another folder it finds the stopped port again."""
    _, data = stopped_port(setup, tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    first = run_printed(printed(data, "continue") + " --json", elsewhere)
    assert first.returncode == 2, first.stdout + first.stderr
    refused = json.loads(first.stdout)
    assert "conflict markers remain" in refused["error"]
    again = re.search(r"(forkctl port --continue\b[^;()]*)", refused["hint"])
    assert again and "--repo" in again.group(1), refused["hint"]
    second = run_printed(again.group(1).strip() + " --json", elsewhere)
    assert "conflict markers remain" in json.loads(second.stdout)["error"], second.stdout
