"""Where a patch file's commit message ends: where `git am` ends it, at the first patch break.

git's mailinfo stops the message at the first line that is `---` (then only whitespace), `--- ` and a
name, a `diff -` header or a CVS `Index: ` line; what follows (a diffstat, notes, the diff) is the patch.
A message that holds such a line is cut there by `git am`, so forkctl must read it the same way: the
commit it builds from the file is then the one `git am` makes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from forkctl.series import parse_patch
from tests.gitrepos import git, init_repo

BODIES = {
    "a --- line, then a diffstat": "para one\n---\nafter the dashes\n",
    "--- and trailing blanks": "para one\n--- \t\nafter\n",
    "--- and a file name": "para one\n--- a/notes.txt\nafter\n",
    "a diff header": "para one\ndiff -u old new\nafter\n",
    "a CVS Index line": "para one\nIndex: notes.txt\nafter\n",
    "two --- lines": "one\n---\ntwo\n---\nthree\n",
    "not a break: ----": "para one\n----\nstill the message\n",
    "not a break: ---x": "para one\n---x\nstill the message\n",
    "not a break: indented ---": "para one\n ---\nstill the message\n",
}


def _exported(tmp_path: Path, body: str, stat: bool) -> tuple[Path, Path]:
    repo = init_repo(tmp_path / "repo", {"f.txt": "a\n"})
    (repo.path / "f.txt").write_text("b\n")
    git(repo.path, "commit", "-q", "-a", "-m", f"subject line\n\n{body}")
    out = git(repo.path, "format-patch", "-1", "-o", str(tmp_path / "out"), *([] if stat else ["--no-stat"]))
    return repo.path, Path(out)


@pytest.mark.parametrize("stat", [True, False], ids=["with diffstat", "no stat"])
@pytest.mark.parametrize("label", sorted(BODIES))
def test_the_message_ends_where_git_mailinfo_ends_it(tmp_path: Path, label: str, stat: bool) -> None:
    repo, patch_file = _exported(tmp_path, BODIES[label], stat)
    git(repo, "mailinfo", str(tmp_path / "msg"), str(tmp_path / "rest"), input=patch_file.read_bytes())
    by_git = (tmp_path / "msg").read_text().strip("\n")
    assert parse_patch(patch_file).body == by_git


def test_the_commit_message_is_the_one_git_am_records(tmp_path: Path) -> None:
    _, patch_file = _exported(tmp_path, BODIES["a --- line, then a diffstat"], stat=True)
    applied = init_repo(tmp_path / "applied", {"f.txt": "a\n"})
    git(applied.path, "am", "-q", str(patch_file))
    recorded = git(applied.path, "log", "-1", "--format=%B")
    patch = parse_patch(patch_file)
    assert patch.body == "para one"
    assert patch.message.strip("\n") == recorded
