"""Object-level git: repositories addressed by path, read and written as objects and refs only.

Trees are built in a private index file (`GIT_INDEX_FILE`), commits are made with `commit-tree` and
fixed identities and dates, refs are moved with compare-and-swap. Every command goes through the
hermetic runner (`runner.py`); nothing here touches a user's checkout, index or files.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from forkctl.errors import BadInput
from forkctl.git.patchtext import patch_id
from forkctl.git.runner import DIFF_FLAGS, GitFailed, run, run_bytes, try_run

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
# Existence questions must not turn into fetches from a partial clone's promisor remote: git >= 2.44
# honours GIT_NO_LAZY_FETCH; git 2.39 (this project's floor) ignores it and would lazily fetch a missing
# object (a commit with its whole history, without negotiation), so every transport is also refused
# for the command (GIT_ALLOW_PROTOCOL wins over any protocol.* setting): the lazy fetch fails at once,
# without touching the network, and the object reads as missing. The explicit fetches (remote.py)
# stay the only downloads.
NO_LAZY_FETCH = {"GIT_NO_LAZY_FETCH": "1", "GIT_ALLOW_PROTOCOL": "forkctl-no-lazy-fetch"}
ZERO_SHA = "0" * 40

__all__ = ["EMPTY_TREE", "ZERO_SHA", "GitFailed", "GitRepo", "PrivateIndex", "run", "run_bytes", "try_run"]


@dataclass(frozen=True)
class Identity:
    name: str
    email: str
    date: str  # anything git accepts in GIT_*_DATE, e.g. "2026-08-08T19:54:34+00:00"


# Facts about objects that cannot change while forkctl runs, remembered per repository (see has_object,
# tree_entries): a check asks about the same pinned commits several times.
_PRESENT: set[tuple[str, str]] = set()
_TREE_ENTRIES: dict[tuple[str, str, tuple[str, ...]], dict[str, TreeEntry]] = {}
FULL_OBJECT_NAME = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")

_CRUD = bytes([*range(33), *b".,:;<>\"\\'"])


def _ident_part(text: str) -> bytes | None:
    """`text` as git writes a name or email into a commit (crud stripped at the ends, '<', '>' and
    newlines dropped), or None when that would differ from `text`: such identities go to git itself."""
    raw = text.encode("utf-8")
    if not raw or raw.strip(_CRUD) != raw or any(c in raw for c in b"<>\n"):
        return None
    return raw


def commit_object(
    tree: str, parents: list[str], message: str, author_name: str, author_email: str, when: datetime
) -> tuple[str, bytes] | None:
    """(id, body) of the commit `commit-tree` makes with author = committer = this identity and date,
    computed here so that a series of commits needs no git process each; None when the identity or
    date is one whose rendering we leave to git (odd characters, no time zone, before 1970)."""
    name, email = _ident_part(author_name), _ident_part(author_email)
    offset = when.utcoffset()
    if name is None or email is None or offset is None or when.timestamp() < 0:
        return None
    minutes = int(offset.total_seconds()) // 60
    zone = f"{'-' if minutes < 0 else '+'}{abs(minutes) // 60:02d}{abs(minutes) % 60:02d}"
    ident = b"%s <%s> %d %s" % (name, email, int(when.timestamp()), zone.encode())
    lines = [b"tree " + tree.encode(), *(b"parent " + p.encode() for p in parents)]
    body = b"\n".join([*lines, b"author " + ident, b"committer " + ident]) + b"\n\n" + message.encode("utf-8")
    hasher = hashlib.sha256 if len(tree) == 64 else hashlib.sha1
    return hasher(b"commit %d\0" % len(body) + body).hexdigest(), body


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    tree: str
    parents: list[str]
    subject: str
    message: str
    author: Identity
    committer: Identity | None = None  # filled by commit_infos


@dataclass(frozen=True)
class TreeEntry:
    mode: str
    kind: str  # blob, tree, commit (a gitlink)
    sha: str
    path: str


FORMAT_PATCH = [
    "format-patch",
    *DIFF_FLAGS,
    "--no-to",
    "--no-cc",
    "--no-add-header",
    "--no-attach",
    "--no-thread",
    "--no-cover-letter",
    "--no-signoff",
    "--no-base",
    "--stdout",
    "--zero-commit",
    "--no-signature",
    "--full-index",
    "--no-stat",
    "--no-numbered",
    "--binary",
    "--no-renames",
    "--encode-email-headers",
]


def check_branch_name(name: str) -> str:
    """`name` when git accepts it as a new branch name and it cannot be mistaken for anything else.

    git's own rule (`check-ref-format --branch`) plus: no `@`, no leading `-`, no `refs/` prefix (which
    would create refs/heads/refs/heads/...), nothing a shell or terminal would treat specially.
    """
    status, out, _ = try_run(["check-ref-format", "--branch", name])
    if (
        status != 0
        or out.strip() != name
        or name in ("@", "HEAD")
        or name.startswith(("-", "refs/"))
        or any(ord(c) < 32 for c in name)
    ):
        raise BadInput(
            f"{name!r} is not a usable branch name",
            hint="pick a plain name such as farai/main (git check-ref-format --branch NAME must accept it)",
        )
    return name


class GitRepo:
    """A repository addressed by path; bare or not. No method touches its working tree or index."""

    def __init__(self, path: Path) -> None:
        status, out, _ = try_run(["rev-parse", "--absolute-git-dir", "--is-bare-repository"], cwd=path)
        lines = out.splitlines()
        if not Path(path).is_dir() or status != 0 or len(lines) != 2:
            raise BadInput(f"{path} is not a git repository", hint="pass the path of a clone")
        self.git_dir = Path(lines[0])
        toplevel_status, toplevel_out, _ = try_run(["rev-parse", "--show-toplevel"], cwd=path)
        # A bare repository, or a path inside a git dir, is addressed by its git dir.
        bare = lines[1] == "true" or toplevel_status != 0 or not toplevel_out.strip()
        self.path = self.git_dir if bare else Path(toplevel_out.strip())
        if Path(path).resolve() not in (self.path.resolve(), self.git_dir.resolve()):
            raise BadInput(
                f"{path} is not a git repository (it is inside {self.path})",
                hint="pass the root of a clone",
            )

    @classmethod
    def known_bare(cls, git_dir: Path) -> GitRepo:
        """A bare repository forkctl made itself (its cache), addressed without asking git again."""
        repo = cls.__new__(cls)
        repo.git_dir = repo.path = Path(git_dir).resolve()
        return repo

    @classmethod
    def init_bare(cls, path: Path) -> GitRepo:
        Path(path).mkdir(parents=True, exist_ok=True)
        run(["init", "--quiet", "--bare", "--", str(path)])
        return cls(path)

    # --- plain queries -------------------------------------------------------------------------

    def git(
        self,
        args: list[str],
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
        timeout: float | None = None,
    ) -> str:
        return run(["--git-dir", str(self.git_dir), *args], env=env, stdin=stdin, timeout=timeout)

    def try_git(
        self,
        args: list[str],
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
        timeout: float | None = None,
    ) -> tuple[int, str, str]:
        return try_run(["--git-dir", str(self.git_dir), *args], env=env, stdin=stdin, timeout=timeout)

    def resolve_commit(self, rev: str) -> str | None:
        """Full SHA of the commit `rev` names, or None when there is none (or it is ambiguous)."""
        status, out, _ = self.try_git(
            ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"], env=NO_LAZY_FETCH
        )
        return out.strip() if status == 0 and out.strip() else None

    def resolve_commits(self, revs: list[str]) -> dict[str, str | None]:
        """{rev: full SHA of the commit it names, or None}, for SHAs and abbreviations, in one process."""
        wanted = [rev for rev in dict.fromkeys(revs) if rev and "\n" not in rev and not rev.startswith("-")]
        found: dict[str, str | None] = dict.fromkeys(revs)
        answers = self._batch_check(wanted, "%(objectname) %(objecttype)")
        for rev, answer in zip(wanted, answers, strict=True):
            name, _, kind = (answer or "").partition(" ")
            found[rev] = name if kind == "commit" else None
        return found

    def _batch_check(self, queries: list[str], fmt: str = "%(objectname)") -> list[str | None]:
        """`cat-file --batch-check=<fmt>` over `queries` (object names, `<tree-ish>:<path>`; no newline
        in any): each query's formatted answer, None where git has no such object. A question, never a
        download. In a partial clone git 2.39 dies at the first absent object instead of printing
        `missing` (its refused lazy fetch is fatal), so the batch resumes after it: one more process
        per absent object; the warm path (everything here) is one process."""
        answers: list[str | None] = []
        pending = list(queries)
        while pending:
            stdin = "".join(f"{query}\n" for query in pending).encode()
            status, out, _ = self.try_git(
                ["cat-file", f"--batch-check={fmt}"], env=NO_LAZY_FETCH, stdin=stdin
            )
            lines = out.splitlines()[: len(pending)]
            for query, line in zip(pending, lines, strict=False):
                absent = line in (f"{query} missing", f"{query} ambiguous")
                answers.append(None if absent else line)
            if status == 0 or len(lines) >= len(pending):
                break
            answers.append(None)  # the query git died on
            pending = pending[len(lines) + 1 :]
        return answers

    def ancestors_among(self, commits: list[str], tip: str) -> set[str]:
        """Those of `commits` (full SHAs present here) that are ancestors of `tip`, in one process:
        `rev-list <commits> ^<tip>` lists what `tip` cannot reach, so the rest can."""
        if not commits:
            return set()
        stdin = "".join(f"{sha}\n" for sha in commits) + f"^{tip}\n"  # git 2.39: no --not in --stdin
        unreachable = set(self.git(["rev-list", "--stdin"], stdin=stdin.encode()).split())
        return {sha for sha in commits if sha not in unreachable}

    def has_object(self, sha: str) -> bool:
        """Is the object here? A question, never a download (where git can be told: see NO_LAZY_FETCH).
        A yes is remembered for the rest of the run: objects are added, never taken away, while forkctl
        runs (a check asks about the same pinned commits several times)."""
        key = (str(self.git_dir), sha)
        if key in _PRESENT:
            return True
        present = self.try_git(["cat-file", "-e", "--end-of-options", sha], env=NO_LAZY_FETCH)[0] == 0
        if present:
            _PRESENT.add(key)
        return present

    def missing_objects(self, shas: list[str]) -> list[str]:
        """Those of `shas` (full object names) that are not here: a question, never a download."""
        return [sha for sha, answer in zip(shas, self._batch_check(shas), strict=True) if answer is None]

    def is_ancestor(self, older: str, newer: str) -> bool:
        return self.try_git(["merge-base", "--is-ancestor", "--end-of-options", older, newer])[0] == 0

    def merge_bases(self, a: str, b: str) -> list[str]:
        status, out, _ = self.try_git(["merge-base", "--all", "--end-of-options", a, b])
        return out.split() if status == 0 else []

    def rev_list(self, range_spec: str, *extra: str) -> list[str]:
        """Commits in `range_spec`, oldest first."""
        out = self.git(["rev-list", "--reverse", *extra, range_spec])
        return out.split()

    def commits_not_in(self, tip: str, excluded: list[str]) -> list[str]:
        """Commits reachable from `tip` and from none of `excluded`, oldest first (topological)."""
        return self.git(["rev-list", "--reverse", "--topo-order", tip, "--not", *excluded, "--"]).split()

    def committer_ident(self) -> str | None:
        """`Name <email>` of whoever git would record as committer here (config), or None."""
        status, out, _ = self.try_git(["var", "GIT_COMMITTER_IDENT"])
        return out.rsplit(">", 1)[0] + ">" if status == 0 and ">" in out else None

    def set_config(self, key: str, value: str) -> None:
        self.git(["config", "--", key, value])

    def set_head(self, ref: str) -> None:
        self.git(["symbolic-ref", "HEAD", ref])

    def count(self, range_spec: str) -> int:
        return int(self.git(["rev-list", "--count", range_spec]))

    def commit_info(self, sha: str) -> CommitInfo:
        return self.commit_infos([sha])[0]

    def commit_infos(self, shas: list[str]) -> list[CommitInfo]:
        """`commit_info` of each commit, committer included, in one `git log --no-walk` (a message
        cannot hold a NUL, so NUL-separated fields are unambiguous)."""
        if not shas:
            return []
        fmt = "%H%x00%T%x00%P%x00%an%x00%ae%x00%aI%x00%cn%x00%ce%x00%cI%x00%B"
        stdin = "".join(f"{sha}\n" for sha in shas).encode()
        out = self.git(["log", "--no-walk=unsorted", "-z", f"--format={fmt}", "--stdin"], stdin=stdin)
        fields = out.split("\x00")
        infos = []
        for start in range(0, 10 * len(shas), 10):
            full, tree, parents, name, email, date, c_name, c_email, c_date, message = fields[
                start : start + 10
            ]
            infos.append(
                CommitInfo(
                    sha=full,
                    tree=tree,
                    parents=parents.split(),
                    subject=message.split("\n", 1)[0],
                    message=message if message.endswith("\n") else message + "\n",
                    author=Identity(name=name, email=email, date=date),
                    committer=Identity(name=c_name, email=c_email, date=c_date),
                )
            )
        return infos

    def tree_and_date(self, tree_of: str, date_of: str) -> tuple[str, str]:
        """(tree of `tree_of`, committer date of `date_of` in strict ISO 8601), in one process."""
        out = self.git(["log", "--no-walk=unsorted", "--format=%T %cI", tree_of, date_of, "--"])
        first, second = out.splitlines() if tree_of != date_of else (out, out)
        return first.split()[0], second.split()[1]

    def tree_entry(self, commit: str, path: str) -> TreeEntry | None:
        """The entry at `path` in `commit`'s tree (a gitlink shows as kind 'commit'), or None."""
        return self.tree_entries(commit, [path]).get(path)

    def tree_entries(self, commit: str, paths: list[str]) -> dict[str, TreeEntry]:
        """{path: entry} for those of `paths` that `commit`'s tree has, in one `ls-tree -z` (names exact,
        whatever characters they hold). Asked by full object name, the answer cannot change: it is
        remembered for the rest of the run."""
        if not paths:
            return {}
        key = (str(self.git_dir), commit, tuple(paths))
        if key in _TREE_ENTRIES:
            return dict(_TREE_ENTRIES[key])
        out = self.git(["ls-tree", "-z", "--full-tree", commit, "--", *paths])
        wanted, found = set(paths), {}
        for record in filter(None, out.split("\x00")):
            meta, entry_path = record.split("\t", 1)
            mode, kind, sha = meta.split()
            if entry_path in wanted:
                found[entry_path] = TreeEntry(mode=mode, kind=kind, sha=sha, path=entry_path)
        if FULL_OBJECT_NAME.fullmatch(commit):
            _TREE_ENTRIES[key] = dict(found)
        return found

    def read_blob(self, commit: str, path: str) -> bytes | None:
        entry = self.tree_entry(commit, path)
        if entry is None or entry.kind != "blob":
            return None
        return run_bytes(["--git-dir", str(self.git_dir), "cat-file", "blob", entry.sha])

    def blob_bytes(self, blob: str) -> bytes:
        """The contents of the blob object `blob`."""
        return run_bytes(["--git-dir", str(self.git_dir), "cat-file", "blob", blob])

    def diff_commits(self, old: str, new: str) -> bytes:
        """Full-index binary diff from `old` to `new` (either a commit or a tree)."""
        return run_bytes(
            [
                "--git-dir",
                str(self.git_dir),
                "diff",
                *DIFF_FLAGS,
                "--no-renames",
                "--full-index",
                "--binary",
                old,
                new,
            ]
        )

    def commit_patch_id(self, sha: str) -> str:
        return patch_id(self.diff_commits(f"{sha}^", sha))

    def changed_paths(self, old: str, new: str) -> list[str]:
        return self.git(["diff", *DIFF_FLAGS, "--name-only", "--no-renames", old, new, "--"]).splitlines()

    # --- refs ----------------------------------------------------------------------------------

    def ref_sha(self, ref: str) -> str | None:
        status, out, _ = self.try_git(["rev-parse", "--verify", "--quiet", "--end-of-options", ref])
        return out.strip() if status == 0 and out.strip() else None

    def branch_sha(self, branch: str) -> str | None:
        return self.ref_sha(f"refs/heads/{branch}")

    def update_ref(self, ref: str, new: str, old: str | None, reason: str) -> None:
        """Move `ref` to `new` only if it still points at `old` (ZERO_SHA/None: must not exist)."""
        self.git(["update-ref", "-m", f"forkctl: {reason}", ref, new, old or ZERO_SHA])

    def set_ref(self, ref: str, new: str, reason: str) -> None:
        """Point `ref` at `new` whatever it held (for forkctl's own bookkeeping refs in its cache)."""
        self.git(["update-ref", "-m", f"forkctl: {reason}", ref, new])

    def delete_ref(self, ref: str, old: str) -> None:
        self.git(["update-ref", "-d", ref, old])

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

    def object_ids(self, specs: list[str]) -> dict[str, str | None]:
        """{`<tree-ish>:<path>` spec: object id, None when absent}, all in one `cat-file --batch-check`.
        A spec holding a newline cannot go through the line protocol: ask ls-tree for it instead."""
        plain = [spec for spec in specs if "\n" not in spec]
        answers = dict(zip(plain, self._batch_check(plain), strict=True))
        for spec in specs:
            if "\n" in spec:
                tree, path = spec.split(":", 1)
                entry = self.tree_entry(tree, path)
                answers[spec] = entry.sha if entry else None
        return answers

    def objects_dir(self) -> Path:
        """Where this repository's loose objects go (a linked worktree's are in its common dir)."""
        cached = getattr(self, "_objects_dir", None)
        if cached is None:
            cached = Path(self.git(["rev-parse", "--git-path", "objects"]))
            cached = cached if cached.is_absolute() else self.git_dir / cached
            self._objects_dir = cached
        return cached

    def write_loose_commit(self, made: tuple[str, bytes]) -> str:
        """Store a commit made by `commit_object` as a loose object, without a git process: git's
        loose format (zlib of "commit <size>\\0<body>" at objects/<2 hex>/<rest>), written to a
        temp file and linked into place, as git writes it. For the merge stand-ins, one per ported
        patch, where a process each cost as much as the merge."""
        oid, body = made
        target = self.objects_dir() / oid[:2] / oid[2:]
        if target.exists():
            return oid
        target.parent.mkdir(exist_ok=True)
        data = zlib.compress(b"commit %d\0" % len(body) + body)
        handle, temp = tempfile.mkstemp(prefix="tmp_obj_", dir=target.parent)
        try:
            with os.fdopen(handle, "wb") as stream:
                stream.write(data)
            os.chmod(temp, 0o444)
            with contextlib.suppress(FileExistsError):  # another writer stored the same object
                os.link(temp, target)
        finally:
            os.unlink(temp)
        return oid

    def write_commits(self, objects: list[tuple[str, bytes]]) -> None:
        """Write commit objects made by `commit_object` in one `hash-object` process; each must come out
        under the id it was made with (git checks the format, and we check git agrees with us)."""
        if not objects:
            return
        with tempfile.TemporaryDirectory(prefix="forkctl-commits-") as scratch:
            paths = []
            for number, (_, body) in enumerate(objects):
                path = Path(scratch) / f"{number}"
                path.write_bytes(body)
                paths.append(str(path))
            out = self.git(
                ["hash-object", "-t", "commit", "-w", "--stdin-paths"],
                stdin="".join(f"{p}\n" for p in paths).encode(),
            )
        written = out.split()
        expected = [sha for sha, _ in objects]
        if written != expected:
            raise GitFailed("git stored the commits under other ids than forkctl made them with", out)

    # --- worktrees (only for conflict resolution) ---------------------------------------------

    def add_worktree(self, path: Path, commit: str) -> None:
        self.git(["worktree", "add", "--detach", str(path), commit])

    def remove_worktree(self, path: Path) -> None:
        self.try_git(["worktree", "remove", "--force", str(path)])
        self.try_git(["worktree", "prune"])

    def format_patch(self, sha: str) -> bytes:
        """One commit as a byte-stable format-patch mail: zero commit, full index, no stat/signature."""
        return run_bytes(["--git-dir", str(self.git_dir), *FORMAT_PATCH, "-1", sha])

    def format_patches(self, base: str, shas: list[str]) -> list[bytes]:
        """`format_patch` of each commit of the chain `base..shas[-1]` (shas oldest first), in one
        process: the mails are split at the `From <zero id> ...` line each one starts with. When the
        split does not give one mail per commit (a message holding that very line), ask per commit."""
        if not shas:
            return []
        out = run_bytes(["--git-dir", str(self.git_dir), *FORMAT_PATCH, f"{base}..{shas[-1]}"])
        marker = b"From " + b"0" * len(shas[0]) + b" Mon Sep 17 00:00:00 2001\n"
        # Mails are separated by one empty line: a mail ends "...\n", then "\n", then the next marker.
        parts = out.split(b"\n" + marker)
        mails = parts[:1] + [marker + part for part in parts[1:]]
        well_formed = all(mail.startswith(marker) and mail.endswith(b"\n") for mail in mails)
        if len(mails) != len(shas) or not well_formed:
            return [self.format_patch(sha) for sha in shas]
        return mails


