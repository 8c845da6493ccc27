"""The apply record: the commits and trees apply(base, series) gave, kept by content (the base and every
patch file's bytes) so that a branch that already is apply(base, series) is recognised without a git
process, where the full check (`replay.built_by_apply`) walks, reads and formats the whole range.

A record is data, never trusted on its own: beyond the cache entry's own checks (`contentcache`), every
commit id is computed again here from the recorded tree, its parent, and the patch's message, author and
date (what `commit-tree` would write), from the base up; the chain must end at the branch's tip. So the
branch is proven to hold exactly these messages, identities, dates and trees in this order, and the record
vouches only for what forkctl itself established when it wrote it: that each tree is its patch applied
to the tree before (a complete build, or one that passed the full check). A record that fails any of
this is ignored and the full check decides.
"""

from __future__ import annotations

import re

import msgspec

from forkctl import contentcache
from forkctl.git.repo import commit_object
from forkctl.series import Patch

FOLDER = "applied"
_OBJECT_ID_RE = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


class _Record(msgspec.Struct, forbid_unknown_fields=True):
    commits: list[str]
    trees: list[str]


def _key(base: str, patches: list[Patch]) -> str:
    return contentcache.key_of(FOLDER, base.encode(), *(patch.raw for patch in patches))


def remember(base: str, patches: list[Patch], built: list[tuple[str, str]]) -> None:
    """Record `built` ((commit, tree) per patch) as apply(base, patches)."""
    if not patches or len(built) != len(patches):
        return
    record = _Record(commits=[commit for commit, _ in built], trees=[tree for _, tree in built])
    contentcache.write(FOLDER, _key(base, patches), msgspec.json.encode(record))


def recall(base: str, patches: list[Patch], tip: str) -> list[tuple[str, str]] | None:
    """(commit, tree) per patch when the record of apply(base, patches) holds and ends at `tip`."""
    if not patches:
        return None
    payload = contentcache.read(FOLDER, _key(base, patches))
    if payload is None:
        return None
    try:
        record = msgspec.json.decode(payload, type=_Record)
    except msgspec.MsgspecError:
        return None
    if len(record.commits) != len(patches) or len(record.trees) != len(patches) or record.commits[-1] != tip:
        return None
    parent = base
    for commit, tree, patch in zip(record.commits, record.trees, patches, strict=True):
        if not _OBJECT_ID_RE.fullmatch(tree):
            return None
        made = commit_object(tree, [parent], patch.message, patch.author_name, patch.author_email, patch.date)
        if made is None or made[0] != commit:
            return None
        parent = commit
    return list(zip(record.commits, record.trees, strict=True))
