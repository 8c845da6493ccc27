"""forkctl apply --base: reproducible branch building, stale patches refused, an earlier stop's
--continue/--abort, the cache."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from forkctl.cli import cli
from forkctl.git.repo import GitRepo
from forkctl.manifest import load as load_manifest
from forkctl.ops import replay
from forkctl.ops import state as session
from forkctl.series import load_series
from tests.gitrepos import Repo, git
from tests.seriesrepo import (
    SeriesSetup,
    clone,
    insert_patch,
    make_series,
    make_stale_series,
    run_json,
    shallow_clone,
)

BRANCH = "farai/main"


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SeriesSetup:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    return make_series(tmp_path)


def run(setup: SeriesSetup, *args: str) -> tuple[int, dict]:
    return run_json(setup, "apply", *args)


def text_run(setup: SeriesSetup, *args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli, ["--manifest", str(setup.manifest), "apply", *args])


def refs(repo: Repo) -> str:
    return repo.git("for-each-ref", "--format=%(refname) %(objectname)")


def add_conflicting_patch(setup: SeriesSetup) -> Path:
    """Patch 2 of 5 edits b.py as it was before the base's own edit of b.py: it conflicts on the base."""
    initial = setup.upstream.head(f"{setup.base}^")
    return insert_patch(
        setup,
        1,
        initial,
        "fix(core): b returns 3",
        {"megatron/core/b.py": "def b():\n    return 3\n"},
        "2026-02-01T12:00:00+00:00",
    )


def test_reproducible_head_across_clones(setup: SeriesSetup, tmp_path: Path) -> None:
    first = clone(setup.upstream, tmp_path / "one", bare=True)
    second = clone(setup.upstream, tmp_path / "two")
    code, data = run(setup, "--base", setup.base[:9], "--repo", str(first.path))
    assert code == 0, data
    code2, data2 = run(setup, "--base", setup.base, "--repo", str(second.path))
    assert code2 == 0, data2
    assert data["head"] == data2["head"]
    assert data["base"] == setup.base
    assert [c["commit"] for c in data["commits"]] == [c["commit"] for c in data2["commits"]]
    assert data["reproducible"] is True
    assert first.head(BRANCH) == data["head"] == second.head(BRANCH)
    # The result is the maintainer's series: same tree as the cherry-picked branch in the dev clone.
    dev = setup.dev
    assert first.head(f"{BRANCH}^{{tree}}") == dev.head("series^{tree}")
    # Author = committer (name and date) and the provenance line survives.
    ident = first.git("show", "-s", "--format=%an|%aI|%cn|%cI", data["commits"][0]["commit"])
    author_name, author_date, committer_name, committer_date = ident.split("|")
    assert (author_name, author_date) == (committer_name, committer_date)
    message = first.git("show", "-s", "--format=%B", data["commits"][0]["commit"])
    assert f"(cherry picked from commit {setup.dev_commits[0]})" in message


def test_user_checkout_untouched(setup: SeriesSetup, tmp_path: Path) -> None:
    user = clone(setup.upstream, tmp_path / "user")
    user.write({"megatron/core/a.py": "dirty\n", "untracked.txt": "mine\n"})
    user.git("add", "megatron/core/a.py")
    user.write({"README.md": "unstaged\n"})
    before = (user.head(), user.git("status", "--porcelain"), user.git("diff", "--cached"), user.git("diff"))
    code, data = run(setup, "--base", setup.base, "--repo", str(user.path))
    assert code == 0, data
    after = (user.head(), user.git("status", "--porcelain"), user.git("diff", "--cached"), user.git("diff"))
    assert before == after
    assert user.git("symbolic-ref", "HEAD") == "refs/heads/main"
    assert user.head(BRANCH) == data["head"]


def test_existing_branch_needs_force(setup: SeriesSetup, tmp_path: Path) -> None:
    repo = clone(setup.upstream, tmp_path / "r", bare=True)
    repo.git("update-ref", f"refs/heads/{BRANCH}", setup.base)
    code, data = run(setup, "--base", setup.base, "--repo", str(repo.path))
    assert code == 2
    assert "--force" in data["hint"]
    assert repo.head(BRANCH) == setup.base
    result = text_run(setup, "--base", setup.base, "--repo", str(repo.path), "--force")
    assert result.exit_code == 0, result.output
    assert setup.base in result.output  # the old tip is printed
    head = repo.head(BRANCH)
    assert head != setup.base and head in result.output
    # Already there: a second run without --force is a no-op success.
    code, data = run(setup, "--base", setup.base, "--repo", str(repo.path))
    assert code == 0 and data["head"] == head


