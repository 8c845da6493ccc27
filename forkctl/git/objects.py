"""Asking which objects a repository holds and reading them: never a download.

One `cat-file --batch-check` mechanism answers existence and resolution questions for many names in
one process, resumed past an absent object in a partial clone; tree entries and blobs are read by
object name. Facts that cannot change while forkctl runs (an object is here, a pinned commit's tree
entries) are remembered per repository.
"""

from __future__ import annotations

import weakref

import msgspec

from forkctl.git.gitdir import Part
from forkctl.git.runner import NO_LAZY_FETCH, GitFailed
from forkctl.git.sha import Sha, is_full_sha, parse_full_sha

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


class TreeEntry(msgspec.Struct, frozen=True):
    mode: str
    kind: str  # blob, tree, commit (a gitlink)
    sha: str
    path: str


class Blobs(Part):
    """Blob contents: read through the repository's one `cat-file --batch`, written with hash-object."""

    def raw_object(self, name: str) -> tuple[str, bytes] | None:
        """(type, contents) of the object `name`, read through this repository's one `cat-file --batch`
        (git/batch.py); None when there is none here."""
        if self.repo.reader is None:
            from forkctl.git.batch import ObjectReader

            self.repo.reader = ObjectReader(self.repo.git_dir)
            weakref.finalize(self.repo, self.repo.reader.close)
        return self.repo.reader.read(name) if name and "\n" not in name else None

    def blob_bytes(self, blob: str) -> bytes:
        """The contents of the blob object `blob`; GitFailed when it is no blob here."""
        found = self.raw_object(blob)
        if found is None or found[0] != "blob":
            raise GitFailed(f"git cat-file failed: no blob {blob} in {self.repo.git_dir}", "")
        return found[1]

    def write_blob(self, data: bytes) -> str:
        return self.repo.git(["hash-object", "-w", "--stdin"], stdin=data).text.strip()

    def blob_id(self, data: bytes) -> str:
        """The id `data` would have as a blob here, nothing written (a check may read any repository)."""
        return self.repo.git(["hash-object", "--stdin"], stdin=data).text.strip()


