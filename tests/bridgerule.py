"""Megatron-Bridge's own rule about its Megatron-LM pin, restated for our tests (written here, not copied).

The Bridge records the pin twice: the gitlink `3rdparty/Megatron-LM` and the file `.main.commit` (the
full SHA and a newline). Its unit test `tests/unit_tests/training/test_mcore_commit.py::
test_main_commit_matches_submodule` requires the gitlink to equal what `.main.commit` names (or
`.dev.commit`, a dev-variant CI's commit). Here the rule reads both from a commit object with plain git,
so any commit of a Bridge-shaped repository (a bump commit before it is checked out) can be judged.
"""

from __future__ import annotations

from pathlib import Path

from tests.gitrepos import git

GITLINK = "3rdparty/Megatron-LM"
MAIN_COMMIT = ".main.commit"
DEV_COMMIT = ".dev.commit"


def _recorded(repo: Path, commit: str, path: str) -> str | None:
    listed = git(repo, "ls-tree", commit, "--", path)
    if not listed:
        return None
    return git(repo, "cat-file", "blob", f"{commit}:{path}").strip()


def main_commit_matches_submodule(repo: Path, commit: str, gitlink: str = GITLINK) -> None:
    """Raise AssertionError unless the gitlink of `commit` is what `.main.commit` (or `.dev.commit`) names."""
    listed = git(repo, "ls-tree", commit, "--", gitlink).split()
    assert listed and listed[1] == "commit", f"{commit[:12]} has no gitlink at {gitlink}"
    pinned = listed[2]
    recorded = [_recorded(repo, commit, path) for path in (MAIN_COMMIT, DEV_COMMIT)]
    assert recorded[0] is not None, f"{commit[:12]} has no {MAIN_COMMIT}"
    assert pinned in recorded, f"{gitlink} pins {pinned} but {MAIN_COMMIT} names {recorded[0]}" + (
        f" and {DEV_COMMIT} {recorded[1]}" if recorded[1] else ""
    )
