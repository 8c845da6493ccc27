"""Apply the series to a plain directory tree (e.g. an installed `megatron/` package), all or nothing.

A tree has no history, so "which patches does it carry?" is answered by git itself: a patch is carried
when its reverse applies, missing when it applies forward. The whole sequence is first rehearsed on a
scratch copy of only the files the series touches, so a failure changes no file of the real tree; the
real tree is changed only after the rehearsal succeeded.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import tempfile
from pathlib import Path

import msgspec

from forkctl.compat import StrEnum
from forkctl.errors import BadInput
from forkctl.files import atomic_write, remove_temporaries
from forkctl.git.worktree import PlainTree
from forkctl.series import Patch

DEFAULT_INCLUDE = "**"  # every path; the manifest's fork.tree_include narrows it


class TreeState(StrEnum):
    APPLIED = "applied"  # the tree carries every patch (each reverse-applies in sequence)
    UNAPPLIED = "unapplied"  # the tree carries none (the sequence applies forward)
    PARTIAL = "partial"  # neither: some patches are in, some are not, or the files were edited


class PatchStatus(StrEnum):
    APPLIED = "applied"  # its reverse applies on the tree as it is
    NOT_APPLIED = "not-applied"  # it applies forward on the tree as it is
    CONFLICT = "conflict"  # neither: the files differ from what the patch expects either way
    NO_PATHS = "no-matching-paths"  # no path of the diff matches --include: trivially applied


class FolderPatchStatus(msgspec.Struct, frozen=True):
    patch: Patch
    paths: list[str]  # the diff's paths that match the include glob
    status: PatchStatus
    message: str  # git apply's words when the status is CONFLICT


class TreePlan(msgspec.Struct, frozen=True):
    tree: Path
    include: str
    state: TreeState
    verdicts: list[FolderPatchStatus]


def included_paths(patch: Patch, include: str) -> list[str]:
    # git apply --include matches with wildmatch and no WM_PATHNAME flag: `*` crosses `/`, as in fnmatch.
    return [path for path in patch.paths if fnmatch.fnmatchcase(path, include)]


def _scratch_copy(tree: Path, paths: set[str], scratch: Path) -> None:
    """Copy the files at `paths` (those that exist) from `tree` into `scratch`, keeping relative paths."""
    for rel in paths:
        source = tree / rel
        if not source.exists() and not source.is_symlink():
            continue
        if source.is_dir() and not source.is_symlink():
            raise BadInput(
                f"{rel} is a folder in {tree}, but the series patches it as a file",
                hint="this is not the tree the series was made for: check the folder you passed",
            )
        target = scratch / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target, follow_symlinks=False)


def _rehearse(tree: Path, patches: list[Patch], include: str, reverse: bool) -> bool:
    """Does the whole sequence apply (or, reverse, un-apply in reverse order) to a copy of the tree?"""
    touched = {path for patch in patches for path in included_paths(patch, include)}
    with tempfile.TemporaryDirectory(prefix="forkctl-tree-") as holder:
        scratch = Path(holder) / "tree"
        scratch.mkdir()
        _scratch_copy(tree, touched, scratch)
        ordered = list(reversed(patches)) if reverse else patches
        for patch in ordered:
            ok, _ = PlainTree(scratch).apply_check(patch.diff, include, reverse=reverse)
            if not ok:
                return False
            PlainTree(scratch).apply(patch.diff, include, reverse=reverse)
    return True


def _verdict(tree: Path, patch: Patch, include: str) -> FolderPatchStatus:
    paths = included_paths(patch, include)
    if not paths:
        return FolderPatchStatus(patch, paths, PatchStatus.NO_PATHS, "")
    if PlainTree(tree).apply_check(patch.diff, include, reverse=True)[0]:
        return FolderPatchStatus(patch, paths, PatchStatus.APPLIED, "")
    ok, message = PlainTree(tree).apply_check(patch.diff, include)
    if ok:
        return FolderPatchStatus(patch, paths, PatchStatus.NOT_APPLIED, "")
    return FolderPatchStatus(patch, paths, PatchStatus.CONFLICT, message.strip())


def plan(tree: Path, patches: list[Patch], include: str = DEFAULT_INCLUDE, reverse: bool = False) -> TreePlan:
    """Judge the tree without changing it: does it carry all, none, or part of the series?

    When both readings are possible (a series that git cannot tell apart), the one that needs no
    change wins: "applied" when applying, "unapplied" when taking the series out.
    """
    relevant = [patch for patch in patches if included_paths(patch, include)]
    verdicts = [_verdict(tree, patch, include) for patch in patches]
    checks = [(TreeState.APPLIED, True), (TreeState.UNAPPLIED, False)]
    if reverse:
        checks.reverse()
    state = TreeState.PARTIAL
    for candidate, reverse_check in checks:
        if _rehearse(tree, relevant, include, reverse=reverse_check):
            state = candidate
            break
    return TreePlan(tree=tree, include=include, state=state, verdicts=verdicts)


def holds_any(tree: Path, patches: list[Patch], include: str = DEFAULT_INCLUDE) -> bool:
    """Does `tree` hold any file the series patches? A folder that holds none (empty, or one level
    too deep or too high) is not a tree that "carries part of the series": there is nothing to patch."""
    return any(
        (tree / path).exists() or (tree / path).is_symlink()
        for patch in patches
        for path in included_paths(patch, include)
    )


JOURNAL = ".forkctl-tree-journal.json"


def _inside(tree: Path, rel: str) -> Path:
    """`tree/rel`, refused when it (or a folder on the way) is a link that leads out of `tree`."""
    target = tree / rel
    root = tree.resolve()
    probe = target if target.exists() or target.is_symlink() else target.parent
    while not probe.exists() and probe != tree:
        probe = probe.parent
    if not probe.resolve().is_relative_to(root):
        raise BadInput(
            f"{rel} leads out of {tree} through a symbolic link: apply --tree never writes outside DIR",
            hint="replace the link with a real folder or file, or patch the tree it points to",
        )
    return target


def execute(tree_plan: TreePlan, reverse: bool = False) -> list[Patch]:
    """Change the real tree after a successful rehearsal; returns the patches applied (or taken out).

    The whole result is built in a scratch copy first; then a journal (in DIR) lists every file to
    replace or delete, each new file is staged beside its target, and the swaps run. A kill before the
    journal is complete leaves the old tree (plus staged files the next run removes); a kill after it
    is finished by the next run (`recover`): the old tree or the new one, never a mix that stays.
    """
    wanted = TreeState.APPLIED if reverse else TreeState.UNAPPLIED
    if tree_plan.state != wanted:
        return []
    tree = tree_plan.tree
    relevant = [v.patch for v in tree_plan.verdicts if v.status != PatchStatus.NO_PATHS]
    ordered = list(reversed(relevant)) if reverse else relevant
    touched = sorted({p for patch in ordered for p in included_paths(patch, tree_plan.include)})
    for rel in touched:
        _inside(tree, rel)
    with tempfile.TemporaryDirectory(prefix="forkctl-tree-") as holder:
        scratch = Path(holder) / "tree"
        scratch.mkdir()
        _scratch_copy(tree, set(touched), scratch)
        for patch in ordered:
            PlainTree(scratch).apply(patch.diff, tree_plan.include, reverse=reverse)
        swaps: list[dict[str, str | None]] = []
        for rel in touched:
            result = scratch / rel
            if result.is_file():
                staged = tree / rel
                staged = staged.with_name(f".{staged.name}.forkctl-new")
                staged.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(result, staged)
                swaps.append({"path": rel, "staged": str(staged.relative_to(tree))})
            elif (tree / rel).exists():
                swaps.append({"path": rel, "staged": None})  # the series deletes it
    atomic_write(tree / JOURNAL, json.dumps({"swaps": swaps}).encode())
    recover(tree)
    return ordered


class Recovered(msgspec.Struct, frozen=True):
    """What `recover` found of an interrupted `execute`: its journaled swaps finished, or the files it
    staged (and its journal's temp file) removed."""

    finished: bool = False
    removed: int = 0


def recover(tree: Path) -> Recovered:
    """Finish the swaps an interrupted `execute` journaled, or remove what one staged and never
    journaled."""
    journal = tree / JOURNAL
    removed = remove_temporaries([journal])  # a kill while the journal itself was being written
    if not journal.is_file():
        for stray in tree.rglob(".*.forkctl-new"):  # staged before a kill, never journaled
            stray.unlink(missing_ok=True)
            removed += 1
        return Recovered(removed=removed)
    swaps = json.loads(journal.read_text())["swaps"]
    for swap in swaps:
        target = tree / swap["path"]
        if swap["staged"] is None:
            target.unlink(missing_ok=True)
        elif (tree / swap["staged"]).exists():
            os.replace(tree / swap["staged"], target)
    journal.unlink()
    return Recovered(finished=True)