class PrivateIndex:
    """An index file of our own, bound to a repository's object database."""

    def __init__(self, repo: GitRepo, index_file: Path) -> None:
        self.repo = repo
        self.env = {"GIT_INDEX_FILE": str(index_file)}

    def read_tree(self, tree: str) -> None:
        self.repo.git(["read-tree", tree], env=self.env)

    def apply(self, diff: bytes) -> tuple[bool, str]:
        """Apply a diff to this index only. Returns (applied, git's message when it did not)."""
        status, _, err = self.repo.try_git(["apply", "--cached", "--whitespace=nowarn", "-"], self.env, diff)
        return status == 0, err

    def apply_3way(self, diff: bytes, tree: str) -> tuple[bool, str]:
        """`git apply --cached --3way`: a drifted context merges from the patch's `index` blobs.

        On failure the index is put back to `tree` (git leaves conflict stages in it).
        """
        args = ["apply", "--cached", "--3way", "--whitespace=nowarn", "-"]
        status, _, err = self.repo.try_git(args, self.env, diff)
        if status != 0:
            self.read_tree(tree)
        return status == 0, err

    def write_tree(self) -> str:
        # `--missing-ok`: the tree is written from the index's entries alone. Without it git checks
        # that every blob the index names is present, and in a blobless partial clone (the cache)
        # that lazily fetches every file of the tree, when only the changed entries are new.
        return self.repo.git(["write-tree", "--missing-ok"], env=self.env).strip()


