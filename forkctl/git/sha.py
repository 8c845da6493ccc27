"""Full git object names, checked once: the one pattern the project uses for "a full SHA".

git names an object by 40 lowercase hex digits (SHA-1) or 64 (SHA-256, `--object-format=sha256`) and
prints them that way. A `Sha` is a string that was checked against that pattern: it is made only by
`parse_full_sha` / `require_full_sha` / `is_full_sha` (and by the functions that read names from git's
own output or compute a commit's name), so a signature that takes a `Sha` says that nobody has to look
again, and mypy refuses a plain `str` there (an abbreviation, a ref, a user's text): the manifest's
base once resolved, the fork head and the commits a build makes, the pin a bump writes. Pure: no git runs here, and a
command that only reads patch text (lint, status) can import it.

A `TreeSha` names a tree, not a commit: git names both alike, so only the type tells a reader (and a
type checker) that a commit passed where a tree is expected is a mistake. It is made only where a tree
comes from: git's `write-tree`, `%T` / `merge-tree` output, `forkctl.git.treehash`, and a recorded name
checked on load (`parse_tree_sha` / `require_tree_sha` / `TreeShaText` fields). The form is checked
there; whether the object exists is for git to say when it is used.
"""

from __future__ import annotations

import re
from typing import Annotated, NewType, TypeGuard

import msgspec

from forkctl.errors import BadInput, Unexpected

Sha = NewType("Sha", str)
TreeSha = NewType("TreeSha", str)

# One alternative per object format; no anchors, so that other patterns can embed it.
FULL_NAME_PATTERN = r"(?:[0-9a-f]{40}|[0-9a-f]{64})"
# A commit as a person writes it: an abbreviation of 7 to 40 digits, or a full name of either format.
COMMIT_NAME_PATTERN = r"(?:[0-9a-f]{7,40}|[0-9a-f]{64})"
FULL_OBJECT_NAME = re.compile(FULL_NAME_PATTERN)  # always with fullmatch
COMMIT_NAME = re.compile(COMMIT_NAME_PATTERN)  # always with fullmatch
# The same check for a msgspec field (msgspec searches: \A and \Z, since `$` would let a newline end it).
FULL_NAME_FIELD_PATTERN = rf"\A{FULL_NAME_PATTERN}\Z"
FullShaText = Annotated[str, msgspec.Meta(pattern=FULL_NAME_FIELD_PATTERN)]
TreeShaText = Annotated[TreeSha, msgspec.Meta(pattern=FULL_NAME_FIELD_PATTERN)]

FULL_SHA_WORDS = "a full commit SHA (40 or 64 lowercase hex digits)"
FULL_TREE_WORDS = "a full tree object name (40 or 64 lowercase hex digits)"


def parse_full_sha(text: object) -> Sha | None:
    """`text` as a `Sha` when it is a full object name exactly (no whitespace, lowercase), else None."""
    return Sha(text) if isinstance(text, str) and FULL_OBJECT_NAME.fullmatch(text) else None


def is_full_sha(text: object) -> TypeGuard[Sha]:
    """Whether `text` is a full object name; where it is, a type checker reads it as a `Sha`."""
    return parse_full_sha(text) is not None


def require_full_sha(text: object, what: str, hint: str | None = None) -> Sha:
    """`text` as a `Sha`, or BadInput naming `what` (e.g. "upstream_base of .fork-base.json")."""
    sha = parse_full_sha(text)
    if sha is None:
        raise BadInput(f"{what} {text!r} is not {FULL_SHA_WORDS}", hint=hint)
    return sha


def parse_tree_sha(text: object) -> TreeSha | None:
    """`text` as a `TreeSha` when it has the form of a full object name exactly, else None."""
    return TreeSha(text) if isinstance(text, str) and FULL_OBJECT_NAME.fullmatch(text) else None


def require_tree_sha(text: object, what: str, hint: str | None = None) -> TreeSha:
    """`text` as a `TreeSha`, or BadInput naming `what`."""
    tree = parse_tree_sha(text)
    if tree is None:
        raise BadInput(f"{what} {text!r} is not {FULL_TREE_WORDS}", hint=hint)
    return tree


def printed_tree(out: str, command: str) -> TreeSha:
    """The tree name git printed for `command` (write-tree, `%T`, merge-tree), as a `TreeSha`.

    Checked all the same: anything else there (a wrapper's chatter, a git we do not know) must stop
    here, not become a tree that a commit is made of."""
    tree = parse_tree_sha(out.strip())
    if tree is None:
        raise Unexpected(f"git {command} printed {out[:200]!r} where a tree object name belongs")
    return tree


def printed_commit(out: str, command: str) -> Sha:
    """The commit name git printed for `command` (commit-tree), as a `Sha`, checked as `printed_tree`."""
    sha = parse_full_sha(out.strip())
    if sha is None:
        raise Unexpected(f"git {command} printed {out[:200]!r} where a commit object name belongs")
    return sha


def is_commit_name(text: object) -> bool:
    """An abbreviated or full commit name as the manifest and `--onto` accept it (lowercase hex)."""
    return isinstance(text, str) and COMMIT_NAME.fullmatch(text) is not None
