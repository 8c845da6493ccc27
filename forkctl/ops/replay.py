"""apply(series, base): the fork's commits as a pure function of the base SHA and the patch bytes.

Each patch is applied to a private index loaded with the previous tree and committed with
`commit-tree`, author = committer = the patch's author and date. No checkout, no user index, and the
same inputs give the same SHAs on every machine.

Plain `git apply` only, never `--3way`: a 3-way merge reads the patch's pre-image blobs, so its answer
would depend on which objects the clone happens to hold (a full clone merges, a shallow or offline
partial one stops). A patch that does not apply as written on its own base plus the earlier patches is
stale: every caller refuses it with `STALE_FIX`, and moving it is a port's job (`forkctl port`).
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from forkctl.errors import BadInput
from forkctl.git.commits import Identity, commit_object
from forkctl.git.repo import GitRepo
from forkctl.git.sha import FULL_NAME_PATTERN, Sha, TreeSha, printed_tree
from forkctl.ops import record
from forkctl.series import Patch

if TYPE_CHECKING:
    from forkctl.git.index import Indexes
    from forkctl.git.objects import Objects


class AppliedPatch(msgspec.Struct, frozen=True):
    patch: Patch
    commit: Sha
    tree: TreeSha  # the commit's tree (for the apply record)


def stale_text(base: str, message: str) -> str:
    """What `status --repo` and `lint --repo` say of a patch that does not apply as written on its base."""
    return f"stale: does not apply as written on the base {base[:12]} plus the patches before it\n{message}"


def stale_fix(base: str) -> str:
    """How to mend a series with a stale patch on `base` (said the same way by every verb)."""
    return (
        f"the patch does not apply as written on its own base: refresh the series with "
        f"forkctl port --onto {base} (git's 3-way merge; a real conflict stops there for you to "
        "resolve), or fix the fork branch and re-export it with forkctl export"
    )


class Conflict(msgspec.Struct, frozen=True):
    """A patch that does not apply with `git apply --cached` on top of `parent`: on the series' own
    base, a stale patch."""

    index: int  # position in the series, 0-based
    patch: Patch
    parent: str  # the commit it had to apply on
    message: str  # git apply's own words: which files and hunks failed


class BuildResult(msgspec.Struct):
    base: Sha
    applied: list[AppliedPatch] = msgspec.field(default_factory=list)
    conflict: Conflict | None = None

    @property
    def head(self) -> Sha:
        return self.applied[-1].commit if self.applied else self.base

    @property
    def complete(self) -> bool:
        return self.conflict is None


def identity_of(patch: Patch) -> Identity:
    return Identity(name=patch.author_name, email=patch.author_email, date=patch.date.isoformat())


_SECTION_RE = re.compile(rb"^diff --git ", re.MULTILINE)
_INDEX_RE = re.compile(
    rf"^index ({FULL_NAME_PATTERN})\.\.({FULL_NAME_PATTERN})(?: [0-7]{{6}})?$".encode(), re.MULTILINE
)
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


class Unkept(msgspec.Struct, frozen=True):
    """A file whose `index <old>..<new>` line a patch does not keep: it started as <old> and came out
    as another blob than <new>."""

    patch: Patch
    path: str
    promised: str
    got: str


def unkept_promises(objects: Objects, steps: list[tuple[str, str, Patch]]) -> list[Unkept]:
    """The patches' `index <old>..<new>` lines say what each file must become. When a file started as
    <old>, it must end as <new>: otherwise the patch was truncated or edited after it was made.
    `steps` are (parent tree, new tree, patch); every blob of every step is looked up in one process."""
    promises = [(parent, new, patch, promised_blobs(patch.diff)) for parent, new, patch in steps]
    specs = [f"{parent}:{old}" for parent, _, _, found in promises for old, _, _, _ in found if old]
    specs += [f"{new}:{path}" for _, new, _, found in promises for _, path, _, _ in found if path]
    blobs = objects.object_ids(specs) if specs else {}
    unkept = []
    for parent, new, patch, found in promises:
        for old_path, new_path, old_blob, new_blob in found:
            before = blobs[f"{parent}:{old_path}"] if old_path else None
            if (before or ZERO) != old_blob:
                continue  # the file was not the pre-image (its context still matched): no promise
            after = blobs[f"{new}:{new_path}"] if new_path else None
            if (after or ZERO) != new_blob:
                unkept.append(Unkept(patch, new_path or old_path or "", new_blob, after or ZERO))
    return unkept


def refresh_fix(patch: Patch) -> str:
    """The command that rewrites an edited patch file from what it does (its index lines included)."""
    number = patch.path.name[:4]
    return f"forkctl refresh {number if number.isdigit() else patch.path.name}"


def unkept_text(unkept: Unkept) -> str:
    return (
        f"{unkept.path} came out as blob {unkept.got[:12]}, but the patch's index line promises "
        f"{unkept.promised[:12]}: the patch file is truncated or was edited by hand"
    )


def verify_results(objects: Objects, steps: list[tuple[str, str, Patch]]) -> None:
    """Refuse a build in which a patch does not keep its index lines (`unkept_promises`)."""
    for unkept in unkept_promises(objects, steps)[:1]:
        raise BadInput(
            f"{unkept.patch.path.name}: {unkept_text(unkept)}",
            hint=f"if the edit is meant, {refresh_fix(unkept.patch)} (pass the same --repo) rewrites the "
            "file from what it does; otherwise restore it from git (or re-export it with forkctl export)",
        )


class CommitBatch:
    """The commits of a build, made in memory and written together (one git process, not one per
    patch); an identity git must render itself is committed by commit-tree at once instead.
    (Not git.commits.Commits, which is the repository's commit-reading and -writing methods.)"""

    def __init__(self, repo: GitRepo) -> None:
        self.repo = repo
        self.pending: list[tuple[Sha, bytes]] = []

    def make(self, parent: str, tree: TreeSha, patch: Patch, message: str | None = None) -> Sha:
        """The commit of `patch` (with `message`, default the patch's own) on `parent`."""
        message = patch.message if message is None else message
        made = commit_object(tree, [parent], message, patch.author_name, patch.author_email, patch.date)
        if made is None:
            self.flush()
            return self.repo.commits.commit_tree(tree, [parent], message, identity_of(patch))
        self.pending.append(made)
        return made[0]

    def flush(self) -> None:
        self.repo.commits.write_commits(self.pending)
        self.pending = []


def build_series(
    repo: GitRepo,
    base: Sha,
    patches: list[Patch],
    start: int = 0,
    parent: Sha | None = None,
    on_patch: Callable[[str], None] | None = None,
) -> BuildResult:
    """Apply `patches[start:]` onto `parent` (default `base`); stop at the first that does not apply
    as written (plain `git apply`, no 3-way: the result is the same in every clone that has the base).

    Per patch git runs twice (apply, write-tree); the index-line checks of all patches take one more
    process and the commits one more, whatever the length of the series."""
    result = BuildResult(base=base)
    head = parent or base
    head_tree = repo.commits.commit_info(head).tree
    steps: list[tuple[str, str, Patch]] = []
    batch = CommitBatch(repo)
    with repo.indexes.private_index(head) as index:
        for position in range(start, len(patches)):
            patch = patches[position]
            ok, message = index.apply(patch.diff)
            if not ok:
                result.conflict = Conflict(index=position, patch=patch, parent=head, message=message)
                break
            tree = index.write_tree()
            steps.append((head_tree, tree, patch))
            head, head_tree = batch.make(head, tree, patch), tree
            result.applied.append(AppliedPatch(patch=patch, commit=head, tree=tree))
            if on_patch:
                on_patch(patch.subject)
    verify_results(repo.objects, steps)
    batch.flush()
    if result.complete and start == 0 and head_parent_is_base(parent, base):
        record.remember(base, [p.raw for p in patches], [(a.commit, a.tree) for a in result.applied])
    return result


def head_parent_is_base(parent: str | None, base: str) -> bool:
    """A build from the base itself (not a resumed one): its result is apply(base, patches)."""
    return parent is None or parent == base


def existing_build(repo: GitRepo, base: str, patches: list[Patch], tip: str) -> list[AppliedPatch] | None:
    """The commits base..tip when they are exactly apply(base, patches), else None: from the apply
    record when it holds (no git process), else from the full check, whose answer is then recorded."""
    recalled = record.recall(base, patches, tip) or record.recall(base, patches, tip, record.EXPORTED)
    if recalled is not None:
        return [AppliedPatch(p, commit, tree) for p, (commit, tree) in zip(patches, recalled, strict=True)]
    found = built_by_apply(repo, base, patches, tip)
    if found:  # the full check also proved that the commits format back to the files
        for kind in (record.APPLIED, record.EXPORTED):
            record.remember(base, [p.raw for p in patches], [(a.commit, a.tree) for a in found], kind)
    return found


def built_by_apply(repo: GitRepo, base: str, patches: list[Patch], tip: str) -> list[AppliedPatch] | None:
    """The commits base..tip when they are exactly apply(base, patches), else None; a few processes
    whatever the length of the series, where building it again takes two per patch.

    Each commit must format back to its patch file byte for byte (so message, author, date and the
    diff, full blob ids included, are the patch's: each tree is what applying the patch gives) and
    hash to the commit `build_series` makes (so the committer is the author, as apply makes it)."""
    if not repo.history.is_ancestor(base, tip):
        return None
    commits = repo.history.rev_list(f"{base}..{tip}", "--first-parent")
    if len(commits) != len(patches):
        return None
    applied = []
    for info, parent, patch in zip(
        repo.commits.commit_infos(commits), [base, *commits[:-1]], patches, strict=True
    ):
        made = commit_object(
            info.tree, [parent], patch.message, patch.author_name, patch.author_email, patch.date
        )
        if made is None or made[0] != info.sha:
            return None
        applied.append(AppliedPatch(patch, made[0], info.tree))  # made[0] is info.sha, checked
    if commits and repo.patches.format_patches(base, commits) != [patch.raw for patch in patches]:
        return None
    return applied


def check_series(indexes: Indexes, base: str, patches: list[Patch]) -> list[tuple[Patch, str | None]]:
    """For each patch in order: None if it applies on the base plus the earlier ones, else git's message.

    A patch that fails is skipped, so later patches are still judged (as far as they can be alone).
    """
    verdicts: list[tuple[Patch, str | None]] = []
    with indexes.private_index(base) as index:
        for patch in patches:
            ok, message = index.apply(patch.diff)
            verdicts.append((patch, None if ok else message.strip()))
    return verdicts


def base_in_clone(clone: Path, base_rev: str) -> tuple[GitRepo, str]:
    """The clone and its base commit; BadInput when the clone lacks the base."""
    repo = GitRepo(clone)
    base = repo.objects.resolve_commit(base_rev)
    if base is None:
        raise BadInput(
            f"{clone} does not have the base commit {base_rev}",
            hint="fetch upstream into that clone first (git fetch origin)",
        )
    return repo, base


def check_in_clone(clone: Path, base_rev: str, patches: list[Patch]) -> list[str | None]:
    """check_series in a clone of upstream that must have the base: per patch None or git's message."""
    repo, base = base_in_clone(clone, base_rev)
    return [message for _, message in check_series(repo.indexes, base, patches)]


def fork_head_tree(repo: GitRepo, base: str, patches: list[Patch], path: str) -> TreeSha | None:
    """The tree at `path` in apply(series, base) (e.g. the megatron/ tree a GPU run must have tested),
    or None when the fork head has no folder there (nothing, a file, a gitlink). A series stale on its
    base has no fork head."""
    full = repo.objects.resolve_commit(base)
    if full is None:
        raise BadInput(f"the base {base} is not in {repo.git_dir}", hint="fetch upstream into that clone")
    built = build_series(repo, full, patches)
    if not built.complete:
        assert built.conflict is not None
        raise BadInput(
            f"{built.conflict.patch.path.name} does not apply as written on the base {base[:12]}: "
            "the series has no fork head to compare the evidence with",
            hint=stale_fix(base),
        )
    entry = repo.objects.tree_entry(built.head, path)
    return printed_tree(entry.sha, "ls-tree") if entry is not None and entry.kind == "tree" else None
