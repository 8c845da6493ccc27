"""A patch file edited by hand made consistent again, as `quilt refresh` does; and the check that finds it.

A patch's `index <old>..<new>` lines name the blobs its files start and end as. An edit of an added
line leaves them as they were: the patch still applies, but what it makes is no longer what it says,
and `apply` refuses it. `unkept_in_clone` finds such files on the base (the check of `lint --repo`);
`refresh` rebuilds the series on the base from the patches' diffs, holding no patch to its index lines,
and writes the files again as `export` writes them, so each says what it does. The diff itself must
still apply as written on the base (a stale patch is a port's business).
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from forkctl.errors import BadInput
from forkctl.git.repo import GitRepo
from forkctl.manifest import Manifest
from forkctl.ops import export, replay
from forkctl.series import Patch

_DIFF_START = b"\ndiff --git "
_SIGNATURE = b"\n-- \n"


def kept_header(original: bytes, rendered: bytes) -> bytes:
    """`rendered`'s diff under `original`'s own header and after its own signature, byte for byte: the
    mail header, the message in whatever encoding it was written and a note after `---` are the
    patch file's, never re-rendered (a refresh changes what the diff says, nothing else)."""
    at = original.find(_DIFF_START)
    start = rendered.find(_DIFF_START)
    if at < 0 or start < 0:
        return rendered
    diff = rendered[start + 1 :]
    tail = original.rfind(_SIGNATURE, at)
    if tail >= 0 and rendered.rfind(_SIGNATURE, start) < 0:
        diff += original[tail + 1 :]
    return original[: at + 1] + diff


class Refreshed(msgspec.Struct, frozen=True):
    exported: list[export.ExportedPatch]
    written: list[str]  # files rewritten (as the manifest names them)
    left: list[str]  # files that would change too but were not named


def unkept_in_clone(clone: Path, base_rev: str, patches: list[Patch]) -> list[replay.Unkept]:
    """Each file of a patch that applies on the base (plus the earlier patches) but does not come out
    as its index line promises. A patch that does not apply is skipped (it is stale: another check)."""
    repo, base = replay.base_in_clone(clone, base_rev)
    steps: list[tuple[str, str, Patch]] = []
    tree = repo.commits.commit_info(base).tree
    with repo.indexes.private_index(base) as index:
        for patch in patches:
            ok, _ = index.apply(patch.diff)
            if ok:
                new = index.write_tree()
                steps.append((tree, new, patch))
                tree = new
    return replay.unkept_promises(repo.objects, steps)


def rebuild(repo: GitRepo, base: str, patches: list[Patch]) -> list[str]:
    """The series' commits on `base` from the diffs alone (messages, authors and dates the patches')."""
    batch = replay.CommitBatch(repo)
    made: list[str] = []
    head = base
    with repo.indexes.private_index(base) as index:
        for patch in patches:
            ok, message = index.apply(patch.diff)
            if not ok:
                raise BadInput(
                    f"{patch.path.name} does not apply as written on the base {base[:12]} plus the "
                    f"patches before it, so it cannot be refreshed\n{message.strip()}",
                    hint=replay.stale_fix(base),
                )
            head = batch.make(head, index.write_tree(), patch)
            made.append(head)
    batch.flush()
    return made


def refresh(
    repo: GitRepo, manifest: Manifest, base: str, patches: list[Patch], only: list[str] | None = None
) -> Refreshed:
    """Rewrite the series files (`only`: these, as the manifest names them) as export renders the
    rebuilt series; the manifest is left alone (file names and provenance do not change)."""
    rendered = export.render(repo, manifest, rebuild(repo, base, patches))
    exported = [
        msgspec.structs.replace(made, content=kept_header(patch.raw, made.content))
        for patch, made in zip(patches, rendered, strict=True)
    ]
    moved = [
        (entry.file, patch.file)
        for entry, patch in zip(manifest.series, exported, strict=True)
        if entry.file != patch.file
    ]
    if moved:
        raise BadInput(
            f"refresh would rename {moved[0][0]} to {moved[0][1]}: its subject no longer matches its name",
            hint="run forkctl export (from a branch made with forkctl edit), which renames and relists files",
        )
    difference = export.compare(manifest, exported)
    written = [file for file in difference.changed if only is None or file in only]
    left = [file for file in difference.changed if file not in written]
    export.write(manifest, exported, export.Difference(changed=written, stale=[], manifest_differs=False))
    return Refreshed(exported=exported, written=written, left=left)
