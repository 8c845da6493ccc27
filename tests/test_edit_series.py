"""Editing the series: `forkctl edit` gives it as a branch in a worktree, `export` turns the branch back
into the files (as `gbp pq import` / `export`), and a patch file edited by hand is caught by `lint
--repo` (its index lines checked against what applying it on the base gives) and mended by `forkctl
refresh` (as `quilt refresh`).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from forkctl.series import parse_patch
from tests.gitrepos import Repo, git, init_repo
from tests.seriesrepo import SeriesSetup, clone, make_series, run_json

A_FILE = "megatron/core/a.py"


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SeriesSetup:
    """The series as forkctl keeps it: exported once from the maintainer's branch (`[PATCH]` subjects,
    one provenance line each), as every later export and refresh writes it."""
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    setup = make_series(tmp_path)
    code, data = run_json(setup, "export", "--repo", str(setup.dev.path), "--branch", "series")
    assert code == 0, data
    return setup


def series_bytes(setup: SeriesSetup) -> dict[str, bytes]:
    folder = setup.root / "patches"
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def user_clone(setup: SeriesSetup, tmp_path: Path) -> Repo:
    """A person's clone of upstream with `main` checked out and uncommitted work in it."""
    user = clone(setup.upstream, tmp_path / "user")
    (user.path / "README.md").write_text("my uncommitted notes\n")
    (user.path / "scratch.txt").write_text("untracked\n")
    return user


def checkout_state(user: Repo) -> tuple[str, str, str, str]:
    return (
        user.git("symbolic-ref", "HEAD"),
        user.head(),
        user.git("status", "--porcelain=v1", "--untracked-files=all"),
        (user.path / "README.md").read_text(),
    )


def test_edit_gives_the_series_as_a_branch_and_export_round_trips(setup: SeriesSetup, tmp_path: Path) -> None:
    user = user_clone(setup, tmp_path)
    before, files_before = checkout_state(user), series_bytes(setup)
    code, data = run_json(setup, "edit", "--repo", str(user.path))
    assert code == 0, data
    worktree, branch = Path(data["worktree"]), data["branch"]
    assert git(worktree, "symbolic-ref", "--short", "HEAD") == branch
    assert git(worktree, "status", "--porcelain=v1") == ""
    # One commit per patch on the base, each with the patch's message, author and date.
    commits = git(worktree, "rev-list", "--reverse", f"{setup.base}..HEAD").split()
    assert len(commits) == len(setup.patch_files)
    for commit, entry in zip(commits, setup.manifest_data()["series"], strict=True):
        patch = parse_patch(setup.root / entry["file"])
        fields = git(worktree, "show", "-s", "--format=%an%x00%ae%x00%aI%x00%B", commit).split("\x00")
        assert fields[:3] == [patch.author_name, patch.author_email, patch.date.isoformat()]
        assert fields[3].rstrip("\n") == patch.message.rstrip("\n")
    assert checkout_state(user) == before  # the person's branch, index and files are untouched
    code, exported = run_json(setup, "export", "--branch", branch, "--repo", str(user.path))
    assert code == 0, exported
    assert exported["changed"] == [] and series_bytes(setup) == files_before
    # The same again: edit refuses to overwrite the branch it made, and names it.
    code, again = run_json(setup, "edit", "--repo", str(user.path))
    assert code == 2 and branch in again["error"] and str(worktree) in again["error"], again
    # The printed way to remove it works from anywhere and leaves the person's checkout as it was.
    subprocess.run(data["commands"]["remove"], shell=True, check=True, cwd=tmp_path, capture_output=True)
    assert not worktree.exists() and user.git("branch", "--list", branch) == ""
    assert checkout_state(user) == before


