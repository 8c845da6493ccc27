"""Objects checked against their names, for what a decision rests on.

A git object's name is the hash of its bytes in git's object format (`<type> <size>\\0<contents>`), so a
commit named by a SHA that a remote gave (or the user typed) proves its tree, and the tree its files.
git does not hash again what it reads from an object store (only fsck does), and forkctl's cache
repositories live where a CI cache may be restored from, which a pull request can write: the files a
decision rests on (a manifest named by URL and the files beside it) are read here, every commit, tree
and blob on the way hashed and compared with its name.
"""

from __future__ import annotations

import hashlib

from forkctl.errors import BadInput
from forkctl.git.repo import GitRepo


def _object_id(kind: str, data: bytes, like: str) -> str:
    digest = hashlib.sha256 if len(like) == 64 else hashlib.sha1
    return digest(f"{kind} {len(data)}\0".encode() + data).hexdigest()


def blob_id(data: bytes, like: str) -> str:
    """The name `data` has as a blob, in the hash of names like `like`."""
    return _object_id("blob", data, like)


def checked(repo: GitRepo, name: str, kind: str, url: str) -> bytes:
    """The contents of object `name`, a `kind`, whose bytes hash to its name; BadInput otherwise."""
    found = repo.objects.raw_object(name)
    if found is None or found[0] != kind or _object_id(kind, found[1], name) != name.lower():
        what = "lacks" if found is None else "holds an altered"
        raise BadInput(
            f"the cache repository of {url} ({repo.git_dir}) {what} {kind} {name[:12]}",
            hint=f"delete {repo.git_dir} (forkctl fetches it again); a cache restored from an untrusted "
            "place is not used to decide",
        )
    return found[1]


def _entries(data: bytes, like: str) -> list[tuple[str, str, str]]:
    """(mode, name, object name) of each entry of a tree object's contents."""
    size = len(like) // 2
    out, at = [], 0
    while at < len(data):
        space = data.index(b" ", at)
        nul = data.index(b"\0", space)
        out.append(
            (
                data[at:space].decode(),
                data[space + 1 : nul].decode("utf-8", "surrogateescape"),
                data[nul + 1 : nul + 1 + size].hex(),
            )
        )
        at = nul + 1 + size
    return out


def listing(repo: GitRepo, url: str, commit: str, paths: list[str]) -> dict[str, tuple[str, str]]:
    """{path: (mode, blob name)} of the files (regular files and symlinks) at `paths` in `commit` (a
    folder: every file under it), each commit and tree read on the way checked against its name; a path
    the commit lacks is left out; submodules are no files."""
    head = checked(repo, commit, "commit", url).split(b"\n", 1)[0]
    if not head.startswith(b"tree "):
        raise BadInput(f"commit {commit[:12]} of {url} has no tree", hint=f"delete {repo.git_dir}")
    root = head[5:].decode()
    out: dict[str, tuple[str, str]] = {}
    for path in paths:
        _collect(repo, url, root, [part for part in path.split("/") if part], "", out)
    return out


def _collect(
    repo: GitRepo, url: str, tree: str, parts: list[str], prefix: str, out: dict[str, tuple[str, str]]
) -> None:
    for mode, name, oid in _entries(checked(repo, tree, "tree", url), tree):
        if parts and name != parts[0]:
            continue
        path = f"{prefix}{name}"
        if mode in ("40000", "040000"):
            _collect(repo, url, oid, parts[1:], f"{path}/", out)
        elif mode in ("100644", "100755", "120000") and len(parts) <= 1:
            out[path] = (mode, oid)
