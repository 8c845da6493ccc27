"""The git tree id of a plain folder, computed as `git add -A && git write-tree` would, without git.

`forkctl validate` names the package it tested by this id, so the evidence can be compared with
`git rev-parse <fork head>:megatron` on any clone. It runs on GPU hosts that may lack git, and hashing
a few thousand files in-process costs less than a scratch repository; the rules are git's own object
format: a blob is `blob <size>\\0<bytes>`, a tree lists `<mode> <name>\\0<20-byte id>` entries sorted by
name, a folder's name compared as if it ended in `/`. Empty folders are not recorded (git tracks files).
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable
from pathlib import Path

from forkctl.git.sha import TreeSha

# What validate's own runs leave in a package folder; never part of the tested source.
IGNORED_NAMES = frozenset({"__pycache__", ".pytest_cache"})


def _object_id(kind: bytes, payload: bytes) -> bytes:
    # hashlib here, not forkctl.digests: this runs once per validate, never at a command's start-up.
    return hashlib.sha1(kind + b" " + str(len(payload)).encode() + b"\0" + payload).digest()


def _entry(folder: Path, name: str, keep: Callable[[Path], bool]) -> tuple[bytes, bytes, bytes] | None:
    """(sort key, mode, id) of one folder entry, or None when it records nothing."""
    path = folder / name
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode):
        return name.encode(), b"120000", _object_id(b"blob", os.fsencode(os.readlink(path)))
    if stat.S_ISDIR(info.st_mode):
        tree = _tree(path, keep)
        return None if tree is None else ((name + "/").encode(), b"40000", tree)
    if not stat.S_ISREG(info.st_mode) or not keep(path):
        return None
    mode = b"100755" if info.st_mode & stat.S_IXUSR else b"100644"
    return name.encode(), mode, _object_id(b"blob", path.read_bytes())


def _tree(folder: Path, keep: Callable[[Path], bool]) -> bytes | None:
    entries = []
    for name in os.listdir(folder):
        if name in IGNORED_NAMES or name.endswith(".pyc"):
            continue
        entry = _entry(folder, name, keep)
        if entry is not None:
            entries.append(entry)
    if not entries:
        return None
    entries.sort(key=lambda entry: entry[0])
    payload = b"".join(mode + b" " + key.rstrip(b"/") + b"\0" + oid for key, mode, oid in entries)
    return _object_id(b"tree", payload)


def folder_tree_id(folder: Path, keep: Callable[[Path], bool] = lambda _path: True) -> TreeSha:
    """The tree id git would give `folder`'s files (those `keep` accepts); the empty tree if none."""
    tree = _tree(folder, keep)
    # Computed here, as git would: the one place a TreeSha is made without git or a check of its form.
    return TreeSha(tree.hex() if tree is not None else _object_id(b"tree", b"").hex())


def file_blob_id(path: Path) -> str:
    """The blob id git would give the file (or the symlink's target text) at `path`."""
    if path.is_symlink():
        return _object_id(b"blob", os.fsencode(os.readlink(path))).hex()
    return _object_id(b"blob", path.read_bytes()).hex()
