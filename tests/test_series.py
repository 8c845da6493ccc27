"""The series parser on format-patch files that git itself wrote."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from forkctl.errors import BadInput
from forkctl.series import parse_patch
from tests.gitrepos import init_repo


def _git_patch_id(repo: Path, rev: str) -> str:
    show = subprocess.run(["git", "show", rev], cwd=repo, capture_output=True, check=True).stdout
    out = subprocess.run(["git", "patch-id", "--stable"], input=show, capture_output=True, check=True).stdout
    return out.decode().split()[0]


@pytest.fixture
def repo(tmp_path: Path):
    return init_repo(tmp_path / "r", {"pkg/a.py": "A = 1\n", "pkg/old.py": "OLD = 1\n"})


def test_parses_every_field(repo, tmp_path: Path) -> None:
    repo.commit(
        "perf(moe): group the expert GEMMs\n\n"
        "The frozen base weights need no weight gradient.\n\n"
        "Second paragraph of the why.\n\n"
        "(cherry picked from commit 1111111111111111111111111111111111111111)\n"
        "(cherry picked from commit 2222222222222222222222222222222222222222)\n"
        "Signed-off-by: Ann Author <ann@example.com>\n"
        "Reviewed-by: Rev Iewer <rev@example.com>",
        {"pkg/a.py": "A = 2\n", "pkg/new.py": "NEW = 1\n", "pkg/old.py": None},
        date="2026-03-04T05:06:07+02:00",
    )
    path = repo.format_patch("HEAD", tmp_path / "out")
    patch = parse_patch(path)
    assert patch.subject == "perf(moe): group the expert GEMMs"
    assert patch.author_name == "Test User" and patch.author_email == "test@example.com"
    assert patch.date.isoformat() == "2026-03-04T05:06:07+02:00"
    assert patch.body.startswith("The frozen base weights need no weight gradient.\n\nSecond paragraph")
    assert patch.provenance == ["1" * 40, "2" * 40]
    assert patch.latest_provenance == "2" * 40
    assert patch.trailers == [
        ("Signed-off-by", "Ann Author <ann@example.com>"),
        ("Reviewed-by", "Rev Iewer <rev@example.com>"),
    ]
    assert patch.paths == ["pkg/a.py", "pkg/new.py", "pkg/old.py"]
    assert patch.patch_id == _git_patch_id(repo.path, "HEAD")
    assert patch.number == 1
    # The message round-trips to what git recorded.
    assert patch.message == repo.git("log", "-1", "--format=%B") + "\n"


def test_diffstat_and_signature_are_not_part_of_the_diff(repo, tmp_path: Path) -> None:
    repo.commit("fix: one", {"pkg/a.py": "A = 3\n"})
    out = tmp_path / "plain"
    out.mkdir()
    # Plain format-patch: with a diffstat and a version signature.
    name = repo.git("format-patch", "-1", "HEAD", "-o", str(out))
    patch = parse_patch(Path(name))
    assert patch.subject == "fix: one"
    assert patch.diff.startswith(b"diff --git a/pkg/a.py b/pkg/a.py")
    assert b"\n-- \n" not in patch.diff
    assert patch.patch_id == _git_patch_id(repo.path, "HEAD")
    assert patch.provenance == [] and patch.trailers == []


def test_patch_id_ignores_message_and_context_moves(repo, tmp_path: Path) -> None:
    repo.commit("first wording", {"pkg/a.py": "A = 9\n"})
    first = parse_patch(repo.format_patch("HEAD", tmp_path / "one"))
    repo.git("commit", "-q", "--amend", "-m", "a different message")
    second = parse_patch(repo.format_patch("HEAD", tmp_path / "two"))
    assert first.patch_id == second.patch_id
    repo.commit("other change", {"pkg/a.py": "A = 10\n"})
    third = parse_patch(repo.format_patch("HEAD", tmp_path / "three"))
    assert third.patch_id != first.patch_id


def test_non_ascii_subject_and_author(repo, tmp_path: Path) -> None:
    repo.git("config", "user.name", "Zoë Müller")
    repo.commit("feat: naïve façade", {"pkg/a.py": "A = 'ü'\n"})
    patch = parse_patch(repo.format_patch("HEAD", tmp_path / "u"))
    assert patch.subject == "feat: naïve façade"
    assert patch.author_name == "Zoë Müller"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"just some notes\n", "must start with a 'From <sha>' line"),
        (
            b"From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\nFrom: a <a@b>\n"
            b"Date: Mon, 1 Jan 2026 00:00:00 +0000\nSubject: [PATCH] x\n\nbody only\n",
            "no 'diff --git' section",
        ),
        (
            b"From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\nFrom: a <a@b>\n\n"
            b"diff --git a/x b/x\n",
            "missing Subject, From or Date",
        ),
    ],
    ids=["plain-text", "no-diff", "no-headers"],
)
def test_not_a_patch_is_rejected(tmp_path: Path, content: bytes, expected: str) -> None:
    path = tmp_path / "0001-x.patch"
    path.write_bytes(content)
    with pytest.raises(BadInput, match=expected):
        parse_patch(path)