def test_checked_out_branch_refused_even_with_force(setup: SeriesSetup, tmp_path: Path) -> None:
    user = clone(setup.upstream, tmp_path / "user")
    user.git("checkout", "-q", "-b", BRANCH)
    code, data = run(setup, "--base", setup.base, "--repo", str(user.path), "--force")
    assert code == 2
    assert "checked out" in data["error"]
    assert user.head(BRANCH) == setup.base


def test_wrong_base_and_unknown_commit(setup: SeriesSetup, tmp_path: Path) -> None:
    repo = clone(setup.upstream, tmp_path / "r", bare=True)
    parent = repo.head(f"{setup.base}^")
    code, data = run(setup, "--base", parent[:10], "--repo", str(repo.path))
    assert code == 2
    assert "port --onto" in data["hint"]
    code, data = run(setup, "--base", "deadbeef1234", "--repo", str(repo.path))
    assert code == 2
    assert "unknown commit" in data["error"]
    assert repo.git("for-each-ref", "refs/heads/farai") == ""


def test_a_stale_patch_is_refused_with_the_fix_the_same_in_every_clone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A patch that only a 3-way merge puts on its own base is refused, nothing written, whether the
    clone holds its pre-image blob (a full clone: 3-way would merge) or not (a shallow one)."""
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    setup, stale, pre_image = make_stale_series(tmp_path / "s")
    full = clone(setup.upstream, tmp_path / "full", bare=True)
    shallow = shallow_clone(setup.upstream, tmp_path / "shallow")
    assert full.git("cat-file", "-t", pre_image) == "blob"
    assert git(shallow.path, "cat-file", "--batch-check", input=pre_image.encode()) == f"{pre_image} missing"
    answers = []
    for repo in (full, shallow):
        refs_before = refs(repo)
        code, data = run(setup, "--base", setup.base, "--repo", str(repo.path))
        assert code == 1, data
        assert data["head"] is None and data["stale"]["file"].endswith(stale.name)
        assert data["stale"]["subject"] == "fix(core): line five"
        (problem,) = data["problems"]
        assert "is stale" in problem["message"] and "megatron/core/long.py" in problem["message"]
        assert f"forkctl port --onto {setup.base}" in problem["hint"] and "forkctl export" in problem["hint"]
        # Nothing half-applied: no branch, no state, no scratch worktree, no other ref.
        assert refs(repo) == refs_before
        assert not (repo.path / "forkctl").exists()
        assert len(repo.git("worktree", "list").splitlines()) == 1
        answers.append({key: value for key, value in data.items() if key != "repo"})
    assert answers[0] == answers[1]


def stop_left_by_an_earlier_forkctl(setup: SeriesSetup, repo: Repo) -> Path:
    """What an apply made before apply was pure left on the conflicting patch 2: its state and the
    scratch worktree with the conflict, written by the stop code that --continue / --abort still
    finish (apply itself now refuses such a series). Returns the worktree."""
    manifest = load_manifest(setup.manifest)
    series = load_series(manifest)
    store = GitRepo(repo.path)
    state = session.State(
        operation="apply",
        manifest=str(manifest.path),
        base=setup.base,
        series_digest=series.digest,
        files=[entry.file for entry in manifest.series],
        branch=BRANCH,
        force=False,
        old_tip=None,
        worktree=str(session.worktree_path(store)),
    )
    built = replay.build_series(store, setup.base, series.patches)
    assert built.conflict is not None and built.conflict.index == 1
    state.steps.append(session.Step(file=state.files[0], commit=built.applied[0].commit))
    conflict = session.open_conflict(store, state, 1, built.conflict.patch, built.conflict.parent)
    assert conflict.paths == ["megatron/core/b.py"]
    return conflict.worktree


def test_a_conflicting_patch_is_refused_and_leaves_nothing(setup: SeriesSetup, tmp_path: Path) -> None:
    """A patch that conflicts for real on its own base is stale as well: refused, nothing to abort."""
    add_conflicting_patch(setup)
    repo = clone(setup.upstream, tmp_path / "r")
    refs_before = refs(repo)
    code, data = run(setup, "--base", setup.base, "--repo", str(repo.path))
    assert code == 1, data
    assert data["stale"]["subject"] == "fix(core): b returns 3"
    assert "megatron/core/b.py" in data["stale"]["message"]
    assert refs(repo) == refs_before
    assert len(repo.git("worktree", "list").splitlines()) == 1
    assert not (repo.path / ".git" / "forkctl").exists()
    assert repo.git("status", "--porcelain") == ""
    code, data = run(setup, "--abort", "--repo", str(repo.path))
    assert code == 2  # nothing to abort
    code, data = run(setup, "--base", setup.base, "--repo", str(repo.path))
    assert code == 1 and "stale" in data  # the same answer again: no state was left to refuse it


def test_text_output_names_the_stale_patch_and_the_fix(setup: SeriesSetup, tmp_path: Path) -> None:
    add_conflicting_patch(setup)
    repo = clone(setup.upstream, tmp_path / "r", bare=True)
    result = text_run(setup, "--base", setup.base, "--repo", str(repo.path))
    assert result.exit_code == 1
    assert "fix(core): b returns 3" in result.output and "is stale" in result.output
    assert "megatron/core/b.py" in result.output
    assert "forkctl port --onto" in result.output and "forkctl export" in result.output


def test_an_earlier_stop_then_continue(setup: SeriesSetup, tmp_path: Path) -> None:
    add_conflicting_patch(setup)
    repo = clone(setup.upstream, tmp_path / "r", bare=True)
    refs_before = refs(repo)
    worktree = stop_left_by_an_earlier_forkctl(setup, repo)
    assert worktree.is_relative_to(repo.path)
    assert "<<<<<<<" in (worktree / "megatron/core/b.py").read_text()
    # A new apply is refused while the stop is in progress.
    code, again = run(setup, "--base", setup.base, "--repo", str(repo.path))
    assert code == 2 and "in progress" in again["error"]
    # --continue refuses while markers remain.
    code, data = run(setup, "--continue", "--repo", str(repo.path))
    assert code == 2 and "conflict markers" in data["error"]
    (worktree / "megatron/core/b.py").write_text("def b():\n    return 33\n")
    code, data = run(setup, "--continue", "--repo", str(repo.path))
    assert code == 0, data
    assert data["reproducible"] is False
    assert [c["resolved"] for c in data["commits"]] == [False, True, False, False, False]
    head = repo.head(BRANCH)
    assert head == data["head"]
    assert repo.git("show", f"{head}:megatron/core/b.py") == "def b():\n    return 33"
    assert repo.git("show", "-s", "--format=%s", f"{head}~3") == "fix(core): b returns 3"
    # Nothing stray: one worktree, no state, no other new ref.
    assert not worktree.exists()
    assert not (repo.path / "forkctl").exists()
    assert len(repo.git("worktree", "list").splitlines()) == 1
    assert set(refs(repo).splitlines()) == {*refs_before.splitlines(), f"refs/heads/{BRANCH} {head}"}


def test_continue_refuses_a_resolution_that_loses_the_patch(setup: SeriesSetup, tmp_path: Path) -> None:
    add_conflicting_patch(setup)
    repo = clone(setup.upstream, tmp_path / "r", bare=True)
    worktree = stop_left_by_an_earlier_forkctl(setup, repo)
    state = session.load(GitRepo(repo.path))
    assert state is not None
    parent = state.conflict_parent
    # Keeping the parent's side makes the patch empty: it must not be recorded as applied.
    (worktree / "megatron/core/b.py").write_text(repo.git("show", f"{parent}:megatron/core/b.py") + "\n")
    code, data = run(setup, "--continue", "--repo", str(repo.path))
    assert code == 2, data
    assert "changes nothing" in data["error"]
    assert repo.git("for-each-ref", f"refs/heads/{BRANCH}") == ""
    code, data = run(setup, "--abort", "--repo", str(repo.path))
    assert code == 0, data


def test_an_earlier_stop_then_abort(setup: SeriesSetup, tmp_path: Path) -> None:
    add_conflicting_patch(setup)
    repo = clone(setup.upstream, tmp_path / "r")
    refs_before = refs(repo)
    stop_left_by_an_earlier_forkctl(setup, repo)
    code, data = run(setup, "--abort", "--repo", str(repo.path))
    assert code == 0, data
    assert refs(repo) == refs_before
    assert len(repo.git("worktree", "list").splitlines()) == 1
    assert not (repo.path / ".git" / "forkctl").exists()
    assert repo.git("status", "--porcelain") == ""
    code, data = run(setup, "--abort", "--repo", str(repo.path))
    assert code == 2  # nothing left to abort


def test_cache_clone_then_offline(setup: SeriesSetup, tmp_path: Path) -> None:
    direct = clone(setup.upstream, tmp_path / "direct", bare=True)
    expected = run(setup, "--base", setup.base, "--repo", str(direct.path))[1]["head"]
    # No --repo: objects come from a partial clone of the manifest's upstream URL in $FORKCTL_CACHE.
    code, data = run(setup, "--base", setup.base[:12])
    assert code == 0, data
    assert data["head"] == expected
    cache_repos = list((tmp_path / "cache" / "repos").iterdir())
    assert len(cache_repos) == 1
    # Offline: the upstream is gone; the warm cache still builds the same commits.
    shutil.move(setup.upstream.path, tmp_path / "moved-away")
    code, data = run(setup, "--base", setup.base, "--branch", "other")
    assert code == 0, data
    assert data["head"] == expected


@pytest.mark.parametrize("name", ["HEAD", "@", "-x", "--force", "refs/heads/main", "", "a..b", "bad\x1bname"])
def test_unusable_branch_names_are_refused_before_anything_is_built(
    setup: SeriesSetup, tmp_path: Path, name: str
) -> None:
    repo = clone(setup.upstream, tmp_path / "r", bare=True)
    refs_before = refs(repo)
    code, data = run(setup, "--base", setup.base, "--repo", str(repo.path), "--branch", name)
    assert code == 2, data
    assert "not a usable branch name" in data["error"]
    assert refs(repo) == refs_before
    assert not (repo.path / "forkctl").exists()


def test_a_truncated_patch_is_an_error_naming_the_file(setup: SeriesSetup, tmp_path: Path) -> None:
    """Cut right after a new file's `index` line, `git apply` happily creates an empty file."""
    second = setup.patch_files[1]
    raw = second.read_bytes()
    start = raw.index(b"diff --git a/megatron/core/new.py")
    cut = raw.index(b"\n", raw.index(b"\nindex ", start) + 1) + 1
    second.write_bytes(raw[:cut])
    repo = clone(setup.upstream, tmp_path / "r", bare=True)
    code, data = run(setup, "--base", setup.base, "--repo", str(repo.path))
    assert code == 2, data
    assert second.name in data["error"] and "megatron/core/new.py" in data["error"]
    assert "truncated" in data["error"]
    assert repo.git("for-each-ref", f"refs/heads/{BRANCH}") == ""