# --- plain directory trees (no repository) -----------------------------------------------------


def _tree_env(tree: Path) -> dict[str, str]:
    # Stop git from finding a repository above the tree: paths must be taken relative to `tree`.
    return {"GIT_CEILING_DIRECTORIES": str(tree.resolve().parent)}


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


# --- submodules read from commit objects (check-pins, bump-bridge) -----------------------------


@dataclass(frozen=True)
class SubmoduleEntry:
    """One `[submodule "<name>"]` section of a `.gitmodules` blob."""

    name: str
    path: str | None
    url: str | None
    options: dict[str, str]  # every key of the section (path, url, shallow, branch, ...)


def parse_gitmodules(repo: GitRepo, blob: str) -> list[SubmoduleEntry]:
    """The sections of a `.gitmodules` blob, read by git's own config parser (`--blob`), in file order."""
    status, out, err = repo.try_git(["config", "--blob", blob, "--null", "--list"])
    if status != 0:
        raise GitFailed(f"cannot parse .gitmodules ({blob})", err, hint="fix the .gitmodules syntax")
    sections: dict[str, dict[str, str]] = {}
    for item in out.split("\x00"):
        if not item:
            continue
        key, _, value = item.partition("\n")
        if not key.startswith("submodule.") or key.count(".") < 2:
            continue
        name, variable = key[len("submodule.") :].rsplit(".", 1)
        sections.setdefault(name, {})[variable.lower()] = value
    return [
        SubmoduleEntry(name=name, path=opts.get("path"), url=opts.get("url"), options=opts)
        for name, opts in sections.items()
    ]


