"""A failed `forkctl edit` takes back what it made (issue 37, item 8): when git cannot check the branch
out (here a patch adds a file whose name is longer than the file system allows, so `git worktree add`
fails after making the branch), the branch and the worktree folders edit made are removed, so the next
`edit` is not refused for a branch nobody asked to keep; what was there before (the person's branches,
a folder they passed with --worktree) stays."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.gitrepos import git
from tests.seriesrepo import SeriesSetup, clone, make_series, run_json

LONG = "megatron/core/" + "x" * 300 + ".py"  # a name past NAME_MAX (255 bytes) on every Linux file system


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SeriesSetup:
    """The default series plus a patch adding LONG, made from objects (no checkout can hold it)."""
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    setup = make_series(tmp_path)
    dev = setup.dev.path
    index = {"GIT_INDEX_FILE": str(tmp_path / "long-index"), "PATH": os.environ["PATH"]}
    git(dev, "read-tree", "series", env=index)
    blob = git(dev, "hash-object", "-w", "--stdin", input=b"X = 1\n")
    git(dev, "update-index", "--add", "--cacheinfo", f"100644,{blob},{LONG}", env=index)
    tree = git(dev, "write-tree", env=index)
    who = {
        "GIT_AUTHOR_NAME": "Dev",
        "GIT_AUTHOR_EMAIL": "dev@example.com",
        "GIT_COMMITTER_NAME": "Dev",
        "GIT_COMMITTER_EMAIL": "dev@example.com",
        "GIT_AUTHOR_DATE": "2026-01-02T00:00:00+00:00",
        "GIT_COMMITTER_DATE": "2026-01-02T00:00:00+00:00",
    }
    sha = git(
        dev,
        "commit-tree",
        tree,
        "-p",
        "series",
        "-m",
        "feat(core): a module with a long name",
        env={**index, **who},
    )
    git(dev, "update-ref", "refs/heads/long", sha)
    code, data = run_json(setup, "export", "--repo", str(dev), "--branch", "long")
    assert code == 0, data
    return setup


def _branches(path: Path) -> list[str]:
    return git(path, "branch", "--list", "--format=%(refname:short)").split()


@pytest.mark.parametrize("own_folder", [False, True])
def test_a_failed_edit_leaves_no_branch_or_worktree_behind(
    setup: SeriesSetup, tmp_path: Path, own_folder: bool
) -> None:
    user = clone(setup.upstream, tmp_path / "user")
    user.git("branch", "mine")
    before = _branches(user.path)
    args = ["--repo", str(user.path)]
    given = tmp_path / "given" / "deeper"
    if own_folder:
        (tmp_path / "given").mkdir()  # the person's folder: kept; `deeper` is edit's, removed
        args += ["--worktree", str(given)]
    for attempt in (1, 2):
        code, data = run_json(setup, "edit", *args)
        assert code == 2, (attempt, data)
        assert "already exists" not in data["error"], (attempt, data)  # the first attempt left nothing
        assert "forkctl/edit" in data["error"] and "hint" in data, data
        assert _branches(user.path) == before, attempt
        assert "forkctl/edit" not in git(user.path, "worktree", "list")
        assert not (user.path / ".git" / "forkctl" / "edit").exists()
        assert not given.exists()
        assert (tmp_path / "given").is_dir() == own_folder