def test_abort_recovers_from_a_kill_during_the_conflict_setup(setup: SeriesSetup, tmp_path: Path) -> None:
    """A kill while git worked in the scratch worktree leaves its index.lock: --abort still cleans up
    and the next apply starts afresh (and refuses the stale series, leaving nothing)."""
    add_conflicting_patch(setup)
    repo = clone(setup.upstream, tmp_path / "r", bare=True)
    stop_left_by_an_earlier_forkctl(setup, repo)
    admin = repo.path / "worktrees" / "build-worktree"
    (admin / "index.lock").write_text("")  # what git leaves when killed mid-update
    code, data = run(setup, "--abort", "--repo", str(repo.path))
    assert code == 0, data
    assert not admin.exists() and not (repo.path / "forkctl").exists()
    code, data = run(setup, "--base", setup.base, "--repo", str(repo.path))
    assert code == 1 and data["stale"]["file"].endswith("fix-core-b-returns-3.patch"), data
    assert not admin.exists() and not (repo.path / "forkctl").exists()


def test_the_fix_for_a_stale_patch_port_onto_the_base_then_apply(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hint works: `forkctl port --onto <base>` refreshes the stale patch against the base (a 3-way
    merge, as a port does), after which apply builds the branch purely, the same in a shallow clone."""
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    setup, _, _ = make_stale_series(tmp_path / "s")
    repo = clone(setup.upstream, tmp_path / "full", bare=True)
    code, data = run_json(
        setup, "port", "--onto", setup.base, "--repo", str(repo.path), "--branch", "refresh"
    )
    assert code == 0, data
    code, data = run(setup, "--base", setup.base, "--repo", str(repo.path))
    assert code == 0, data
    head = repo.head(BRANCH)
    assert repo.git("show", f"{head}:megatron/core/long.py").splitlines()[4:8] == [
        "line five",
        "line 6",
        "line 7",
        "line eight",
    ]
    shallow = shallow_clone(setup.upstream, tmp_path / "shallow")
    code, again = run(setup, "--base", setup.base, "--repo", str(shallow.path))
    assert code == 0, again
    assert again["head"] == head