def test_an_amended_commit_exports_as_a_consistent_patch(setup: SeriesSetup, tmp_path: Path) -> None:
    user = user_clone(setup, tmp_path)
    target = tmp_path / "editing"
    code, data = run_json(setup, "edit", "--repo", str(user.path), "--worktree", str(target))
    assert code == 0, data
    assert Path(data["worktree"]) == target
    text = (target / A_FILE).read_text()
    (target / A_FILE).write_text(text.replace("'hi'", "'hello'"))
    git(target, "commit", "-q", "--all", "--amend", "--no-edit")
    files_before = series_bytes(setup)
    code, exported = run_json(setup, "export", "--branch", data["branch"], "--repo", str(user.path))
    assert code == 0, exported
    changed = [Path(file).name for file in exported["changed"]]
    assert changed == ["0004-fix-core-helper-says-hi.patch"], exported
    assert [name for name, raw in series_bytes(setup).items() if files_before[name] != raw] == [
        "megatron-lm/0004-fix-core-helper-says-hi.patch"
    ]
    code, linted = run_json(setup, "lint", "--repo", str(user.path))
    assert code == 0, linted
    code, built = run_json(
        setup, "apply", "--base", setup.base, "--repo", str(user.path), "--branch", "check"
    )
    assert code == 0, built
    assert "'hello'" in user.git("show", f"check:{A_FILE}")


def hand_edit(patch_file: Path) -> None:
    """Change an added line, leave the `index` line as it was (what an editor does)."""
    raw = patch_file.read_bytes()
    assert b"+    return 'hi'\n" in raw
    patch_file.write_bytes(raw.replace(b"+    return 'hi'\n", b"+    return 'hey'\n"))


def test_a_hand_edited_patch_is_caught_by_lint_and_refreshed(setup: SeriesSetup, tmp_path: Path) -> None:
    fork = clone(setup.upstream, tmp_path / "fork", bare=True)
    edited = setup.patch_files[3]
    hand_edit(edited)
    rel = str(edited.relative_to(setup.root))
    code, linted = run_json(setup, "lint", "--repo", str(fork.path))
    assert code == 1, linted
    problems = [p for p in linted["problems"] if p["file"] == rel]
    assert len(problems) == 1, linted
    assert A_FILE in problems[0]["message"] and "index line" in problems[0]["message"]
    fix = f"forkctl refresh 0004 --repo {fork.path}"
    assert fix in problems[0]["hint"], problems
    code, refused = run_json(setup, "apply", "--base", setup.base, "--repo", str(fork.path))
    assert code != 0 and "forkctl refresh" in refused.get("hint", ""), refused
    others = {name: raw for name, raw in series_bytes(setup).items() if not name.endswith(edited.name)}
    code, refreshed = run_json(setup, *fix.split()[1:])
    assert code == 0, refreshed
    assert refreshed["changed"] == [rel]
    assert b"+    return 'hey'\n" in edited.read_bytes()  # the edit is kept; its index line now matches
    assert {
        name: raw for name, raw in series_bytes(setup).items() if not name.endswith(edited.name)
    } == others
    code, linted = run_json(setup, "lint", "--repo", str(fork.path))
    assert code == 0, linted
    code, built = run_json(setup, "apply", "--base", setup.base, "--repo", str(fork.path))
    assert code == 0, built
    assert "'hey'" in fork.git("show", f"farai/main:{A_FILE}")
    # A consistent series refreshes to the same bytes.
    files_before = series_bytes(setup)
    code, again = run_json(setup, "refresh", "--repo", str(fork.path))
    assert code == 0 and again["changed"] == [] and series_bytes(setup) == files_before, again


def test_edit_in_a_clone_without_the_base_is_bad_input(setup: SeriesSetup, tmp_path: Path) -> None:
    """`--repo` names a repository that lacks the manifest's base: exit 2 naming the base and the fix
    (before, the unresolved base went on to git as if it were a commit: git's "bad object", no fix)."""
    other = init_repo(tmp_path / "other", {"README.md": "another project\n"})
    code, data = run_json(setup, "edit", "--repo", str(other.path))
    assert code == 2, data
    assert "base" in data["error"] and "fetch" in data["hint"], data
    assert other.git("branch", "--list", "--format=%(refname:short)") == "main"  # no branch left behind
