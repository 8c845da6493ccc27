"""An apply stopped by an earlier forkctl belongs to the checkout that started it: a second checkout of
the toolkit that shares the repository (--repo, or the cache clone of the upstream URL) may neither
continue nor abort it, and the first one's resolution survives (issue 23)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from forkctl.git import clonecache
from forkctl.git.repo import GitRepo
from tests.gitrepos import Repo
from tests.seriesrepo import SeriesSetup, clone, run_json
from tests.test_apply import BRANCH, add_conflicting_patch, make_series, stop_left_by_an_earlier_forkctl


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SeriesSetup:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    return make_series(tmp_path)


def second_checkout(setup: SeriesSetup, tmp_path: Path) -> SeriesSetup:
    """A copy of the toolkit in another folder: the same series, another manifest file."""
    other = SeriesSetup(
        root=tmp_path / "checkout-b" / "toolkit",
        upstream=setup.upstream,
        base=setup.base,
        dev_commits=setup.dev_commits,
    )
    shutil.copytree(setup.root, other.root)
    return other


@pytest.mark.parametrize("shared", ["--repo", "cache"])
def test_an_apply_belongs_to_the_checkout_that_started_it(
    setup: SeriesSetup, tmp_path: Path, shared: str
) -> None:
    add_conflicting_patch(setup)
    other = second_checkout(setup, tmp_path)
    if shared == "--repo":
        repo = GitRepo(clone(setup.upstream, tmp_path / "r", bare=True).path)
        where = ["--repo", str(repo.git_dir)]
    else:  # no --repo: both checkouts name the same upstream URL, so they share its cache clone
        # Called here directly, not through a command whose manifest names the URL: the test is the
        # user who names this local location (git.remote admits a local URL only when one does).
        with pytest.MonkeyPatch.context() as local:
            local.setenv("FORKCTL_ALLOW_LOCAL_URLS", "1")
            repo = clonecache.cached_objects(setup.url, [setup.base])
        where = []
    worktree = stop_left_by_an_earlier_forkctl(setup, Repo(repo.git_dir))
    resolved = worktree / "megatron/core/b.py"
    resolution = "def b():\n    return 33\n"
    resolved.write_text(resolution)
    for verb in ("--abort", "--continue"):
        code, refused = run_json(other, "apply", verb, *where)
        assert code == 2, refused
        assert f"was started from {setup.manifest}" in refused["error"], refused
        assert f"--manifest {setup.manifest}" in refused["hint"]
        assert resolved.read_text() == resolution
    code, data = run_json(setup, "apply", "--continue", *where)
    assert code == 0, data
    assert repo.git(["show", f"{BRANCH}~3:megatron/core/b.py"]).text == resolution.rstrip("\n")
