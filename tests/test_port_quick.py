"""The clean path of a port without a git process per patch (issue 34: a clean port was 1.8x slower
than `git rebase`).

A patch that only modifies files which are, on the head it is picked onto, exactly as on the commit it
was built on (upstream and the patches ported before it left them alone) merges to the head with those
files replaced: no rename, no content merge, nothing for git's merge to decide. Such a patch is picked
in this process; every other one is merged by git as before. Each test compares every ported commit's
tree with plain `git rebase --onto`.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests import budget
from tests.gitrepos import Repo, git
from tests.gitshim import make_git_shim
from tests.seriesrepo import make_series, run_json
from tests.test_port_engine import BASE_FILES, BRANCH, edited, fork_with_branch, port

LONG = "megatron/core/long.py"
OTHER = "megatron/core/other.py"
QUIET = {f"megatron/core/quiet/q{number}.py": f"Q = {number}\n" for number in range(8)}
MOVED = {"megatron/core/src/m1.py": "M = 1\n", "megatron/core/src/m2.py": "M = 2\n"}


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))


def quiet(number: int, value: str) -> tuple[str, dict[str, str | None]]:
    return f"feat: q{number}", {f"megatron/core/quiet/q{number}.py": f"Q = {value}\n"}


def rebase_trees(fork: Repo, tmp_path: Path, old_base: str, old_head: str, new_base: str) -> list[str]:
    """The tree of every commit `git rebase --onto new_base old_base` makes of old_head, in order."""
    work = tmp_path / "rebase-work"
    git(tmp_path, "clone", "-q", str(fork.path), str(work))
    git(work, "checkout", "-q", "--detach", old_head)
    command = ["git", "-c", "user.name=T", "-c", "user.email=t@example.com", "rebase", "-q"]
    done = subprocess.run([*command, "--onto", new_base, old_base], cwd=work, capture_output=True)
    assert done.returncode == 0, done.stderr
    return git(work, "log", "--reverse", "--format=%T", f"{new_base}..HEAD").splitlines()


def ported_trees(fork: Repo, new_base: str, branch: str = BRANCH) -> list[str]:
    return fork.git("log", "--reverse", "--format=%T", f"{new_base}..{branch}").splitlines()


@pytest.mark.budget(
    "a port of 9 patches, 4 of them on files nothing else changed: 9 `git merge-tree` before issue 34, "
    "5 now (those 4 picked in-process, the 5 that git's merge must decide merged by git)"
)
def test_a_mixed_series_ports_commit_by_commit_as_rebase_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Picked in-process (files upstream left alone), merged by git (upstream drifted the context,
    moved the directory, a new file), absorbed (upstream made the same change): every commit's tree
    is rebase's, and a patch after the ones git merged is picked right again."""
    setup = make_series(
        tmp_path,
        changes=[
            quiet(1, "one"),
            ("feat: line 10", {LONG: edited(l10="TEN")}),
            quiet(2, "two"),
            ("feat: other is 5", {OTHER: "X = 5\n"}),
            ("feat: m1", {"megatron/core/src/m1.py": "M = 10\n"}),
            ("feat: a new file", {"megatron/core/quiet/new.py": "NEW = 1\n", **quiet(3, "three")[1]}),
            quiet(4, "four"),
            ("feat: other is 6", {OTHER: "X = 6\n", "megatron/core/quiet/q5.py": "Q = five\n"}),
            quiet(1, "one again"),
        ],
        extra_upstream_files={**BASE_FILES, **QUIET, **MOVED},
    )
    upstream = setup.upstream
    (upstream.path / "megatron/core/dst").mkdir()
    upstream.git("mv", "megatron/core/src/m1.py", "megatron/core/dst/m1.py")
    upstream.git("mv", "megatron/core/src/m2.py", "megatron/core/dst/m2.py")
    upstream.commit("upstream: move src to dst")
    upstream.commit("upstream: line 8", {LONG: edited(l8="EIGHT")})
    new_base = upstream.commit("upstream: other is 5", {OTHER: "X = 5\n"})
    fork = fork_with_branch(setup, tmp_path)
    old_head = fork.head(BRANCH)
    shim = make_git_shim(tmp_path)
    monkeypatch.setenv("PATH", shim.env()["PATH"])
    code, data = port(setup, fork, new_base)
    assert code == 0, data
    assert [step["absorbed"] is not None for step in data["steps"]] == [False] * 3 + [True] + [False] * 5
    merges = shim.calls().count("merge-tree")
    budget.at_most("`git merge-tree` runs of a port of 9 patches, 4 on files nothing else changed", merges, 5)
    expected = rebase_trees(fork, tmp_path, setup.base, old_head, new_base)
    assert ported_trees(fork, new_base) == expected
    assert fork.git("show", f"{BRANCH}:megatron/core/dst/m1.py") == "M = 10"


