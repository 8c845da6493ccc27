"""The end of a port as one transaction: the patch files and the manifest first (atomically, each kept
in a backup for --abort), the branch last (compare-and-swap); and its undoing.

A port killed while writing is finished by --continue or undone by --abort from the state alone.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from forkctl.files import atomic_write, remove_temporaries
from forkctl.git.repo import GitRepo
from forkctl.manifest import Manifest, plain
from forkctl.manifest.schema import DroppedEntry
from forkctl.ops import export
from forkctl.ops import state as session

if TYPE_CHECKING:
    from forkctl.git.refs import Refs


def is_finishing(state: session.State) -> bool:
    return state.port_data.finishing


# A drop this port records, as ports have always written it, under `dropped:` and in --json: these keys
# in this order (the manifest's bytes do not depend on the version that ported), the first ones always
# (null when empty, in --json), the last ones only a skip has. The drops the manifest held already keep
# its own order (DroppedEntry's).
_ALWAYS = ("subject", "file", "reason", "upstream_commit", "proof", "base", "provenance")
_WHEN_SKIPPED = ("skipped_by", "skipped_at", "reverted_by")


def drop_fields(entry: DroppedEntry) -> dict[str, object]:
    """A drop of this port in the order and shape port writes it (--json: None kept where it is)."""
    fields: dict[str, object] = {key: getattr(entry, key) for key in _ALWAYS}
    fields.update({key: value for key in _WHEN_SKIPPED if (value := getattr(entry, key)) is not None})
    return fields


def _dropped_entries(state: session.State) -> list[dict[str, object]]:
    """The manifest's `dropped:` as it was when the port started, plus this port's drops."""
    dropped = [plain(entry, drop_none=True) for entry in state.port_data.dropped_before]
    for step in state.steps:
        if step.absorbed is not None:
            dropped.append(
                {key: value for key, value in drop_fields(step.absorbed).items() if value is not None}
            )
    return dropped


def _backup(repo: GitRepo, manifest: Manifest, state: session.State, written: list[str]) -> None:
    """Keep the bytes of the manifest and of every file the port may rewrite or delete (for --abort).

    `written`: the files of the new series. One that does not exist yet is recorded as None: --abort
    deletes it, as the port created it."""
    folder = session.state_path(repo).parent / "backup"
    folder.mkdir(parents=True, exist_ok=True)
    saved: dict[str, str | None] = {}
    paths = [manifest.path, *(manifest.root / entry.file for entry in manifest.series)]
    paths += [manifest.root / file for file in written]
    for number, path in enumerate(dict.fromkeys(paths)):
        copy = folder / f"{number:04d}"
        if path.is_file():
            _keep(path, copy)
            saved[str(path)] = str(copy)
        else:
            saved[str(path)] = None
    state.port_data.backup = saved


def _keep(path: Path, copy: Path) -> None:
    """`copy` holds the bytes `path` has now. A hard link where the file system allows it: the port
    replaces these files only by rename (`atomic_write`), so the linked file keeps today's bytes, already
    on disk, without a copy and an fsync each (11 of them for a 10-patch series, ~40 ms); else a copy."""
    copy.unlink(missing_ok=True)  # a backup a killed run left
    try:
        os.link(path, copy)
    except OSError:  # another file system, or links refused: a copy, flushed to disk
        atomic_write(copy, path.read_bytes())


def _backed_up(state: session.State) -> dict[str, str | None]:
    return state.port_data.backup


def _restore_backup(state: session.State) -> None:
    """Put the manifest and series files back as they were before the port started writing them, and
    remove the files it created and the temp files a kill left behind."""
    saved = _backed_up(state)
    remove_temporaries(Path(original) for original in saved)
    for original, copy in saved.items():
        if copy is None:
            Path(original).unlink(missing_ok=True)
        elif Path(copy).is_file():
            atomic_write(Path(original), Path(copy).read_bytes())


def finish(repo: GitRepo, manifest: Manifest, state: session.State) -> tuple[list[export.ExportedPatch], str]:
    """Write the ported series and move the branch: (the exported patches, the range-diff old vs new)."""
    commits = [step.commit for step in state.steps if step.commit]
    exported = export.render(repo, manifest, commits)
    resumed = is_finishing(state)
    if not resumed:
        state.port_data.finishing = True
        state.port_data.dropped_before = list(manifest.model.dropped)
        _backup(repo, manifest, state, [patch.file for patch in exported])
        session.save(repo, state)
    else:
        remove_temporaries(Path(original) for original in _backed_up(state))  # a kill mid-write
    export.write(
        manifest,
        exported,
        export.compare(manifest, exported),
        {("upstream", "base"): state.base, ("dropped",): _dropped_entries(state)},
    )
    if resumed:
        # Killed after the manifest was rewritten, compare() no longer knows the old series: its files
        # that the new one does not keep are those backed up and not written.
        kept = {str(manifest.path), *(str(manifest.root / patch.file) for patch in exported)}
        for original in _backed_up(state):
            if original not in kept:
                Path(original).unlink(missing_ok=True)
    if repo.refs.branch_sha(state.branch) != state.head:
        session.set_branch(repo, state.branch, state.head, state.old_tip)
    old_head = state.port_data.old_head
    shown = ""
    if old_head:
        shown = repo.patches.range_diff(
            f"{state.port_data.old_base}..{old_head}", f"{state.base}..{state.head}"
        )
    session.clear(repo)
    return exported, shown


def undo(repo: Refs, state: session.State) -> None:
    """Restore the files and put the branch back where it was, if the port had moved it."""
    _restore_backup(state)
    current = repo.branch_sha(state.branch)
    if current == state.head and current != state.old_tip:
        if state.old_tip is None:
            repo.delete_ref(f"refs/heads/{state.branch}", current)
        else:
            repo.update_ref(f"refs/heads/{state.branch}", state.old_tip, current, "port --abort")
