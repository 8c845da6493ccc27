"""apply's commits are made in memory and written in one batch: they must be byte for byte the commits
`git commit-tree` makes (the fork's SHAs are what consumers pin), and a series applies with a fixed
number of git processes per patch."""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from forkctl.git.commits import Identity, commit_object
from forkctl.git.repo import GitRepo
from forkctl.ops import replay as build
from forkctl.series import parse_patches
from tests.gitrepos import FORMAT_PATCH, git, init_repo

IDENTITIES = [
    ("A U Thor", "author@example.com"),
    ("Jürgen Ünïcode-Åström", "jürgen@exämple.de"),
    ("O'Brien, Pat (ML infra)", "pat+fork@example.com"),
    ("李小龙", "li@example.cn"),
]
ZONES = [timezone.utc, timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(hours=-8))]
MESSAGES = [
    "subject\n",
    "feat(moe): a subject\n\nbody line\n\n(cherry picked from commit " + "a" * 40 + ")\n",
    "fix: trailing blank lines\n\n\n",
    "ünïcode subject — with a dash\n\nSigned-off-by: A <a@b>\n",
]


def test_commits_made_in_memory_equal_commit_tree(tmp_path: Path) -> None:
    upstream = init_repo(tmp_path / "up", {"f.txt": "x\n"})
    repo = GitRepo(upstream.path)
    tree = upstream.git("rev-parse", "HEAD^{tree}")
    parent = upstream.head()
    checked = 0
    for (name, email), zone, message in zip(IDENTITIES * 3, ZONES * 4, MESSAGES * 3, strict=False):
        when = datetime(2026, 8, 8, 19, 54, 34, tzinfo=zone)
        made = commit_object(tree, [parent], message, name, email, when)
        assert made is not None, (name, email)
        sha, _ = made
        expected = repo.commits.commit_tree(tree, [parent], message, Identity(name, email, when.isoformat()))
        assert sha == expected, (name, email, zone, message)
        repo.commits.write_commits([made])  # git agrees, and accepts the object
        assert git(upstream.path, "cat-file", "-t", sha) == "commit"
        checked += 1
    assert checked == 12


@pytest.mark.parametrize(
    ("name", "email"),
    [(" padded name ", "a@b.c"), ("name.", "a@b.c"), ("A <x> B", "a@b.c"), ("A", "<a@b.c>"), ("", "a@b.c")],
)
def test_identities_git_would_rewrite_are_left_to_git(name: str, email: str) -> None:
    when = datetime(2026, 1, 1, tzinfo=timezone.utc)
    assert commit_object("b" * 40, [], "m\n", name, email, when) is None


def test_naive_dates_are_left_to_git() -> None:
    assert commit_object("b" * 40, [], "m\n", "A", "a@b.c", datetime(2026, 1, 1)) is None


def test_a_series_with_an_odd_author_builds_the_same_commits_as_commit_tree(tmp_path: Path) -> None:
    """Mixed identities (one git must clean up) in one series: every commit is what commit-tree gives."""
    upstream = init_repo(tmp_path / "up", {"f.txt": "1\n", "g.txt": "1\n"})
    base = upstream.head()
    authors = [
        ("Clean Author", "c@example.com"),
        (" Odd Author.", "odd@example.com"),
        ("Ünï", "u@example.com"),
    ]
    for number, (name, email) in enumerate(authors):
        upstream.write({"f.txt": f"{number + 2}\n"})
        env = {**os.environ, "GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email}
        git(upstream.path, "commit", "-q", "-am", f"change {number}", env=env)
    out = tmp_path / "patches"
    git(upstream.path, *FORMAT_PATCH, "-q", "-o", str(out), f"{base}..HEAD")
    patches = parse_patches(sorted(out.glob("*.patch")))
    repo = GitRepo(upstream.path)
    result = build.build_series(repo, base, patches)
    assert result.complete and len(result.applied) == 3
    parent = base
    for applied in result.applied:
        info = repo.commits.commit_info(applied.commit)
        assert info.parents == [parent]
        expected = repo.commits.commit_tree(
            info.tree, [parent], applied.patch.message, build.identity_of(applied.patch)
        )
        assert applied.commit == expected
        parent = applied.commit
    assert git(upstream.path, "fsck", "--no-dangling") == ""


def test_a_loose_commit_written_without_git_is_what_commit_tree_stores(tmp_path: Path) -> None:
    upstream = init_repo(tmp_path / "up", {"f.txt": "x\n"})
    repo = GitRepo(upstream.path)
    tree, parent = upstream.git("rev-parse", "HEAD^{tree}"), upstream.head()
    when = datetime(2027, 3, 4, 5, 6, 7, tzinfo=ZONES[1])
    made = commit_object(tree, [parent], "stand-in ü\n", "forkctl", "forkctl@localhost", when)
    assert made is not None
    loose = upstream.path / ".git" / "objects" / made[0][:2] / made[0][2:]
    assert not loose.exists()
    assert repo.commits.write_loose_commit(made) == made[0]
    assert repo.commits.write_loose_commit(made) == made[0]  # again: already there, nothing to do
    assert git(upstream.path, "cat-file", "-t", made[0]) == "commit"
    expected = repo.commits.commit_tree(
        tree, [parent], "stand-in ü\n", Identity("forkctl", "forkctl@localhost", when.isoformat())
    )
    assert expected == made[0]
    assert git(upstream.path, "fsck", "--no-dangling", "--strict") == ""
    assert loose.is_file() and not list(loose.parent.glob("tmp_obj_*"))
