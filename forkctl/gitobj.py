"""Object-level git: the only module (with remote.py) that runs git.

Everything here works on objects and refs, never on the user's checkout: trees are built in a private
index file (`GIT_INDEX_FILE`), commits are made with `commit-tree` and fixed identities and dates, refs
are moved with compare-and-swap. GitPython runs the commands; arguments are lists, never shell strings.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import git
from git.exc import GitCommandError, InvalidGitRepositoryError, NoSuchPathError

from forkctl.errors import BadInput

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
ZERO_SHA = "0" * 40


class GitFailed(BadInput):
    """A git command failed; `stderr` carries git's own words."""

    def __init__(self, message: str, stderr: str = "", hint: str | None = None) -> None:
        super().__init__(message if not stderr else f"{message}: {stderr.strip()}", hint)
        self.stderr = stderr


def _git(cwd: Path | None = None) -> git.Git:
    return git.Git(str(cwd) if cwd else None)


def run(
    args: list[str],
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    stdin: bytes | None = None,
    strip: bool = True,
) -> str:
    """Run `git <args>` and return stdout; raise GitFailed with git's stderr on failure."""
    try:
        output = _git(cwd).execute(
            ["git", *args],
            env=dict(env) if env else None,
            istream=_stdin(stdin),
            stdout_as_string=True,
            strip_newline_in_stdout=strip,
        )
    except GitCommandError as exc:
        raise GitFailed(f"git {args[0]} failed", str(exc.stderr).strip().removeprefix("stderr: ")) from None
    return str(output)


def run_bytes(args: list[str], cwd: Path | None = None, stdin: bytes | None = None) -> bytes:
    try:
        output = _git(cwd).execute(
            ["git", *args], istream=_stdin(stdin), stdout_as_string=False, strip_newline_in_stdout=False
        )
    except GitCommandError as exc:
        raise GitFailed(f"git {args[0]} failed", str(exc.stderr)) from None
    assert isinstance(output, bytes)
    return output


def try_run(
    args: list[str], cwd: Path | None = None, env: Mapping[str, str] | None = None, stdin: bytes | None = None
) -> tuple[int, str, str]:
    """Run git and return (status, stdout, stderr) without raising: for checks whose failure is data."""
    status, out, err = _git(cwd).execute(
        ["git", *args],
        env=dict(env) if env else None,
        istream=_stdin(stdin),
        with_extended_output=True,
        with_exceptions=False,
        stdout_as_string=True,
    )
    return int(status), str(out), str(err)


def _stdin(data: bytes | None):  # type: ignore[no-untyped-def]
    if data is None:
        return None
    handle = tempfile.TemporaryFile()
    handle.write(data)
    handle.seek(0)
    return handle


def patch_id(diff: bytes) -> str:
    """`git patch-id --stable` of a diff: the same for the same change, whatever its context or message."""
    output = run(["patch-id", "--stable"], stdin=diff)
    return output.split()[0] if output else ""


@dataclass(frozen=True)
class Identity:
    name: str
    email: str
    date: str  # anything git accepts in GIT_*_DATE, e.g. "2026-08-08T19:54:34+00:00"


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    tree: str
    parents: list[str]
    subject: str
    message: str
    author: Identity


@dataclass(frozen=True)
class TreeEntry:
    mode: str
    kind: str  # blob, tree, commit (a gitlink)
    sha: str
    path: str


