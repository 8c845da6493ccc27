"""Export a branch as the series files: byte-stable, each patch's message as the commit has it.

The round trip export -> apply -> export must change no byte. apply makes commits whose message is the
patch file's message; export writes a commit's message as it is, so every `(cherry picked from commit
<sha>)` line a maintainer's `git cherry-pick -x` wrote stays, in order: one for a pick, several for a
squash of picks (each part's origin) or a pick of a pick. Ports keep them too. export adds none: an own
commit names no commit, because the one it was exported from is a commit of this clone alone (nobody
else can fetch it), and the fork commit a patch becomes on a base is apply(base, series), a pure
function of the files, so naming it would only grow every file by a line per port. The manifest's
`series:` entry lists what the lines name (`provenance:`, one SHA or a list; none for an own patch), and
export's output names the commit each file was exported from.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from forkctl import manifest as manifest_mod
from forkctl.errors import BadInput
from forkctl.files import atomic_write
from forkctl.git.repo import GitRepo
from forkctl.git.sha import TreeSha
from forkctl.manifest import Manifest
from forkctl.manifest.loader import MAX_SERIES_ENTRIES
from forkctl.ops import record
from forkctl.series import PROVENANCE_RE, Patch, listed_provenance, parse_patches

if TYPE_CHECKING:
    from forkctl.git.objects import Objects

SLUG_MAX = 52  # like git format-patch: names stay short enough for every file system and terminal


class ExportedPatch(msgspec.Struct, frozen=True):
    commit: str
    file: str  # relative to the manifest's folder
    content: bytes
    provenance: list[str]  # the commits its provenance lines name, oldest first (none: an own patch)
    tree: TreeSha  # the commit's tree (for the export record)


def slug(subject: str) -> str:
    text = re.sub(r"[^a-z0-9]+", "-", subject.lower()).strip("-")
    return text[:SLUG_MAX].rstrip("-") or "patch"


def branch_commits(repo: GitRepo, base: str, branch: str) -> list[str]:
    tip = repo.objects.resolve_commit(branch)
    if tip is None:
        raise BadInput(
            f"no branch {branch!r} in {repo.git_dir}",
            hint="build it with forkctl apply, or name another with --branch NAME or --repo PATH",
        )
    if not repo.history.is_ancestor(base, tip):
        raise BadInput(
            f"{branch} does not contain the manifest's base {base[:12]}",
            hint="the branch was built on another base: port it (forkctl port --onto) or fix the manifest",
        )
    merges = repo.history.rev_list(f"{base}..{tip}", "--merges")
    if merges:
        raise BadInput(
            f"{branch} has merge commits after the base ({merges[0][:12]}): a series must be linear",
            hint="rebase the branch onto the base first",
        )
    commits = repo.history.rev_list(f"{base}..{tip}")
    if len(commits) > MAX_SERIES_ENTRIES:
        raise BadInput(
            f"{branch} has {len(commits):,} commits after the base: a series holds at most "
            f"{MAX_SERIES_ENTRIES:,} patches (a manifest of more is refused as too large)",
            hint="squash commits on the branch, or split the series",
        )
    return commits


def _namer(manifest: Manifest) -> Callable[[int, str], str]:
    """The file (relative to the manifest's folder) of the patch at `number` (1-based) with `subject`."""
    series_dir = manifest.series_dir().relative_to(manifest.root)
    # A file keeps the name it has when only letter case tells it from ours (e.g. a file named by
    # `git format-patch`, which keeps capitals): renaming it would churn the series for nothing.
    kept_names = {Path(entry.file).name.lower(): Path(entry.file).name for entry in manifest.series}

    def name(number: int, subject: str) -> str:
        plain = f"{number:04d}-{slug(subject)}.patch"
        return str(series_dir / kept_names.get(plain, plain))

    return name


def series_on_disk(manifest: Manifest) -> list[Patch] | None:
    """The manifest's patch files as they are, read once for `recorded` and `compare`; None when one
    is not a patch file (then `render` and the byte comparison decide)."""
    try:
        return parse_patches(manifest.patch_paths())
    except BadInput:
        return None


def bytes_by_file(manifest: Manifest, patches: list[Patch] | None) -> dict[str, bytes]:
    """{series file (as the manifest names it): its bytes} for `compare`, from `series_on_disk`."""
    return {entry.file: patch.raw for entry, patch in zip(manifest.series, patches or [], strict=False)}


def recorded(
    objects: Objects, manifest: Manifest, base: str, branch: str, patches: list[Patch] | None
) -> list[ExportedPatch] | None:
    """What `render` gives for base..branch, from the export record (`ops.record`): when it holds for
    the files as they are (`patches`, from `series_on_disk`) and ends at the branch's tip, each commit
    formats back to its file byte for byte, so the file is its own rendering; None when it does not
    hold (then `render` decides)."""
    if patches is None:
        return None
    tip = objects.resolve_commit(branch)
    recalled = record.recall(base, patches, tip, record.EXPORTED) if tip else None
    if recalled is None:
        return None
    name = _namer(manifest)
    exported = []
    for number, (patch, (commit, tree)) in enumerate(zip(patches, recalled, strict=True), start=1):
        subject = patch.message.split("\n", 1)[0]
        exported.append(ExportedPatch(commit, name(number, subject), patch.raw, patch.provenance, tree))
    return exported


def remember(base: str, exported: list[ExportedPatch]) -> None:
    """Record a rendering that the files now hold byte for byte, for the next `recorded`. The caller
    knows they do: `compare` found no difference, or `write` has just written the ones that differed."""
    if not exported:
        return
    built = [(patch.commit, patch.tree) for patch in exported]
    record.remember(base, [patch.content for patch in exported], built, record.EXPORTED)


def render(repo: GitRepo, manifest: Manifest, commits: list[str]) -> list[ExportedPatch]:
    name_of = _namer(manifest)
    if not commits:
        return []
    # One process for every commit's metadata (and the first one's parent), one for every mail.
    infos = repo.commits.commit_infos(commits)
    first_parent = infos[0].parents[0] if infos[0].parents else None
    chain = all(info.parents == [parent] for info, parent in zip(infos[1:], commits, strict=False))
    if chain:  # each commit's parent is the one before it: its tree is already at hand
        parent_trees = [repo.commits.commit_info(first_parent).tree if first_parent else None]
        parent_trees += [info.tree for info in infos[:-1]]
    else:
        parent_trees = [repo.commits.commit_info(i.parents[0]).tree if i.parents else None for i in infos]
    mails = repo.patches.format_patches(first_parent, commits) if chain and first_parent else None
    exported = []
    for number, (info, parent_tree) in enumerate(zip(infos, parent_trees, strict=True), start=1):
        if parent_tree == info.tree:
            raise BadInput(
                f"commit {info.sha[:12]} ({info.subject!r}) changes nothing: export writes no empty patch",
                hint="drop the commit from the branch (or, mid-port, use forkctl port --skip)",
            )
        content = mails[number - 1] if mails is not None else repo.patches.format_patch(info.sha)
        exported.append(
            ExportedPatch(
                commit=info.sha,
                file=name_of(number, info.subject),
                content=content,
                provenance=PROVENANCE_RE.findall(info.message),
                tree=info.tree,
            )
        )
    return exported


class Difference(msgspec.Struct, frozen=True):
    changed: list[str]  # files whose bytes differ (or are missing)
    stale: list[str]  # files of the old series that the new one no longer has
    manifest_differs: bool

    @property
    def dirty(self) -> bool:
        """Would export write anything?"""
        return bool(self.changed or self.stale or self.manifest_differs)


def compare(
    manifest: Manifest, exported: list[ExportedPatch], read: Mapping[str, bytes] | None = None
) -> Difference:
    """What writing `exported` would change. `read`: series files this run has already read ({file as
    the manifest names it: bytes}, `bytes_by_file`), compared without reading them again."""
    read = read or {}

    def differs(patch: ExportedPatch) -> bool:
        if patch.file in read:
            return read[patch.file] != patch.content
        target = manifest.root / patch.file
        return not target.is_file() or target.read_bytes() != patch.content

    changed = [patch.file for patch in exported if differs(patch)]
    new_files = {patch.file for patch in exported}
    stale = [entry.file for entry in manifest.series if entry.file not in new_files]
    wanted = [(patch.file, patch.provenance) for patch in exported]
    current = [(entry.file, listed_provenance(entry)) for entry in manifest.series]
    return Difference(changed=changed, stale=stale, manifest_differs=wanted != current)


def series_entry(patch: ExportedPatch) -> dict[str, Any]:
    """The patch's `series:` entry: one provenance SHA written plainly (as manifests always had it), a
    list for several, none for an own patch."""
    entry: dict[str, Any] = {"file": patch.file}
    if patch.provenance:
        entry["provenance"] = patch.provenance[0] if len(patch.provenance) == 1 else patch.provenance
    return entry


def write(
    manifest: Manifest,
    exported: list[ExportedPatch],
    difference: Difference,
    manifest_updates: dict[tuple[str, ...], Any] | None = None,
) -> None:
    """Write changed files, rewrite `series:` (with `manifest_updates`, in the same write), then delete
    the files of the old series that are gone.

    In that order the manifest never lists a file that is missing, whenever a kill comes (a manifest
    that does is refused by every verb, --continue and --abort included). Files under patches/ that the
    old series did not list are never overwritten or deleted.
    """
    listed = {entry.file for entry in manifest.series}
    for patch in exported:
        target = manifest.root / patch.file
        if patch.file in difference.changed and target.exists() and patch.file not in listed:
            raise BadInput(
                f"{patch.file} exists but is not part of the series: export will not overwrite it",
                hint="move or delete that file, or list it in manifest.yaml",
            )
    for patch in exported:
        if patch.file in difference.changed:
            target = manifest.root / patch.file
            atomic_write(target, patch.content)
    updates = dict(manifest_updates or {})
    if difference.manifest_differs:
        updates[("series",)] = [series_entry(patch) for patch in exported]
    if updates:
        manifest_mod.rewrite(manifest.path, updates)
    for file in difference.stale:
        Path(manifest.root / file).unlink(missing_ok=True)