class Objects(Blobs):
    """Existence, resolution and contents of objects."""

    def resolve_commit(self, rev: str) -> Sha | None:
        """Full SHA of the commit `rev` names, or None when there is none (or it is ambiguous)."""
        status, out, _ = self.repo.git(
            ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"],
            env=NO_LAZY_FETCH,
            check=False,
        ).parts()
        return parse_full_sha(out.strip()) if status == 0 else None

    def resolve_commits(self, revs: list[str]) -> dict[str, Sha | None]:
        """{rev: full SHA of the commit it names, or None}, for SHAs and abbreviations, in one process."""
        wanted = [rev for rev in dict.fromkeys(revs) if rev and "\n" not in rev and not rev.startswith("-")]
        found: dict[str, Sha | None] = dict.fromkeys(revs)
        answers = self._batch_check(wanted, "%(objectname) %(objecttype)")
        for rev, answer in zip(wanted, answers, strict=True):
            name, _, kind = (answer or "").partition(" ")
            found[rev] = parse_full_sha(name) if kind == "commit" else None
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
            status, out, _ = self.repo.git(
                ["cat-file", f"--batch-check={fmt}"], env=NO_LAZY_FETCH, stdin=stdin, check=False
            ).parts()
            lines = out.splitlines()[: len(pending)]
            for query, line in zip(pending, lines, strict=False):
                absent = line in (f"{query} missing", f"{query} ambiguous")
                answers.append(None if absent else line)
            if status == 0 or len(lines) >= len(pending):
                break
            answers.append(None)  # the query git died on
            pending = pending[len(lines) + 1 :]
        return answers

    def has_object(self, sha: str) -> bool:
        """Is the object here? A question, never a download (where git can be told: see NO_LAZY_FETCH).
        A yes is kept on this repository object: objects are added, never taken away, while forkctl
        runs (a check asks about the same pinned commits several times)."""
        if sha in self.repo.present:
            return True
        present = (
            self.repo.git(["cat-file", "-e", "--end-of-options", sha], env=NO_LAZY_FETCH, check=False).status
            == 0
        )
        if present:
            self.repo.present.add(sha)
        return present

    def missing_objects(self, shas: list[str]) -> list[str]:
        """Those of `shas` (object names) that are not here: a question, never a download, in one
        process, none when every one is already known to be here (a yes is remembered, as in
        `has_object`: the same blob or commit is asked about for every link that holds it)."""
        unknown = list(dict.fromkeys(sha for sha in shas if sha not in self.repo.present))
        answers = dict(zip(unknown, self._batch_check(unknown), strict=True))
        self.repo.present.update(sha for sha, answer in answers.items() if answer is not None)
        return [sha for sha in shas if sha not in self.repo.present]

    def missing_commits(self, shas: list[str]) -> list[str]:
        """Those of the commits `shas` that are not here (as `has_object(f"{sha}^{{commit}}")` asks,
        and remembered the same way), in one process for them all."""
        peeled = {f"{sha}^{{commit}}": sha for sha in shas}
        return [peeled[name] for name in self.missing_objects(list(peeled))]

    def object_sizes(self, shas: list[str]) -> dict[str, int]:
        """{object name: its size in bytes} for objects here, in one process (GitFailed for one that is not)."""
        answers = dict(zip(shas, self._batch_check(shas, "%(objectsize)"), strict=True))
        missing = [sha for sha, size in answers.items() if size is None or not size.isdigit()]
        if missing:
            raise GitFailed(f"git cat-file failed: no object {missing[0]} in {self.repo.git_dir}", "")
        return {sha: int(size) for sha, size in answers.items() if size is not None}

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

    def tree_entry(self, commit: str, path: str) -> TreeEntry | None:
        """The entry at `path` in `commit`'s tree (a gitlink shows as kind 'commit'), or None."""
        return self.tree_entries(commit, [path]).get(path)

    def tree_entries(self, commit: str, paths: list[str]) -> dict[str, TreeEntry]:
        """{path: entry} for those of `paths` that `commit`'s tree has, in one `ls-tree -z` (names exact,
        whatever characters they hold). Asked by full object name, the answer cannot change: it is
        kept on this repository object."""
        if not paths:
            return {}
        key = (commit, tuple(paths))
        if key in self.repo.entries_of:
            return dict(self.repo.entries_of[key])
        full = is_full_sha(commit)
        fact = "tree " + "\x00".join([commit, *paths])  # a commit's tree never changes: a later run reads it
        found = self._recorded_entries(fact) if full else None
        if found is None:
            out = self.repo.git(
                ["ls-tree", "-z", "--full-tree", "--end-of-options", commit, "--", *paths]
            ).text
            wanted, found = set(paths), {}
            for record in filter(None, out.split("\x00")):
                meta, entry_path = record.split("\t", 1)
                mode, kind, sha = meta.split()
                if entry_path in wanted:
                    found[entry_path] = TreeEntry(mode=mode, kind=kind, sha=sha, path=entry_path)
            if full and self.repo.facts is not None:
                self.repo.facts.put(fact, [[e.mode, e.kind, e.sha, e.path] for e in found.values()])
        if full:
            self.repo.entries_of[key] = dict(found)
        return found

    def _recorded_entries(self, fact: str) -> dict[str, TreeEntry] | None:
        """Tree entries an earlier run recorded in this cache repository, or None."""
        recorded = self.repo.facts.get(fact) if self.repo.facts is not None else None
        try:
            entries = [TreeEntry(*map(str, fields)) for fields in recorded] if recorded is not None else None
        except TypeError:  # not four fields: not what a run wrote
            return None
        return None if entries is None else {e.path: e for e in entries}

    def all_entries(self, treeish: str) -> dict[str, TreeEntry]:
        """{path: entry} of every file and gitlink of a commit's (or tree's) whole tree, one `ls-tree -r`;
        trees only are read (a blobless partial clone answers without a fetch)."""
        # No `--` after the tree: with no path after it, git 2.39 takes it for one and lists nothing.
        out = self.repo.git(["ls-tree", "-r", "-z", "--full-tree", "--end-of-options", treeish]).text
        entries = {}
        for record in filter(None, out.split("\x00")):
            meta, entry_path = record.split("\t", 1)
            mode, kind, sha = meta.split()
            entries[entry_path] = TreeEntry(mode=mode, kind=kind, sha=sha, path=entry_path)
        return entries

    def read_blob(self, commit: str, path: str) -> bytes | None:
        """The contents of the file at `path` in `commit`, or None when it is no file there."""
        entry = self.tree_entry(commit, path)
        if entry is None or entry.kind != "blob":
            return None
        return self.blob_bytes(entry.sha)