@pytest.mark.budget(
    "a clean port of 6 patches on files upstream left alone: 28 git processes before issue 34, 6 of them "
    "`git merge-tree` (one merge a patch) and 6 for the upstream range's patch-ids (asked whatever the "
    "verdict); 15 now, none of either (2026-12-06)"
)
def test_a_clean_port_runs_no_git_process_per_patch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    setup = make_series(
        tmp_path,
        changes=[quiet(number, f"v{number}") for number in range(6)],
        extra_upstream_files={**BASE_FILES, **QUIET},
    )
    new_base = setup.upstream.commit("upstream: line 8", {LONG: edited(l8="EIGHT")})
    fork = fork_with_branch(setup, tmp_path)
    old_head = fork.head(BRANCH)
    shim = make_git_shim(tmp_path)
    monkeypatch.setenv("PATH", shim.env()["PATH"])
    code, data = port(setup, fork, new_base)
    calls = shim.calls()
    assert code == 0, data
    budget.none_of("`git merge-tree` runs of a clean port", {"merge-tree"} & set(calls))
    budget.none_of("patch-id computations of a clean port", {"patch-id"} & set(calls))
    budget.at_most("git processes of a clean port of 6 patches", len(calls), 15, calls)
    expected = rebase_trees(fork, tmp_path, setup.base, old_head, new_base)
    assert ported_trees(fork, new_base) == expected


def test_patches_after_a_resolved_stop_port_as_rebase_does(tmp_path: Path) -> None:
    changes = [
        ("feat: line 10", {LONG: edited(l10="TEN")}),
        quiet(1, "one"),
        ("feat: line 12", {LONG: edited(l10="TEN", l12="TWELVE")}),
        quiet(2, "two"),
    ]
    setup = make_series(tmp_path, changes=changes, extra_upstream_files={**BASE_FILES, **QUIET})
    new_base = setup.upstream.commit("upstream: line 10", {LONG: edited(l10="UP")})
    fork = fork_with_branch(setup, tmp_path)
    old_head = fork.head(BRANCH)
    code, data = port(setup, fork, new_base)
    assert code == 1, data
    resolution = edited(l10="UP TEN")
    (Path(data["conflict"]["worktree"]) / LONG).write_text(resolution)
    code, data = run_json(setup, "port", "--continue", "--repo", str(fork.path))
    assert code == 0, data
    work = tmp_path / "rebase-work"
    git(tmp_path, "clone", "-q", str(fork.path), str(work))
    git(work, "checkout", "-q", "--detach", old_head)
    command = ["git", "-c", "user.name=T", "-c", "user.email=t@example.com", "rebase", "-q"]
    stopped = subprocess.run([*command, "--onto", new_base, setup.base], cwd=work, capture_output=True)
    assert stopped.returncode != 0
    (work / LONG).write_text(resolution)
    git(work, "add", "--", LONG)
    env = {**os.environ, "GIT_EDITOR": "true"}
    git(work, "-c", "user.name=T", "-c", "user.email=t@example.com", "rebase", "--continue", env=env)
    expected = git(work, "log", "--reverse", "--format=%T", f"{new_base}..HEAD").splitlines()
    assert ported_trees(fork, new_base) == expected


@pytest.mark.budget(
    "`status --onto` of 6 patches, 5 on files upstream left alone: 6 `git merge-tree` and 7 private "
    "indexes (`read-tree`, `apply --check`) before; the 5 cost none now (2026-12-06)"
)
def test_a_preview_of_a_clean_port_runs_no_git_process_per_patch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup = make_series(
        tmp_path,
        changes=[
            *(quiet(number, f"v{number}") for number in range(5)),
            ("feat: line 10", {LONG: edited(l10="TEN")}),
        ],
        extra_upstream_files={**BASE_FILES, **QUIET},
    )
    new_base = setup.upstream.commit("upstream: line 8", {LONG: edited(l8="EIGHT")})
    fork = fork_with_branch(setup, tmp_path)
    shim = make_git_shim(tmp_path)
    monkeypatch.setenv("PATH", shim.env()["PATH"])
    code, data = run_json(setup, "status", "--onto", new_base, "--repo", str(fork.path))
    calls = shim.calls()
    assert code == 0, data
    # As before: the untouched files' patches apply as written, the drifted one needs the 3-way merge.
    assert [p["result"] for p in data["patches"]] == ["applies"] * 5 + ["applies with 3-way"]
    budget.at_most(
        "`git merge-tree` runs of a preview (one patch needs git's merge)", calls.count("merge-tree"), 1
    )
    # One private index builds the series on the old base (no branch to recognise), one checks the patch.
    budget.at_most("private indexes of a preview (one patch needs the check)", calls.count("read-tree"), 2)
