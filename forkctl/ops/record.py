"""The apply record: the commits and trees apply(base, series) gave, kept by content (the base and every
patch file's bytes) so that a branch that already is apply(base, series) is recognised without a git
process, where the full check (`replay.built_by_apply`) walks, reads and formats the whole range.

Two kinds: APPLIED (a complete build, or a branch that passed the full check) and EXPORTED (the commits
format back to exactly these patch files' bytes: a branch that passed the full check, or an export
whose output equalled the files). EXPORTED is keyed by the git binary as well (`git.git_identity`),
since it vouches for git's output bytes; `export --check` trusts only that kind.

A record is data, never trusted on its own: beyond the cache entry's own checks (`contentcache`), every
commit id is computed again here from the recorded tree, its parent, and the patch's message, author and
date (what `commit-tree` would write), from the base up; the chain must end at the branch's tip. So the
branch is proven to hold exactly these messages, identities, dates and trees in this order, and the record
vouches only for what forkctl itself established when it wrote it: that each tree is its patch applied
to the tree before (a complete build, or one that passed the full check). A record that fails any of
this is ignored and the full check decides.
"""

from __future__ import annotations

import msgspec

from forkctl import contentcache
from forkctl.git.commits import commit_object
from forkctl.git.runner import git_identity
from forkctl.git.sha import Sha, TreeSha, TreeShaText
from forkctl.series import Patch

APPLIED = "applied"
EXPORTED = "exported"


class _Record(msgspec.Struct, forbid_unknown_fields=True):
    commits: list[str]
    trees: list[TreeShaText]  # a name of another form fails the decode: the record is ignored


def _key(kind: str, base: str, patch_files: list[bytes]) -> str:
    git_build = git_identity().encode() if kind == EXPORTED else b""
    return contentcache.key_of(kind, git_build, base.encode(), *patch_files)


def remember(
    base: str, patch_files: list[bytes], built: list[tuple[str, TreeSha]], kind: str = APPLIED
) -> None:
    """Record `built` ((commit, tree) per patch) as apply(base, the patch files with these bytes), of
    `kind`: the key is the files' bytes alone, so a writer that holds them need not parse them again."""
    if not patch_files or len(built) != len(patch_files):
        return
    record = _Record(commits=[commit for commit, _ in built], trees=[tree for _, tree in built])
    contentcache.write(kind, _key(kind, base, patch_files), msgspec.json.encode(record))


def recall(
    base: str, patches: list[Patch], tip: str, kind: str = APPLIED
) -> list[tuple[Sha, TreeSha]] | None:
    """(commit, tree) per patch when the record of `kind` of apply(base, patches) holds and ends at `tip`."""
    if not patches:
        return None
    payload = contentcache.read(kind, _key(kind, base, [patch.raw for patch in patches]))
    if payload is None:
        return None
    try:
        record = msgspec.json.decode(payload, type=_Record)
    except msgspec.MsgspecError:
        return None
    if len(record.commits) != len(patches) or len(record.trees) != len(patches) or record.commits[-1] != tip:
        return None
    parent, recalled = base, []
    for commit, tree, patch in zip(record.commits, record.trees, patches, strict=True):
        made = commit_object(tree, [parent], patch.message, patch.author_name, patch.author_email, patch.date)
        if made is None or made[0] != commit:
            return None
        parent = commit
        recalled.append((made[0], tree))  # the commit, as a `Sha` since it was just computed
    return recalled