def read_gitmodules(repo: GitRepo, commit: str) -> list[SubmoduleEntry] | None:
    """`.gitmodules` of `commit` (no checkout), or None when the commit has none."""
    entry = repo.tree_entry(commit, ".gitmodules")
    if entry is None or entry.kind != "blob":
        return None
    return parse_gitmodules(repo, entry.sha)


def write_blob(repo: GitRepo, data: bytes) -> str:
    return repo.git(["hash-object", "-w", "--stdin"], stdin=data).strip()


def gitmodules_with(repo: GitRepo, blob: str, name: str, key: str, value: str) -> str:
    """A new `.gitmodules` blob: `blob` with `submodule.<name>.<key>` set to `value`, every other
    line byte for byte (git config edits the file in place, keeping comments and order)."""
    data = run_bytes(["--git-dir", str(repo.git_dir), "cat-file", "blob", blob])
    with tempfile.TemporaryDirectory(prefix="forkctl-gitmodules-") as scratch:
        path = Path(scratch) / "gitmodules"
        path.write_bytes(data)
        run(["config", "--file", str(path), f"submodule.{name}.{key}", value])
        return write_blob(repo, path.read_bytes())


def index_set_entry(index: PrivateIndex, mode: str, sha: str, path: str) -> None:
    """Point `path` in a private index at `sha` (mode 160000: a gitlink) without touching any file."""
    index.repo.git(["update-index", "--add", "--cacheinfo", f"{mode},{sha},{path}"], env=index.env)


