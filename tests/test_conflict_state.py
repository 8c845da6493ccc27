"""A stopped port is a real conflicted state, seen with plain git, and `forkctl status` shows it.

The scratch worktree must look like a stopped `git rebase`: unmerged stages in its index (so `git
status`, `git diff`, `git mergetool` and `git checkout --ours/--theirs` work), conflict markers
labelled with names a person reads (the upstream commit, the patch's file and subject), and `port
--continue` after `git add` or `--abort` behave as before.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from forkctl.cli import cli
from tests.gitrepos import Repo, git
from tests.seriesrepo import LONG, STALE_FILE, SeriesSetup, clone, make_series, make_stale_series, run_json
from tests.test_port_engine import edited, fork_with_branch, port, setup_with

BRANCH = "farai/main"
PATCH_SIDE = "def a():\n    return 10\n\n\ndef helper():\n    return 'hi'\n"
UPSTREAM_SIDE = "def a():\n    return 1\n\n\ndef helper():\n    return 'up'\n"
CONFLICTED = "megatron/core/a.py"


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SeriesSetup:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    return make_series(tmp_path)


def stopped_port(setup: SeriesSetup, tmp_path: Path) -> tuple[Repo, str, dict, str]:
    """A port of the default series stopped on patch 4 (upstream rewrote helper()); the last item is
    the fork branch's tip before the port."""
    new_base = setup.upstream.commit("upstream edits helper", {CONFLICTED: UPSTREAM_SIDE})
    fork = clone(setup.upstream, tmp_path / "fork", bare=True)
    code, data = run_json(setup, "apply", "--base", setup.base, "--repo", str(fork.path))
    assert code == 0, data
    tip = data["head"]
    code, data = run_json(setup, "port", "--onto", new_base, "--repo", str(fork.path))
    assert code == 1, data
    return fork, new_base, data, tip


def test_the_scratch_worktree_is_conflicted_as_git_sees_it(setup: SeriesSetup, tmp_path: Path) -> None:
    fork, new_base, data, _ = stopped_port(setup, tmp_path)
    worktree = Path(data["conflict"]["worktree"])
    status = git(worktree, "status", "--porcelain=v2").splitlines()
    unmerged = [line for line in status if line.startswith("u ")]
    assert len(unmerged) == 1 and unmerged[0].endswith(f" {CONFLICTED}"), status
    assert git(worktree, "diff", "--name-only", "--diff-filter=U").splitlines() == [CONFLICTED]
    # The stages are a rebase's: 2 (ours) upstream plus patch 0001 already ported, 3 (theirs) the patch.
    assert git(worktree, "show", f":2:{CONFLICTED}") + "\n" == UPSTREAM_SIDE.replace("1\n", "10\n", 1)
    assert git(worktree, "show", f":3:{CONFLICTED}") + "\n" == PATCH_SIDE
    # Markers name the upstream commit and the patch, not raw object ids.
    text = (worktree / CONFLICTED).read_text()
    markers = [line for line in text.splitlines() if re.match(r"^(<{7}|>{7})( |$)", line)]
    subject = setup.upstream.git("log", "-1", "--format=%s", new_base)
    # Ours is upstream plus the patches already ported (0001 also changed a.py), as in a rebase.
    done = Path(setup.manifest_data()["series"][2]["file"]).name[:4]
    assert markers[0] == f"<<<<<<< upstream {new_base[:12]} ({subject}) + patches to {done}", markers
    patch_name = Path(data["conflict"]["file"]).name
    assert markers[1] == f">>>>>>> {patch_name} (fix(core): helper says hi)", markers
    assert not any(re.search(r"[0-9a-f]{40}", line) for line in markers)
    # Take the patch's side with git's own command, mark it resolved, and go on.
    git(worktree, "checkout", "--theirs", "--", CONFLICTED)
    assert (worktree / CONFLICTED).read_text() == PATCH_SIDE
    git(worktree, "add", "--", CONFLICTED)
    code, done = run_json(setup, "port", "--continue", "--repo", str(fork.path))
    assert code == 0, done
    assert fork.git("show", f"{BRANCH}:{CONFLICTED}") + "\n" == PATCH_SIDE
    assert setup.manifest_data()["upstream"]["base"] == new_base


def test_abort_after_git_commands_restores_everything(setup: SeriesSetup, tmp_path: Path) -> None:
    manifest_text = setup.manifest.read_text()
    fork, _, data, tip = stopped_port(setup, tmp_path)
    worktree = Path(data["conflict"]["worktree"])
    git(worktree, "checkout", "--ours", "--", CONFLICTED)
    code, aborted = run_json(setup, "port", "--abort", "--repo", str(fork.path))
    assert code == 0, aborted
    assert setup.manifest.read_text() == manifest_text
    assert fork.head(BRANCH) == tip
    assert not worktree.exists()
    assert len(fork.git("worktree", "list").splitlines()) == 1


