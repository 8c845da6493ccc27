"""Private indexes: trees built in an index file of forkctl's own (`GIT_INDEX_FILE`), so that the
repository's own index and files are never touched; read-tree, apply --cached, write-tree."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from forkctl.git.gitdir import GitDir, Part
from forkctl.git.runner import git
from forkctl.git.sha import TreeSha, printed_tree


class PrivateIndex:
    """An index file of our own, bound to a repository's object database."""

    def __init__(self, repo: GitDir, index_file: Path) -> None:
        self.repo = repo
        self.env = {"GIT_INDEX_FILE": str(index_file)}

    def read_tree(self, tree: str) -> None:
        self.repo.git(["read-tree", tree], env=self.env)

    def apply(self, diff: bytes) -> tuple[bool, str]:
        """Apply a diff to this index only. Returns (applied, git's message when it did not)."""
        status, _, err = self.repo.git(
            ["apply", "--cached", "--whitespace=nowarn", "-"], self.env, diff, check=False
        ).parts()
        return status == 0, err

    def apply_3way(self, diff: bytes, tree: str) -> tuple[bool, str]:
        """`git apply --cached --3way`: a drifted context merges from the patch's `index` blobs.

        On failure the index is put back to `tree` (git leaves conflict stages in it).
        """
        args = ["apply", "--cached", "--3way", "--whitespace=nowarn", "-"]
        status, _, err = self.repo.git(args, self.env, diff, check=False).parts()
        if status != 0:
            self.read_tree(tree)
        return status == 0, err

    def write_tree(self) -> TreeSha:
        # `--missing-ok`: the tree is written from the index's entries alone. Without it git checks
        # that every blob the index names is present, and in a blobless partial clone (the cache)
        # that lazily fetches every file of the tree, when only the changed entries are new.
        return printed_tree(self.repo.git(["write-tree", "--missing-ok"], env=self.env).text, "write-tree")

    def apply_check(self, diff: bytes, reverse: bool = False) -> bool:
        """Would `diff` apply (or, reverse, un-apply) to this private index? Changes nothing."""
        args = [
            "apply",
            "--cached",
            "--check",
            "--whitespace=nowarn",
            *(["--reverse"] if reverse else []),
            "-",
        ]
        return self.repo.git(args, self.env, diff, check=False).status == 0

    def set_entry(self, mode: str, sha: str, path: str) -> None:
        """Point `path` in a private index at `sha` (mode 160000: a gitlink) without touching any file."""
        self.repo.git(["update-index", "--add", "--cacheinfo", f"{mode},{sha},{path}"], env=self.env)

    def replace_entries(self, removed: list[str], entries: list[tuple[str, str, str]]) -> None:
        """Drop `removed` and set each (mode, sha, path) of `entries` in a private index, in one
        `update-index --index-info` (NUL-separated: any path; a file replaces a directory of that name)."""
        zero = "0" * 40
        records = [f"0 {zero}\t{path}" for path in removed] + [
            f"{mode} {sha}\t{path}" for mode, sha, path in entries
        ]
        if records:
            stdin = "".join(f"{record}\x00" for record in records).encode("utf-8")
            self.repo.git(["update-index", "-z", "--index-info"], env=self.env, stdin=stdin)


class Indexes(Part):
    """Hands out private indexes over this repository's objects."""

    @contextlib.contextmanager
    def private_index(self, tree: str) -> Iterator[PrivateIndex]:
        """A temporary index file loaded with `tree`; the repository's own index is never touched."""
        import tempfile  # only a build pays for it: a re-apply recognised from its record makes none

        with tempfile.TemporaryDirectory(prefix="forkctl-index-") as scratch:
            index = PrivateIndex(self.repo, Path(scratch) / "index")
            index.read_tree(tree)
            yield index

    def tree_from_directory(self, directory: Path) -> TreeSha:
        """Store every file under `directory` (ignore rules off) in `repo` and return the tree's SHA.

        A private index and `--work-tree` pointed at `directory`: the repository's own index and files
        are never touched (the demo snapshots an installed package this way).
        """
        import tempfile

        with tempfile.TemporaryDirectory(prefix="forkctl-index-") as scratch:
            env = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
            where = [
                "--git-dir",
                str(self.repo.git_dir),
                "--work-tree",
                str(directory),
            ]
            git([*where, "add", "--all", "--force", "."], cwd=directory, env=env)
            return printed_tree(git([*where, "write-tree"], cwd=directory, env=env).text, "write-tree")