def commit_with_identity(repo: GitRepo, tree: str, parents: list[str], message: str) -> str:
    """A commit by the configured user (author and committer from git's config/environment, now)."""
    args = ["commit-tree", tree]
    for parent in parents:
        args += ["-p", parent]
    return repo.git([*args, "-F", "-"], stdin=message.encode("utf-8")).strip()


# --- conflict worktrees and series comparison (apply --continue, port) -------------------------


def checked_out_branches(repo: GitRepo) -> dict[str, Path]:
    """{branch name: worktree path} for every worktree (the main one included) that has one checked out."""
    out = repo.git(["worktree", "list", "--porcelain"])
    branches: dict[str, Path] = {}
    current: Path | None = None
    for line in out.splitlines():
        if line.startswith("worktree "):
            current = Path(line.removeprefix("worktree "))
        elif line.startswith("branch refs/heads/") and current is not None:
            branches[line.removeprefix("branch refs/heads/")] = current
    return branches


def worktree_apply_3way(worktree: Path, diff: bytes) -> tuple[bool, str]:
    """`git apply --3way` in a worktree (its files and index): conflicts are left as markers."""
    status, out, err = try_run(["apply", "--3way", "--whitespace=nowarn", "-"], cwd=worktree, stdin=diff)
    return status == 0, "\n".join(part for part in (out.strip(), err.strip()) if part)