def test_status_shows_the_stopped_port(setup: SeriesSetup, tmp_path: Path) -> None:
    fork, _, data, _ = stopped_port(setup, tmp_path)
    worktree = data["conflict"]["worktree"]
    # Without --repo: the port was started with --repo, and status still finds it.
    code, shown = run_json(setup, "status")
    progress = shown["in_progress"]
    assert progress["operation"] == "port"
    assert progress["file"] == data["conflict"]["file"]
    assert progress["subject"] == "fix(core): helper says hi"
    assert progress["paths"] == [CONFLICTED] and progress["unresolved"] == [CONFLICTED]
    assert progress["worktree"] == worktree
    repo_arg = f"--repo {fork.path} --manifest {setup.manifest.resolve()}"
    assert progress["commands"] == {
        "continue": f"forkctl port --continue {repo_arg}",
        "skip": f"forkctl port --skip {repo_arg}",
        "abort": f"forkctl port --abort {repo_arg}",
    }
    text = CliRunner().invoke(cli, ["--manifest", str(setup.manifest), "status"]).output
    flat = " ".join(text.split())
    assert "port in progress" in flat and Path(progress["file"]).name in flat, text
    for command in progress["commands"].values():
        assert command in flat, text
    # Resolved by hand: status says nothing is left to resolve; after --abort nothing is in progress.
    (Path(worktree) / CONFLICTED).write_text(PATCH_SIDE)
    code, shown = run_json(setup, "status", "--repo", str(fork.path))
    assert shown["in_progress"]["unresolved"] == [], shown
    code, aborted = run_json(setup, "port", "--abort", "--repo", str(fork.path))
    assert code == 0, aborted
    code, shown = run_json(setup, "status")
    assert code == 0 and shown["in_progress"] is None, shown


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))


def marker_lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if re.match(r"^(<{7}|>{7})( |$)", line)]


@pytest.mark.usefixtures("cache")
def test_a_conflict_on_a_renamed_file_is_unmerged_at_the_new_path(tmp_path: Path) -> None:
    setup = setup_with(tmp_path, [("feat: line 10", {"megatron/core/long.py": edited(l10="TEN")})])
    (setup.upstream.path / "megatron/core/ops").mkdir()
    setup.upstream.git("mv", "megatron/core/long.py", "megatron/core/ops/long.py")
    setup.upstream.write({"megatron/core/ops/long.py": edited(l10="UPSTREAM TEN")})
    new_base = setup.upstream.commit("upstream: move and edit line 10")
    fork = fork_with_branch(setup, tmp_path)
    code, data = port(setup, fork, new_base)
    assert code == 1, data
    worktree = Path(data["conflict"]["worktree"])
    assert git(worktree, "diff", "--name-only", "--diff-filter=U").splitlines() == [
        "megatron/core/ops/long.py"
    ]
    markers = marker_lines(worktree / "megatron/core/ops/long.py")
    assert markers[0].startswith(f"<<<<<<< upstream {new_base[:12]} (upstream: move and edit line 10)")
    assert markers[1].startswith(">>>>>>> 0001-feat-line-10.patch (feat: line 10)"), markers
    assert not any(re.search(r"[0-9a-f]{40}", line) for line in markers), markers


@pytest.mark.usefixtures("cache")
def test_modify_delete_is_unmerged_and_continue_keeps_what_was_added(tmp_path: Path) -> None:
    setup = setup_with(tmp_path, [("feat: line 10", {"megatron/core/long.py": edited(l10="TEN")})])
    new_base = setup.upstream.commit("upstream: delete long.py", {"megatron/core/long.py": None})
    fork = fork_with_branch(setup, tmp_path)
    code, data = port(setup, fork, new_base)
    assert code == 1, data
    worktree = Path(data["conflict"]["worktree"])
    status = [
        line for line in git(worktree, "status", "--porcelain=v2").splitlines() if line.startswith("u ")
    ]
    assert len(status) == 1 and status[0].split()[1] == "DU", (
        status
    )  # deleted by us (upstream), as in a rebase
    git(worktree, "add", "--", "megatron/core/long.py")
    code, done = run_json(setup, "port", "--continue", "--repo", str(fork.path))
    assert code == 0, done
    assert "TEN" in fork.git("show", "farai/main:megatron/core/long.py")


@pytest.mark.usefixtures("cache")
def test_a_patch_stale_on_the_old_base_stops_conflicted_too(tmp_path: Path) -> None:
    """No old commit to pick (the patch does not apply as written on its own base): git apply --3way
    runs in the worktree, which is then conflicted as well, its markers named."""
    setup, stale, _ = make_stale_series(tmp_path / "s")
    new_base = setup.upstream.commit(
        "upstream: line five",
        {STALE_FILE: LONG.replace("line 5\n", "line FIVE\n").replace("line 8\n", "line eight\n")},
    )
    fork = clone(setup.upstream, tmp_path / "fork.git", bare=True)
    code, data = run_json(setup, "port", "--onto", new_base, "--repo", str(fork.path))
    assert code == 1, data
    assert data["conflict"]["file"] == str(stale.relative_to(setup.root))
    worktree = Path(data["conflict"]["worktree"])
    assert git(worktree, "diff", "--name-only", "--diff-filter=U").splitlines() == [STALE_FILE]
    markers = marker_lines(worktree / STALE_FILE)
    assert markers[0].startswith(f"<<<<<<< upstream {new_base[:12]} (upstream: line five)"), markers
    assert markers[1] == f">>>>>>> {stale.name} (fix(core): line five)", markers
