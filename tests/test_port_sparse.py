"""A stopped port checks out only what the conflict needs (issue 34: every stop used to check out all
of the repository's files, 2 s of a 3 s stop on Megatron-LM).

The scratch worktree holds the conflicted files and the patch's own files; every other file stays in
its index (skip-worktree, as a sparse checkout leaves it), so `git status` shows the conflict alone and
the tree `--continue` commits is the whole tree. Each test compares the result with plain `git rebase`
resolved the same way.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from forkctl.cli import cli
from tests.gitrepos import Repo, git
from tests.seriesrepo import SeriesSetup, run_json
from tests.test_port_engine import BRANCH, edited, fork_with_branch, port, setup_with

LONG = "megatron/core/long.py"
OTHER = "megatron/core/other.py"
# Files the conflict does not need: they must stay out of the scratch worktree.
QUIET = {f"megatron/core/quiet/q{number}.py": f"Q = {number}\n" for number in range(12)}


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))


def files_on_disk(worktree: Path) -> set[str]:
    return {
        path.relative_to(worktree).as_posix()
        for path in worktree.rglob("*")
        if path.is_file() and ".git" not in path.relative_to(worktree).parts
    }


def two_patch_setup(tmp_path: Path) -> tuple[SeriesSetup, Repo, str]:
    """Patch 1 edits line 10 of long.py and other.py; patch 2 edits line 15. Upstream edits lines 10
    and 15 as well: both patches conflict. Returns (setup, fork, new base)."""
    setup = setup_with(
        tmp_path,
        [
            ("feat: line 10", {LONG: edited(l10="TEN"), OTHER: "X = 2\n"}),
            ("feat: line 15", {LONG: edited(l10="TEN", l15="FIFTEEN")}),
        ],
    )
    setup.upstream.commit("upstream: many files", QUIET)
    new_base = setup.upstream.commit("upstream: lines 10 and 15", {LONG: edited(l10="UP10", l15="UP15")})
    return setup, fork_with_branch(setup, tmp_path), new_base


def rebased_with(fork: Repo, tmp_path: Path, ends: tuple[str, str, str], answers: list[str]) -> str:
    """The tree plain `git rebase --onto` of `ends` (old base, old head, new base) gives when each
    stop is resolved by writing the next answer to long.py."""
    old_base, old_head, new_base = ends
    work = tmp_path / "rebase-work"
    git(tmp_path, "clone", "-q", str(fork.path), str(work))
    git(work, "checkout", "-q", "--detach", old_head)
    command = ["git", "-c", "user.name=T", "-c", "user.email=t@example.com", "rebase", "-q"]
    done = subprocess.run([*command, "--onto", new_base, old_base], cwd=work, capture_output=True)
    for answer in answers:
        assert done.returncode != 0, "git rebase did not stop"
        (work / LONG).write_text(answer)
        git(work, "add", "--", LONG)
        env = {**os.environ, "GIT_EDITOR": "true"}
        done = subprocess.run([*command[:-2], "rebase", "--continue"], cwd=work, capture_output=True, env=env)
    assert done.returncode == 0, done.stderr
    return git(work, "rev-parse", "HEAD^{tree}")


def test_a_stop_checks_out_only_what_the_conflict_needs(tmp_path: Path) -> None:
    setup, fork, new_base = two_patch_setup(tmp_path)
    code, data = port(setup, fork, new_base)
    assert code == 1, data
    worktree = Path(data["conflict"]["worktree"])
    # The conflicted file and the patch's other file; none of the repository's other files.
    assert files_on_disk(worktree) == {LONG, OTHER}
    assert data["conflict"]["checked_out"] == [LONG, OTHER]
    # Git sees the conflict and nothing else: no file shows as deleted.
    status = git(worktree, "status", "--porcelain").splitlines()
    assert status == [f"UU {LONG}", f"M  {OTHER}"], status
    # Every file is still in the index (the tree --continue commits is the whole tree).
    assert set(QUIET) <= set(git(worktree, "ls-files").splitlines())


def test_continue_after_a_sparse_stop_equals_rebase_resolved_the_same_way(tmp_path: Path) -> None:
    setup, fork, new_base = two_patch_setup(tmp_path)
    first, second = edited(l10="BOTH10", l15="UP15"), edited(l10="BOTH10", l15="BOTH15")
    old_head = fork.head(BRANCH)
    code, data = port(setup, fork, new_base)
    assert code == 1, data
    worktree = Path(data["conflict"]["worktree"])
    (worktree / LONG).write_text(first)
    code, data = run_json(setup, "port", "--continue", "--repo", str(fork.path))
    assert code == 1, data  # the second patch stops in the same worktree
    assert Path(data["conflict"]["worktree"]) == worktree
    # Only the second stop's file: the first stop's resolution is committed and gone from the disk.
    assert files_on_disk(worktree) == {LONG}
    assert git(worktree, "status", "--porcelain").splitlines() == [f"UU {LONG}"]
    (worktree / LONG).write_text(second)
    code, data = run_json(setup, "port", "--continue", "--repo", str(fork.path))
    assert code == 0, data
    expected = rebased_with(fork, tmp_path, (setup.base, old_head, new_base), [first, second])
    assert fork.git("rev-parse", f"{BRANCH}^{{tree}}") == expected


def test_a_file_brought_out_and_edited_during_a_stop_is_committed(tmp_path: Path) -> None:
    setup, fork, new_base = two_patch_setup(tmp_path)
    code, data = port(setup, fork, new_base, "--branch", "ported")
    assert code == 1, data
    worktree = Path(data["conflict"]["worktree"])
    (worktree / LONG).write_text(edited(l10="BOTH10", l15="UP15"))
    # A file outside the checkout, brought out as the stop message says, edited; and a new file.
    quiet = "megatron/core/quiet/q3.py"
    git(worktree, "checkout", "--ignore-skip-worktree-bits", "--", quiet)
    (worktree / quiet).write_text("Q = 'resolved'\n")
    (worktree / "megatron/core/quiet/new.py").write_text("NEW = 1\n")
    code, data = run_json(setup, "port", "--continue", "--repo", str(fork.path))
    assert code == 1, data
    stop_worktree = Path(data["conflict"]["worktree"])
    (stop_worktree / LONG).write_text(edited(l10="BOTH10", l15="BOTH15"))
    code, data = run_json(setup, "port", "--continue", "--repo", str(fork.path))
    assert code == 0, data
    assert fork.git("show", f"ported:{quiet}") == "Q = 'resolved'"
    assert fork.git("show", "ported:megatron/core/quiet/new.py") == "NEW = 1"
    for path, content in QUIET.items():
        if path != quiet:
            assert fork.git("show", f"ported:{path}") + "\n" == content


def test_the_stop_message_says_what_is_checked_out(tmp_path: Path) -> None:
    setup, fork, new_base = two_patch_setup(tmp_path)
    result = CliRunner().invoke(
        cli, ["--manifest", str(setup.manifest), "port", "--onto", new_base, "--repo", str(fork.path)]
    )
    assert result.exit_code == 1, result.output
    flat = " ".join(result.output.split())
    assert "only the conflicted files and the patch's files are checked out" in flat, result.output
    assert "git checkout --ignore-skip-worktree-bits -- PATH" in flat, result.output


def test_a_stop_after_skip_shows_only_its_own_files(tmp_path: Path) -> None:
    """--skip leaves the first stop's conflict unresolved in the worktree's index: the next stop
    replaces it, and only the next conflict is there."""
    setup, fork, new_base = two_patch_setup(tmp_path)
    code, data = port(setup, fork, new_base)
    assert code == 1, data
    worktree = Path(data["conflict"]["worktree"])
    code, data = run_json(setup, "port", "--skip", "--repo", str(fork.path))
    assert code == 1, data  # patch 2 stops on line 15
    assert files_on_disk(worktree) == {LONG}
    assert git(worktree, "status", "--porcelain").splitlines() == [f"UU {LONG}"]
    (worktree / LONG).write_text(edited(l10="UP10", l15="BOTH15"))
    code, data = run_json(setup, "port", "--continue", "--repo", str(fork.path))
    assert code == 0, data
    assert fork.git("show", f"{BRANCH}:{OTHER}") == "X = 1"  # patch 1 skipped: upstream's other.py