class GitRepo:
    """A repository addressed by path; bare or not. No method touches its working tree or index."""

    def __init__(self, path: Path) -> None:
        try:
            self.repo = git.Repo(str(path))
        except (InvalidGitRepositoryError, NoSuchPathError):
            raise BadInput(f"{path} is not a git repository", hint="pass the path of a clone") from None
        self.git_dir = Path(self.repo.git_dir)
        self.path = Path(self.repo.working_tree_dir or self.repo.git_dir)

    @classmethod
    def init_bare(cls, path: Path) -> GitRepo:
        git.Repo.init(str(path), bare=True)
        return cls(path)

    # --- plain queries -------------------------------------------------------------------------

    def git(self, args: list[str], env: Mapping[str, str] | None = None, stdin: bytes | None = None) -> str:
        return run(["--git-dir", str(self.git_dir), *args], env=env, stdin=stdin)

    def try_git(
        self, args: list[str], env: Mapping[str, str] | None = None, stdin: bytes | None = None
    ) -> tuple[int, str, str]:
        return try_run(["--git-dir", str(self.git_dir), *args], env=env, stdin=stdin)

    def resolve_commit(self, rev: str) -> str | None:
        """Full SHA of the commit `rev` names, or None when there is none (or it is ambiguous)."""
        status, out, _ = self.try_git(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"])
        return out.strip() if status == 0 and out.strip() else None

    def has_object(self, sha: str) -> bool:
        return self.try_git(["cat-file", "-e", sha])[0] == 0

    def is_ancestor(self, older: str, newer: str) -> bool:
        return self.try_git(["merge-base", "--is-ancestor", older, newer])[0] == 0

    def merge_bases(self, a: str, b: str) -> list[str]:
        status, out, _ = self.try_git(["merge-base", "--all", a, b])
        return out.split() if status == 0 else []

    def rev_list(self, range_spec: str, *extra: str) -> list[str]:
        """Commits in `range_spec`, oldest first."""
        out = self.git(["rev-list", "--reverse", *extra, range_spec])
        return out.split()

    def count(self, range_spec: str) -> int:
        return int(self.git(["rev-list", "--count", range_spec]))

    def commit_info(self, sha: str) -> CommitInfo:
        fmt = "%H%x00%T%x00%P%x00%an%x00%ae%x00%aI%x00%B"
        out = self.git(["show", "-s", f"--format={fmt}", sha])
        full, tree, parents, name, email, date, message = out.split("\x00", 6)
        return CommitInfo(
            sha=full,
            tree=tree,
            parents=parents.split(),
            subject=message.split("\n", 1)[0],
            message=message if message.endswith("\n") else message + "\n",
            author=Identity(name=name, email=email, date=date),
        )

    def tree_entry(self, commit: str, path: str) -> TreeEntry | None:
        """The entry at `path` in `commit`'s tree (a gitlink shows as kind 'commit'), or None."""
        out = self.git(["ls-tree", "--full-tree", commit, "--", path])
        for line in out.splitlines():
            meta, entry_path = line.split("\t", 1)
            mode, kind, sha = meta.split()
            if entry_path == path:
                return TreeEntry(mode=mode, kind=kind, sha=sha, path=entry_path)
        return None

    def read_blob(self, commit: str, path: str) -> bytes | None:
        entry = self.tree_entry(commit, path)
        if entry is None or entry.kind != "blob":
            return None
        return run_bytes(["--git-dir", str(self.git_dir), "cat-file", "blob", entry.sha])

    def diff_commits(self, old: str, new: str) -> bytes:
        """Full-index binary diff from `old` to `new` (either a commit or a tree)."""
        return run_bytes(["--git-dir", str(self.git_dir), "diff", "--full-index", "--binary", old, new])

    def commit_patch_id(self, sha: str) -> str:
        return patch_id(self.diff_commits(f"{sha}^", sha))

    def changed_paths(self, old: str, new: str) -> list[str]:
        return self.git(["diff", "--name-only", "--no-renames", old, new]).splitlines()

    # --- refs ----------------------------------------------------------------------------------

    def ref_sha(self, ref: str) -> str | None:
        status, out, _ = self.try_git(["rev-parse", "--verify", "--quiet", ref])
        return out.strip() if status == 0 and out.strip() else None

    def branch_sha(self, branch: str) -> str | None:
        return self.ref_sha(f"refs/heads/{branch}")

    def current_branch(self) -> str | None:
        status, out, _ = self.try_git(["symbolic-ref", "--quiet", "--short", "HEAD"])
        return out.strip() if status == 0 else None

    def update_ref(self, ref: str, new: str, old: str | None, reason: str) -> None:
        """Move `ref` to `new` only if it still points at `old` (ZERO_SHA/None: must not exist)."""
        self.git(["update-ref", "-m", f"forkctl: {reason}", ref, new, old or ZERO_SHA])

    def delete_ref(self, ref: str, old: str) -> None:
        self.git(["update-ref", "-d", ref, old])

    def refs_containing(self, sha: str) -> list[str]:
        out = self.git(["for-each-ref", "--contains", sha, "--format=%(refname)", "refs/heads", "refs/tags"])
        return out.splitlines()

    # --- building trees and commits without a checkout ----------------------------------------

    @contextlib.contextmanager
    def private_index(self, tree: str) -> Iterator[PrivateIndex]:
        """A temporary index file loaded with `tree`; the repository's own index is never touched."""
        with tempfile.TemporaryDirectory(prefix="forkctl-index-") as scratch:
            index = PrivateIndex(self, Path(scratch) / "index")
            index.read_tree(tree)
            yield index

    def commit_tree(self, tree: str, parents: list[str], message: str, author: Identity) -> str:
        """Make a commit whose author and committer are both `author`: the SHA depends only on inputs."""
        env = {
            **os.environ,
            "GIT_AUTHOR_NAME": author.name,
            "GIT_AUTHOR_EMAIL": author.email,
            "GIT_AUTHOR_DATE": author.date,
            "GIT_COMMITTER_NAME": author.name,
            "GIT_COMMITTER_EMAIL": author.email,
            "GIT_COMMITTER_DATE": author.date,
        }
        args = ["commit-tree", tree]
        for parent in parents:
            args += ["-p", parent]
        # `-F -` keeps the message byte for byte (no stripping of trailing lines or comments).
        return self.git([*args, "-F", "-"], env=env, stdin=message.encode("utf-8")).strip()

    # --- worktrees (only for conflict resolution) ---------------------------------------------

    def add_worktree(self, path: Path, commit: str) -> None:
        self.git(["worktree", "add", "--detach", str(path), commit])

    def remove_worktree(self, path: Path) -> None:
        self.try_git(["worktree", "remove", "--force", str(path)])
        self.try_git(["worktree", "prune"])

    def format_patch(self, sha: str) -> bytes:
        """One commit as a byte-stable format-patch mail: zero commit, full index, no stat/signature."""
        return run_bytes(
            [
                "--git-dir",
                str(self.git_dir),
                "-c",
                "diff.noprefix=false",
                "-c",
                "format.signature=",
                "format-patch",
                "--stdout",
                "--zero-commit",
                "--no-signature",
                "--full-index",
                "--no-stat",
                "--no-numbered",
                "--binary",
                "--no-renames",
                "--encode-email-headers",
                "-1",
                sha,
            ]
        )


class PrivateIndex:
    """An index file of our own, bound to a repository's object database."""

    def __init__(self, repo: GitRepo, index_file: Path) -> None:
        self.repo = repo
        self.env = {**os.environ, "GIT_INDEX_FILE": str(index_file)}

    def read_tree(self, tree: str) -> None:
        self.repo.git(["read-tree", tree], env=self.env)

    def apply(self, diff: bytes) -> tuple[bool, str]:
        """Apply a diff to this index only. Returns (applied, git's message when it did not)."""
        status, _, err = self.repo.try_git(["apply", "--cached", "--whitespace=nowarn", "-"], self.env, diff)
        return status == 0, err

    def write_tree(self) -> str:
        return self.repo.git(["write-tree"], env=self.env).strip()


# --- plain directory trees (no repository) -----------------------------------------------------


def _tree_env(tree: Path) -> dict[str, str]:
    # Stop git from finding a repository above the tree: paths must be taken relative to `tree`.
    return {**os.environ, "GIT_CEILING_DIRECTORIES": str(tree.resolve().parent)}


def tree_apply_check(tree: Path, diff: bytes, include: str, reverse: bool = False) -> tuple[bool, str]:
    """Would `diff` (restricted to `include`) apply to the files under `tree`? (reverse: un-apply)"""
    args = ["apply", "--check", f"--include={include}", "--whitespace=nowarn"]
    if reverse:
        args.append("--reverse")
    status, _, err = try_run([*args, "-"], cwd=tree, env=_tree_env(tree), stdin=diff)
    return status == 0, err


def tree_apply(tree: Path, diff: bytes, include: str, reverse: bool = False) -> None:
    args = ["apply", f"--include={include}", "--whitespace=nowarn"]
    if reverse:
        args.append("--reverse")
    status, _, err = try_run([*args, "-"], cwd=tree, env=_tree_env(tree), stdin=diff)
    if status != 0:
        raise GitFailed(f"git apply failed in {tree}", err)
