"""A SIGKILL right before forkctl renames a written file into a user's checkout leaves nothing there that
git shows (`git status --porcelain --ignored`): the temp file lives in the checkout's git dir and the
next write sweeps it (issue 23). Real kills at forkctl's own side effects (tests/killpoints.py)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from forkctl.files import ABANDONED_AFTER_S
from tests.gitrepos import Repo, git, init_repo
from tests.seriesrepo import SeriesSetup, make_series
from tests.test_port_kill import Killer
from tests.toolkit import make_toolkit


@pytest.fixture(autouse=True)
def _env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parent.parent))


def checkout(tmp: Path, shape: str) -> tuple[Path, Path]:
    """(a checkout of the given shape, its git dir): a plain clone, a linked worktree (`.git` is a
    file naming a folder under the main repository's git dir) or a submodule (its git dir under the
    superproject's `.git/modules`)."""
    fork = init_repo(tmp / "fork", {"README.md": "fork\n"})
    if shape == "plain":
        return fork.path, fork.path / ".git"
    if shape == "worktree":
        fork.git("worktree", "add", "-q", "--detach", str(tmp / "linked"))
        return tmp / "linked", Path(fork.git("-C", str(tmp / "linked"), "rev-parse", "--absolute-git-dir"))
    outer = init_repo(tmp / "outer", {"README.md": "outer\n"})
    outer.git("-c", "protocol.file.allow=always", "submodule", "add", "-q", fork.path.as_uri(), "sub")
    inner = outer.path / "sub"
    return inner, Path(git(inner, "rev-parse", "--absolute-git-dir"))


def shown(where: Path) -> list[str]:
    """What git shows of the checkout, ignored files included."""
    return git(where, "status", "--porcelain", "--ignored", "--untracked-files=all").splitlines()


@pytest.mark.parametrize("shape", ["plain", "worktree", "submodule"])
def test_a_kill_before_fork_base_write_renames_leaves_the_checkout_clean(tmp_path: Path, shape: str) -> None:
    toolkit = make_toolkit(tmp_path)
    where, git_dir = checkout(tmp_path, shape)
    before = shown(where)
    target = where / ".fork-base.json"
    argv = ["fork-base", "--repo", str(where), "--write"]
    killer = Killer()
    try:
        # Killed at its first side effect from the rename of the file into the checkout: that one.
        killed = killer.run(toolkit, 1, ["replace", str(target)], *argv)  # type: ignore[arg-type]
        assert killed["killed"], killed
    finally:
        killer.close()
    assert not target.exists()
    assert shown(where) == before  # no temp file beside the target, nothing git lists
    left = sorted((git_dir / "forkctl-tmp").iterdir())
    assert len(left) == 1 and left[0].read_bytes().startswith(b"{")  # the bytes the kill cut off
    # A later write sweeps what the killed run left (its process gone, the file older than a write takes).
    stamp = time.time() - 2 * ABANDONED_AFTER_S
    os.utime(left[0], (stamp, stamp))
    code = _fork_base_write(toolkit.manifest, where)
    assert code == 0 and json.loads(target.read_text())["upstream_base"] == toolkit.base
    assert list((git_dir / "forkctl-tmp").iterdir()) == []
    assert [line for line in shown(where) if line != "?? .fork-base.json"] == before


def _fork_base_write(manifest: Path, where: Path) -> int:
    from click.testing import CliRunner

    from forkctl.cli import cli

    result = CliRunner().invoke(
        cli, ["--manifest", str(manifest), "fork-base", "--repo", str(where), "--write"]
    )
    return result.exit_code


def test_a_kill_at_each_rename_of_an_export_leaves_nothing_git_shows_in_the_toolkit(tmp_path: Path) -> None:
    """export of a shorter branch rewrites the manifest and deletes a patch file; the toolkit is a git
    checkout. Killed before each rename, git shows no temp file; the next export finishes and sweeps."""
    setup = make_series(tmp_path)
    toolkit = Repo(setup.root)
    toolkit.git("init", "-q")
    toolkit.git("add", "-A")
    toolkit.git("commit", "-q", "-m", "toolkit")
    setup.dev.git("branch", "-f", "shorter", "series~1")
    argv = ["export", "--repo", str(setup.dev.path), "--branch", "shorter"]
    killer = Killer()
    try:
        full = killer.run(setup, 0, None, *argv)
        assert not full["killed"] and full["exit_code"] == 0, full
        renames = [event for event in full["events"] if event[0] == "replace"]
        inside = [event for event in renames if Path(event[1]).is_relative_to(setup.root)]
        assert inside, full["events"]
        for rename in inside:
            toolkit.git("reset", "-q", "--hard")
            toolkit.git("clean", "-q", "-fdx")
            killed = killer.run(setup, 1, rename, *argv)
            assert killed["killed"], (rename, killed)
            temps = [line for line in shown(setup.root) if line.endswith(".tmp")]
            assert temps == [], (rename, temps)
    finally:
        killer.close()
    scratch = setup.root / ".git" / "forkctl-tmp"
    left = list(scratch.iterdir())
    assert left  # the kills left their temp files in the git dir, where git lists nothing
    stamp = time.time() - 2 * ABANDONED_AFTER_S
    for path in left:
        os.utime(path, (stamp, stamp))
    assert killer_free_export(setup, argv) == 0
    assert list(scratch.iterdir()) == []
    assert [line for line in shown(setup.root) if line.endswith(".tmp")] == []


def killer_free_export(setup: SeriesSetup, argv: list[str]) -> int:
    from click.testing import CliRunner

    from forkctl.cli import cli

    return CliRunner().invoke(cli, ["--manifest", str(setup.manifest), *argv]).exit_code
