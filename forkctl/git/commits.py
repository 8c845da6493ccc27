"""Commits as values and as objects: identities, commits made with fixed identities and dates, and
reading what a commit records.

A reproducible commit's bytes depend only on its inputs, so a series of them can be computed here
(`commit_object`) and stored without a git process each (`write_loose_commit`, `write_commits`);
`commit_tree` leaves to git the identities and dates whose rendering we do not reproduce.
"""

from __future__ import annotations

import contextlib
import os
import zlib
from datetime import datetime
from pathlib import Path

import msgspec

from forkctl.digests import sha1_hex, sha256_hex
from forkctl.git.gitdir import Part
from forkctl.git.runner import GitFailed
from forkctl.git.sha import Sha, TreeSha, printed_commit, printed_tree


class Identity(msgspec.Struct, frozen=True):
    name: str
    email: str
    date: str  # anything git accepts in GIT_*_DATE, e.g. "2026-08-08T19:54:34+00:00"


class CommitInfo(msgspec.Struct, frozen=True):
    sha: str
    tree: TreeSha
    parents: list[str]
    subject: str
    message: str
    author: Identity
    committer: Identity | None = None  # filled by commit_infos


_CRUD = bytes([*range(33), *b".,:;<>\"\\'"])


def _ident_part(text: str) -> bytes | None:
    """`text` as git writes a name or email into a commit (crud stripped at the ends, '<', '>' and
    newlines dropped), or None when that would differ from `text`: such identities go to git itself."""
    raw = text.encode("utf-8")
    if not raw or raw.strip(_CRUD) != raw or any(c in raw for c in b"<>\n"):
        return None
    return raw


def commit_object(
    tree: TreeSha, parents: list[str], message: str, author_name: str, author_email: str, when: datetime
) -> tuple[Sha, bytes] | None:
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
    body = (
        b"\n".join([*lines, b"author " + ident, b"committer " + ident])
        + b"\n\n"
        + message.encode("utf-8", "surrogateescape")
    )
    hasher = sha256_hex if len(tree) == 64 else sha1_hex
    return Sha(hasher(b"commit %d\0" % len(body) + body)), body