def worktree_unmerged_paths(worktree: Path) -> list[str]:
    return run(["diff", "--name-only", "--diff-filter=U"], cwd=worktree).splitlines()


def worktree_checkout(worktree: Path, commit: str) -> None:
    """Point a (forkctl-owned, scratch) worktree at `commit`, discarding whatever it held."""
    run(["reset", "--quiet", "--hard", commit], cwd=worktree)
    run(["clean", "-fdq"], cwd=worktree)


def worktree_show_tree(worktree: Path, tree: str) -> None:
    """Put `tree` into a (forkctl-owned, scratch) worktree's index and files; HEAD stays where it is."""
    run(["read-tree", "--reset", "-u", tree], cwd=worktree)


def worktree_write_tree(worktree: Path) -> str:
    """Stage every file of a worktree (resolutions included) in its own index and write the tree."""
    run(["add", "-A", "."], cwd=worktree)
    return run(["write-tree"], cwd=worktree).strip()


def range_diff(repo: GitRepo, old_range: str, new_range: str) -> str:
    """`git range-diff` of two series, e.g. old-base..old-head vs new-base..new-head (no colour)."""
    status, out, err = repo.try_git(["range-diff", "--no-color", old_range, new_range])
    return out if status == 0 else err


def committer_of(repo: GitRepo, sha: str) -> Identity:
    """The committer of `sha`; equal to the author (date included) for forkctl's reproducible commits."""
    name, email, date = repo.git(["show", "-s", "--format=%cn%x00%ce%x00%cI", sha]).split("\x00")
    return Identity(name=name, email=email, date=date)


