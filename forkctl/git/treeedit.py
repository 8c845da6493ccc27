"""Trees read, compared and written in this process: no git process per tree.

A tree object is read through the repository's one `cat-file --batch` (`batch.py`) and parsed here
(git's format: `<mode> <name>\\0<20-byte id>` per entry, sorted as git sorts them); two trees are compared
by descending only into the subtrees whose ids differ; a tree with some files replaced is written as
loose objects, each new subtree on the way to a changed file (git's loose format, as
`write_loose_commit` writes a commit). What the port's clean path needs: a patch whose files are, on
the head, exactly as on the commit it was built on is picked by replacing them, where a merge process
each cost as much as the whole pick (`ops/port/quick.py`).

Only SHA-1 repositories: a tree of another object format is refused by `read_tree` (its ids are not 20
bytes), and the caller merges with git instead.
"""

from __future__ import annotations

import msgspec

from forkctl.git.commits import Commits
from forkctl.git.gitdir import GitDir, Part
from forkctl.git.objects import EMPTY_TREE, Objects
from forkctl.git.runner import GitFailed
from forkctl.git.sha import TreeSha

TREE_MODE = b"40000"
GITLINK_MODE = b"160000"


class Item(msgspec.Struct, frozen=True):
    """One entry of a tree object: mode as git writes it (`100644`, `40000`, ...), raw name, hex id."""

    mode: bytes
    name: bytes
    sha: str

    @property
    def is_tree(self) -> bool:
        return self.mode == TREE_MODE


class Change(msgspec.Struct, frozen=True):
    """A file (or gitlink) that differs between two trees: its entry on each side, None where absent."""

    path: str
    old: Item | None
    new: Item | None


def parse_tree(body: bytes) -> list[Item]:
    """A tree object's entries, in its order."""
    items, position = [], 0
    while position < len(body):
        space = body.index(b" ", position)
        nul = body.index(b"\x00", space)
        items.append(Item(body[position:space], body[space + 1 : nul], body[nul + 1 : nul + 21].hex()))
        position = nul + 21
    return items


def tree_body(items: list[Item]) -> bytes:
    return b"".join(item.mode + b" " + item.name + b"\x00" + bytes.fromhex(item.sha) for item in items)


class TreeEdits(Part):
    """Trees as data: read (remembered on this repository object: a tree's id names its contents),
    compared, and written with files replaced (as loose objects, the way `commits` writes them)."""

    def __init__(self, repo: GitDir, objects: Objects, commits: Commits) -> None:
        super().__init__(repo)
        self.objects = objects
        self.commits = commits

    def read_tree(self, tree: str) -> list[Item]:
        """The entries of the tree object `tree` (a full SHA-1 id). GitFailed when it is no tree here."""
        if tree == EMPTY_TREE:
            return []
        known = self.repo.trees_read.get(tree)
        if known is None:
            found = self.objects.raw_object(tree)
            if found is None or found[0] != "tree" or len(tree) != 40:
                raise GitFailed(f"git cat-file failed: no SHA-1 tree {tree} in {self.repo.git_dir}", "")
            known = self.repo.trees_read[tree] = parse_tree(found[1])
        return known

    def commit_tree_id(self, commit: str) -> TreeSha:
        """The tree a commit records, read through the batch (no process of its own)."""
        found = self.objects.raw_object(commit)
        if found is None or found[0] != "commit" or not found[1].startswith(b"tree "):
            raise GitFailed(f"git cat-file failed: no commit {commit} in {self.repo.git_dir}", "")
        return TreeSha(found[1][5 : found[1].index(b"\n")].decode("ascii"))

    def tree_changes(self, old: str, new: str, prefix: str = "") -> list[Change]:
        """Every file and gitlink that differs from tree `old` to tree `new` (no rename pairing, as
        `git diff --no-renames` names them), reading only the subtrees whose ids differ."""
        if old == new:
            return []
        before = {item.name: item for item in self.read_tree(old)}
        after = {item.name: item for item in self.read_tree(new)}
        changes: list[Change] = []
        for name in sorted(before.keys() | after.keys()):
            one, two = before.get(name), after.get(name)
            if one == two:
                continue
            below = prefix + name.decode("utf-8", errors="surrogateescape")
            trees = [item.sha if item is not None and item.is_tree else None for item in (one, two)]
            if trees[0] or trees[1]:
                changes += self.tree_changes(trees[0] or EMPTY_TREE, trees[1] or EMPTY_TREE, below + "/")
            files = [item if item is not None and not item.is_tree else None for item in (one, two)]
            if files[0] or files[1]:
                changes.append(Change(below, files[0], files[1]))
        return changes

    def replace_files(self, tree: str, files: dict[str, Item]) -> TreeSha:
        """`tree` with the file at each path of `files` replaced by that item's mode and id: each path
        must name a file or gitlink the tree has, and each item be one, so no entry moves, appears or
        disappears (the order of the entries stays git's). The new trees are written as loose objects;
        the root's id is returned."""
        here: dict[bytes, Item] = {}
        deeper: dict[bytes, dict[str, Item]] = {}
        for path, item in files.items():
            first, slash, rest = path.partition("/")
            name = first.encode("utf-8", errors="surrogateescape")
            if slash:
                deeper.setdefault(name, {})[rest] = item
            else:
                here[name] = item
        items = []
        for item in self.read_tree(tree):
            if item.name in here and not item.is_tree and not here[item.name].is_tree:
                replacement = here.pop(item.name)
                items.append(Item(replacement.mode, item.name, replacement.sha))
            elif item.name in deeper and item.is_tree:
                items.append(Item(item.mode, item.name, self.replace_files(item.sha, deeper.pop(item.name))))
            else:
                items.append(item)
        if here or deeper:
            names = sorted(name.decode("utf-8", errors="replace") for name in [*here, *deeper])
            raise GitFailed(f"cannot replace {', '.join(names)} in tree {tree}: not a file there")
        sha = self.commits.write_loose_object(b"tree", tree_body(items))
        self.repo.trees_read[sha] = items
        return TreeSha(sha)
