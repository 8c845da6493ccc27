"""Applying a series to a branch that already is apply(base, series) is recognised from forkctl's
apply record (the commits and trees it built, checked by recomputing every commit id in memory), so it
costs a handful of git processes, none of them a walk or a diff; a record that does not hold is
ignored and the full check decides. Processes are counted through a git shim on PATH."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests import budget
from tests.gitrepos import Repo
from tests.gitshim import GitShim, make_git_shim
from tests.probe import imported
from tests.seriesrepo import SeriesSetup, clone, make_series, run_json

ROOT = Path(__file__).resolve().parent.parent
BRANCH = "farai/main"
# What finding the repository, the base and the branch's tip take in a bare clone. Whether a worktree has
# the branch checked out is known without git there while the clone has no linked worktree.
MOST_PROCESSES = 3
WALKS = {"merge-base", "rev-list", "log", "format-patch", "read-tree", "apply", "write-tree"}
REAPPLY = (
    "apply again, branch exists, 2 patches: 0.175 s against 0.059 s for its alternative, target a ratio of 2 "
    "(bench/series_bench.py, 2026-12-02T03:00Z; README, CPU benchmarks)"
)


@pytest.fixture
def scene(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[SeriesSetup, Repo, GitShim]:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    setup = make_series(tmp_path)
    repo = clone(setup.upstream, tmp_path / "clone", bare=True)
    # The series as forkctl exports it (the files a toolkit commits), then applied once.
    code, data = run_json(
        setup, "apply", "--base", setup.base, "--repo", str(repo.path), "--branch", "scratch"
    )
    assert code == 0, data
    code, data = run_json(setup, "export", "--repo", str(repo.path), "--from", "scratch")
    assert code == 0, data
    shutil.rmtree(tmp_path / "cache" / "applied")  # only the record of the branch below stays
    code, data = run_json(setup, "apply", "--base", setup.base, "--repo", str(repo.path), "--branch", BRANCH)
    assert code == 0, data
    shim = make_git_shim(tmp_path)
    monkeypatch.setenv("PATH", shim.env()["PATH"])
    return setup, repo, shim


def _apply(setup: SeriesSetup, repo: Repo, *extra: str) -> tuple[int, dict]:
    return run_json(
        setup, "apply", "--base", setup.base, "--repo", str(repo.path), "--branch", BRANCH, *extra
    )


def _records(setup: SeriesSetup, tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "cache" / "applied").glob("*.json"))


@pytest.mark.budget(REAPPLY)
def test_reapply_of_an_unchanged_series_takes_a_few_processes(scene, tmp_path: Path) -> None:
    setup, repo, shim = scene
    head = repo.head(BRANCH)
    for extra in ((), ("--force",)):
        shim.reset()
        code, data = _apply(setup, repo, *extra)
        calls = shim.calls()
        assert code == 0, data
        assert data["head"] == head == repo.head(BRANCH)
        again = " ".join(("apply", *extra))
        budget.at_most(f"git processes of a re-apply ({again})", len(calls), MOST_PROCESSES, calls)
        budget.none_of(f"git walks or diffs of a re-apply ({again})", WALKS & set(calls))
        budget.none_of(f"`git worktree` runs of a re-apply ({again})", {"worktree"} & set(calls))


def test_a_branch_checked_out_in_a_linked_worktree_of_the_bare_clone_is_refused(
    scene, tmp_path: Path
) -> None:
    setup, repo, shim = scene
    repo.git("worktree", "add", "-q", str(tmp_path / "linked"), BRANCH)
    head = repo.head(BRANCH)
    shim.reset()
    code, data = _apply(setup, repo, "--force")
    assert code == 2 and "checked out" in data["error"], data
    assert "worktree" in shim.calls()  # asked of git once the clone has a linked worktree
    assert repo.head(BRANCH) == head


@pytest.mark.parametrize(
    "damage",
    [
        lambda raw: b"",
        lambda raw: raw[:-9],
        lambda raw: raw.replace(b'"', b"'", 1),
    ],
    ids=["empty", "truncated", "edited"],
)
def test_a_damaged_record_is_ignored(scene, tmp_path: Path, damage) -> None:
    setup, repo, shim = scene
    head = repo.head(BRANCH)
    [record] = _records(setup, tmp_path)
    record.write_bytes(damage(record.read_bytes()))
    shim.reset()
    code, data = _apply(setup, repo)
    assert code == 0, data
    assert data["head"] == head
    assert "format-patch" in shim.calls()  # the full check ran


def test_a_record_with_other_trees_is_not_believed(scene, tmp_path: Path) -> None:
    """A sound entry (digest rewritten) whose trees are not the commits' own: the commit ids computed
    from it do not match the branch, so the full check decides."""
    from forkctl import contentcache

    setup, repo, shim = scene
    [record] = _records(setup, tmp_path)
    _header, _, payload = record.read_bytes().partition(b"\n\n")
    upstream_tree = repo.git("rev-parse", f"{setup.base}^{{tree}}").encode()
    first_tree = repo.git("rev-parse", f"{BRANCH}~3^{{tree}}").encode()
    forged = payload.replace(first_tree, upstream_tree)
    assert forged != payload
    key = record.stem
    contentcache.write("applied", key, forged)
    shim.reset()
    code, data = _apply(setup, repo)
    assert code == 0, data
    assert "format-patch" in shim.calls()


def test_a_branch_moved_away_is_not_taken_for_the_series(scene, tmp_path: Path) -> None:
    setup, repo, _shim = scene
    head = repo.head(BRANCH)
    repo.git("update-ref", f"refs/heads/{BRANCH}", f"{head}~1")
    code, data = _apply(setup, repo)
    assert code == 2 and "--force" in data["hint"], data
    code, data = _apply(setup, repo, "--force")
    assert code == 0, data
    assert repo.head(BRANCH) == head


@pytest.mark.parametrize(
    "name",
    [
        "farai/main",
        "main",
        "a.b/c_d-e",
        "v1.2",
        "x/y/z",
        "_x",
        "a..b",
        "a/.b",
        "a.lock",
        "a/b.lock/c",
        "a.",
        "a//b",
        "/a",
        "a/",
        "-a",
        "HEAD",
        "refs/heads/x",
        "a@{1}",
        "@",
        "a b",
        "a~1",
        "a:b",
        "a\\b",
    ],
)
def test_a_plain_branch_name_is_one_git_accepts(name: str, tmp_path: Path, monkeypatch) -> None:
    """Names accepted without a git process are exactly ones git accepts; git decides the others."""
    from forkctl.errors import BadInput
    from forkctl.git.refs import check_branch_name

    shim = make_git_shim(tmp_path)
    monkeypatch.setenv("PATH", shim.env()["PATH"])
    try:
        accepted = check_branch_name(name) == name
    except BadInput:
        accepted = False
    asked_git = bool(shim.calls())
    git_says = subprocess.run(["git", "check-ref-format", "--branch", name], capture_output=True, text=True)
    if not asked_git:
        assert accepted and git_says.returncode == 0 and git_says.stdout.strip() == name
    if git_says.returncode != 0:
        assert not accepted


@pytest.mark.budget(REAPPLY)
def test_reapply_loads_only_what_it_uses(scene, tmp_path: Path) -> None:
    """A re-apply writes no file and makes no object: it must not pay for tempfile, shutil, OpenSSL's
    hashlib, the --tree code or the port's merges; printing text, it needs no json either."""
    setup, repo, _shim = scene
    args = ["--manifest", str(setup.manifest), "apply", "--base", setup.base, "--repo", str(repo.path)]
    proc, modules = imported(tmp_path, *args, "--branch", BRANCH, "--force")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "already at" in proc.stdout
    unwanted = {
        "tempfile",
        "shutil",
        "hashlib",
        "_hashlib",
        "json",
        "forkctl.ops.patch_dir",
        "forkctl.git.merge",
    }
    # --repo and a local --manifest: no cache of partial clones, no remote manifests
    unwanted |= {"forkctl.git.clonecache", "forkctl.git.remote", "forkctl.manifest.remote"}
    budget.none_of("modules a re-apply does not use, imported", unwanted & modules)