def toplevel(cwd: Path) -> Path | None:
    """The root of the working tree that contains `cwd`, or None outside any repository."""
    status, out, _ = try_run(["rev-parse", "--show-toplevel"], cwd=cwd)
    return Path(out.strip()) if status == 0 and out.strip() else None


def index_apply_check(index: PrivateIndex, diff: bytes, reverse: bool = False) -> bool:
    """Would `diff` apply (or, reverse, un-apply) to this private index? Changes nothing."""
    args = ["apply", "--cached", "--check", "--whitespace=nowarn", *(["--reverse"] if reverse else []), "-"]
    return index.repo.try_git(args, index.env, diff)[0] == 0


def last_commit_touching(repo: GitRepo, range_spec: str, paths: list[str]) -> str | None:
    """The newest commit in `range_spec` that changed any of `paths` (evidence for an absorbed patch)."""
    if not paths:
        return None
    out = repo.git(["log", "-1", "--format=%H", range_spec, "--", *paths]).strip()
    return out or None


def tree_from_directory(repo: GitRepo, directory: Path) -> str:
    """Store every file under `directory` (ignore rules off) in `repo` and return the tree's SHA.

    A private index and `--work-tree` pointed at `directory`: the repository's own index and files
    are never touched (the demo snapshots an installed package this way).
    """
    with tempfile.TemporaryDirectory(prefix="forkctl-index-") as scratch:
        env = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
        where = ["-c", "core.autocrlf=false", "--git-dir", str(repo.git_dir), "--work-tree", str(directory)]
        run([*where, "add", "--all", "--force", "."], cwd=directory, env=env)
        return run([*where, "write-tree"], cwd=directory, env=env).strip()


