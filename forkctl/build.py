"""apply(series, base): the fork's commits as a pure function of the base SHA and the patch bytes.

Each patch is applied to a private index loaded with the previous tree and committed with
`commit-tree`, author = committer = the patch's author and date. No checkout, no user index, and the
same inputs give the same SHAs on every machine.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from forkctl.errors import BadInput
from forkctl.git import GitRepo, Identity
from forkctl.series import Patch


@dataclass(frozen=True)
class AppliedPatch:
    patch: Patch
    commit: str


@dataclass(frozen=True)
class Conflict:
    """A patch that does not apply with `git apply --cached` on top of `parent`."""

    index: int  # position in the series, 0-based
    patch: Patch
    parent: str  # the commit it had to apply on
    message: str  # git apply's own words: which files and hunks failed


@dataclass
class BuildResult:
    base: str
    applied: list[AppliedPatch] = field(default_factory=list)
    conflict: Conflict | None = None

    @property
    def head(self) -> str:
        return self.applied[-1].commit if self.applied else self.base

    @property
    def complete(self) -> bool:
        return self.conflict is None


def identity_of(patch: Patch) -> Identity:
    return Identity(name=patch.author_name, email=patch.author_email, date=patch.date.isoformat())


_SECTION_RE = re.compile(rb"^diff --git ", re.MULTILINE)
_INDEX_RE = re.compile(rb"^index ([0-9a-f]{40})\.\.([0-9a-f]{40})(?: [0-7]{6})?$", re.MULTILINE)
_OLD_RE = re.compile(rb"^--- (?:a/(.+)|/dev/null)$", re.MULTILINE)
_NEW_RE = re.compile(rb"^\+\+\+ (?:b/(.+)|/dev/null)$", re.MULTILINE)
ZERO = "0" * 40


def _path(raw: bytes | None) -> str | None:
    if raw is None:
        return None
    text = raw.decode("utf-8", errors="surrogateescape").rstrip("\t")
    if text.startswith('"') and text.endswith('"'):  # git's C-style quoting of unusual names
        text = codecs.escape_decode(text[1:-1].encode("latin-1", errors="backslashreplace"))[0].decode(
            "utf-8"
        )
    return text


def promised_blobs(diff: bytes) -> list[tuple[str | None, str | None, str, str]]:
    """(old path, new path, old blob, new blob) for every text file section with a full `index` line."""
    sections = _SECTION_RE.split(diff)[1:]
    promised = []
    for section in sections:
        index, old, new = _INDEX_RE.search(section), _OLD_RE.search(section), _NEW_RE.search(section)
        if index is None or b"GIT binary patch" in section or b"Binary files " in section:
            continue  # mode-only or binary: nothing to hold the result to
        blobs = (index.group(1).decode(), index.group(2).decode())
        if old is not None and new is not None:
            promised.append((_path(old.group(1)), _path(new.group(1)), *blobs))
            continue
        # An index line but no hunks: a section cut short (a truncated patch), named by its header.
        name = _header_path(section.split(b"\n", 1)[0])
        if name is not None:
            old_path = None if b"\nnew file mode" in section else name
            new_path = None if b"\ndeleted file mode" in section else name
            promised.append((old_path, new_path, *blobs))
    return promised


def _header_path(header: bytes) -> str | None:
    """P from `a/P b/P` (the same path twice, as git writes a section that renames nothing)."""
    size = (len(header) - 5) // 2
    if (
        header.startswith(b"a/")
        and header[size + 2 : size + 5] == b" b/"
        and header[2 : size + 2] == header[size + 5 :]
    ):
        return _path(header[2 : size + 2])
    return None


def verify_result(repo: GitRepo, parent_tree: str, new_tree: str, patch: Patch) -> None:
    """The patch's `index <old>..<new>` lines say what each file must become. When a file started as
    <old>, it must end as <new>: otherwise the patch was truncated or edited after it was made."""
    promises = promised_blobs(patch.diff)
    # Two ls-tree calls per patch, whatever the number of files (apply's hot path).
    befores = repo.tree_entries(parent_tree, [old for old, _, _, _ in promises if old])
    afters = repo.tree_entries(new_tree, [new for _, new, _, _ in promises if new])
    for old_path, new_path, old_blob, new_blob in promises:
        before = befores.get(old_path) if old_path else None
        started_as_promised = (before.sha if before else ZERO) == old_blob
        if not started_as_promised:
            continue  # applied on other content (3-way): the promise does not hold there
        after = afters.get(new_path) if new_path else None
        if (after.sha if after else ZERO) != new_blob:
            raise BadInput(
                f"{patch.path.name}: {new_path or old_path} came out as blob "
                f"{(after.sha if after else ZERO)[:12]}, but the patch's index line promises {new_blob[:12]}: "
                "the patch file is truncated or was edited by hand",
                hint="restore the patch file from git (or re-export it with forkctl export)",
            )


def commit_patch(repo: GitRepo, parent: str, tree: str, patch: Patch) -> str:
    return repo.commit_tree(tree, [parent], patch.message, identity_of(patch))


def build_series(
    repo: GitRepo,
    base: str,
    patches: list[Patch],
    start: int = 0,
    parent: str | None = None,
    on_patch: Callable[[str], None] | None = None,
) -> BuildResult:
    """Apply `patches[start:]` onto `parent` (default `base`); stop at the first that does not apply."""
    result = BuildResult(base=base)
    head = parent or base
    with repo.private_index(head) as index:
        for position in range(start, len(patches)):
            patch = patches[position]
            ok, message = index.apply(patch.diff)
            if not ok:
                ok, message = index.apply_3way(patch.diff, repo.commit_info(head).tree)
            if not ok:
                result.conflict = Conflict(index=position, patch=patch, parent=head, message=message)
                return result
            tree = index.write_tree()
            verify_result(repo, repo.commit_info(head).tree, tree, patch)
            head = commit_patch(repo, head, tree, patch)
            result.applied.append(AppliedPatch(patch=patch, commit=head))
            if on_patch:
                on_patch(patch.subject)
    return result


def check_series(repo: GitRepo, base: str, patches: list[Patch]) -> list[tuple[Patch, str | None]]:
    """For each patch in order: None if it applies on the base plus the earlier ones, else git's message.

    A patch that fails is skipped, so later patches are still judged (as far as they can be alone).
    """
    verdicts: list[tuple[Patch, str | None]] = []
    with repo.private_index(base) as index:
        for patch in patches:
            ok, message = index.apply(patch.diff)
            verdicts.append((patch, None if ok else message.strip()))
    return verdicts