class Commits(Part):
    """Making commits (fixed identities; computed objects written in bulk) and reading their records."""

    def commit_tree(self, tree: TreeSha, parents: list[str], message: str, author: Identity) -> Sha:
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
        return printed_commit(
            self.repo.git([*args, "-F", "-"], env=env, stdin=message.encode("utf-8", "surrogateescape")).text,
            "commit-tree",
        )

    def objects_dir(self) -> Path:
        """Where this repository's loose objects go (a linked worktree's are in its common dir)."""
        repo = self.repo
        if (
            repo.loose_objects is None
            and not (repo.git_dir / "commondir").exists()
            and (repo.git_dir / "objects").is_dir()
        ):
            # A repository's own git dir (not a linked worktree's, which names its common dir in
            # `commondir`): its objects are here (the runner drops GIT_OBJECT_DIRECTORY), no process.
            repo.loose_objects = repo.git_dir / "objects"
        if repo.loose_objects is None:
            asked = Path(repo.git(["rev-parse", "--git-path", "objects"]).text)
            repo.loose_objects = asked if asked.is_absolute() else repo.git_dir / asked
        return repo.loose_objects

    def write_loose_commit(self, made: tuple[Sha, bytes]) -> Sha:
        """Store a commit made by `commit_object` as a loose object, without a git process: git's
        loose format (zlib of "commit <size>\\0<body>" at objects/<2 hex>/<rest>), written to a
        temp file and linked into place, as git writes it. For the merge stand-ins, one per ported
        patch, where a process each cost as much as the merge."""
        oid, body = made
        self._write_loose(oid, b"commit", body)
        return oid

    def write_loose_object(self, kind: bytes, body: bytes) -> str:
        """Store an object of `kind` (b"tree", b"blob") as a loose object, as `write_loose_commit`
        does; its SHA-1 id is computed here."""
        return self._write_loose(sha1_hex(b"%s %d\0" % (kind, len(body)) + body), kind, body)

    def _write_loose(self, oid: str, kind: bytes, body: bytes) -> str:
        target = self.objects_dir() / oid[:2] / oid[2:]
        if target.exists():
            return oid
        target.parent.mkdir(exist_ok=True)
        data = zlib.compress(b"%s %d\0" % (kind, len(body)) + body)
        import tempfile  # only writers pay for it (a re-apply or a check writes no object)

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

    def write_commits(self, objects: list[tuple[Sha, bytes]]) -> None:
        """Write commit objects made by `commit_object` in one `hash-object` process; each must come out
        under the id it was made with (git checks the format, and we check git agrees with us)."""
        if not objects:
            return
        import tempfile

        with tempfile.TemporaryDirectory(prefix="forkctl-commits-") as scratch:
            paths = []
            for number, (_, body) in enumerate(objects):
                path = Path(scratch) / f"{number}"
                path.write_bytes(body)
                paths.append(str(path))
            out = self.repo.git(
                ["hash-object", "-t", "commit", "-w", "--stdin-paths"],
                stdin="".join(f"{p}\n" for p in paths).encode(),
            ).text
        written = out.split()
        expected = [sha for sha, _ in objects]
        if written != expected:
            raise GitFailed("git stored the commits under other ids than forkctl made them with", out)

    def commit_info(self, sha: str) -> CommitInfo:
        return self.commit_infos([sha])[0]

    def commit_infos(self, shas: list[str]) -> list[CommitInfo]:
        """`commit_info` of each commit, committer included, in one `git log --no-walk` (a message
        cannot hold a NUL, so NUL-separated fields are unambiguous)."""
        if not shas:
            return []
        fmt = "%H%x00%T%x00%P%x00%an%x00%ae%x00%aI%x00%cn%x00%ce%x00%cI%x00%B"
        stdin = "".join(f"{sha}\n" for sha in shas).encode()
        out = self.repo.git(
            ["log", "--no-walk=unsorted", "-z", f"--format={fmt}", "--stdin"], stdin=stdin
        ).text
        fields = out.split("\x00")
        infos = []
        for start in range(0, 10 * len(shas), 10):
            full, tree, parents, name, email, date, c_name, c_email, c_date, message = fields[
                start : start + 10
            ]
            infos.append(
                CommitInfo(
                    sha=full,
                    tree=printed_tree(tree, "log (%T)"),
                    parents=parents.split(),
                    subject=message.split("\n", 1)[0],
                    message=message if message.endswith("\n") else message + "\n",
                    author=Identity(name=name, email=email, date=date),
                    committer=Identity(name=c_name, email=c_email, date=c_date),
                )
            )
        return infos

    def recorded_parents(self, sha: str) -> tuple[TreeSha, list[str]]:
        """(tree, parents) as the commit object records them: in a shallow repository a boundary
        commit shows no parents to `log`, but its own bytes still name them."""
        body = self.repo.git(["cat-file", "commit", "--end-of-options", sha]).text.split("\n\n", 1)[0]
        fields = [line.split(" ", 1) for line in body.splitlines() if " " in line]
        tree = next(value for key, value in fields if key == "tree")
        return printed_tree(tree, "cat-file commit"), [value for key, value in fields if key == "parent"]

    def tree_and_date(self, tree_of: str, date_of: str) -> tuple[TreeSha, str]:
        """(tree of `tree_of`, committer date of `date_of` in strict ISO 8601), in one process."""
        out = self.repo.git(["log", "--no-walk=unsorted", "--format=%T %cI", tree_of, date_of, "--"]).text
        first, second = out.splitlines() if tree_of != date_of else (out, out)
        return printed_tree(first.split()[0], "log (%T)"), second.split()[1]

    def committer_of(self, sha: str) -> Identity:
        """The committer of `sha`; equal to the author (date included) for forkctl's reproducible commits."""
        name, email, date = self.repo.git(["show", "-s", "--format=%cn%x00%ce%x00%cI", sha]).text.split(
            "\x00"
        )
        return Identity(name=name, email=email, date=date)