def patch_ids_in_range(repo: GitRepo, range_spec: str, zero_context: bool = False) -> dict[str, str]:
    """{patch-id: oldest commit with it} for every non-merge commit in `range_spec`, in two processes.

    `zero_context`: ids of `-U0` diffs, which match a change whose surrounding lines upstream rewrote.
    """
    ids: dict[str, str] = {}
    for commit, patch in commit_patch_ids(repo, range_spec, zero_context).items():
        ids.setdefault(patch, commit)
    return ids


def commit_patch_ids(repo: GitRepo, range_spec: str, zero_context: bool = False) -> dict[str, str]:
    """{commit: patch-id}, oldest first, for every non-merge commit in `range_spec`, in two processes."""
    log = run_bytes(
        [
            "--git-dir",
            str(repo.git_dir),
            "log",
            "-p",
            "--no-merges",
            "--reverse",
            "--format=commit %H",
            *DIFF_FLAGS,
            "--no-renames",
            "--full-index",
            "--binary",
            *(["-U0"] if zero_context else []),
            range_spec,
        ]
    )
    ids: dict[str, str] = {}
    for line in run(["patch-id", "--stable"], stdin=log).splitlines():
        parts = line.split()
        if len(parts) == 2:
            ids[parts[1]] = parts[0]
    return ids


def changed_lines_per_commit(repo: GitRepo, range_spec: str) -> dict[str, int]:
    """{commit: added plus removed lines (a binary file counts one)} over `range_spec`, one process."""
    out = run(
        [
            "--git-dir",
            str(repo.git_dir),
            "log",
            "--numstat",
            "--no-renames",
            "--format=commit %H",
            *DIFF_FLAGS,
            range_spec,
        ]
    )
    counts: dict[str, int] = {}
    current = None
    for line in out.splitlines():
        if line.startswith("commit "):
            current = line.split()[1]
            counts[current] = 0
        elif line.strip() and current is not None:
            added, removed, _ = line.split("\t", 2)
            counts[current] += 1 if added == "-" else int(added) + int(removed)
    return counts


def changed_paths_between(repo: GitRepo, old: str, new: str) -> set[str]:
    """Every path that differs between two commits (no rename pairing: both names count)."""
    out = run(
        ["--git-dir", str(repo.git_dir), "diff", "--name-only", "-z", "--no-renames", *DIFF_FLAGS, old, new]
    )
    return set(filter(None, out.split("\x00")))


def zero_context_patch_id(repo: GitRepo, old: str, new: str) -> str:
    diff = run_bytes(
        [
            "--git-dir",
            str(repo.git_dir),
            "diff",
            *DIFF_FLAGS,
            "--no-renames",
            "--full-index",
            "--binary",
            "-U0",
            old,
            new,
        ]
    )
    return patch_id(diff)


def changed_line_count(repo: GitRepo, old: str, new: str) -> int:
    """Added plus removed lines from `old` to `new` (binary files count one each)."""
    out = run(["--git-dir", str(repo.git_dir), "diff", "--numstat", "--no-renames", *DIFF_FLAGS, old, new])
    total = 0
    for line in out.splitlines():
        added, removed, _ = line.split("\t", 2)
        total += 1 if added == "-" else int(added) + int(removed)
    return total
