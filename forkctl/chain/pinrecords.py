"""The other records of a pin: files of a consumer's tree that name the commit its gitlink pins
(Megatron-Bridge's `.main.commit`), read and written in the format the manifest names
(`consumers[].pin_files`).

A fresh recursive clone builds the gitlink's commit; whatever reads such a file (the consumer's own CI
test that requires the two to agree, a script that checks out what the file names) gets the file's.
So check-pins requires every record to agree with its gitlink, and a bump writes them in the same
commit as the gitlink. Reading accepts what the consumer's readers accept (the SHA with surrounding
whitespace, e.g. no final newline) and nothing else: an abbreviated or upper-case SHA is malformed,
because a reader that compares it with the gitlink's full SHA says they differ. Writing is the
canonical form only, so a bump commit stays a pure function of its inputs.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable

import msgspec

from forkctl.chain.model import ChainFinding, LinkResult, PinRecord, Status
from forkctl.errors import BadInput
from forkctl.git.objects import Objects, TreeEntry
from forkctl.git.sha import FULL_SHA_WORDS, parse_full_sha
from forkctl.manifest import Consumer
from forkctl.manifest.schema import PinFile

REGULAR_FILE_MODES = ("100644", "100755")
CHECK = "pin-file"


class Reading(msgspec.Struct, frozen=True):
    """What a record says: the commit it names, or why it names none."""

    sha: str | None
    problem: str = ""


def _render_sha_line(sha: str) -> bytes:
    return f"{sha}\n".encode("ascii")


def _read_sha_line(data: bytes) -> Reading:
    text = data.decode("utf-8", errors="replace").strip()
    sha = parse_full_sha(text)
    if sha is not None:
        return Reading(sha)
    shown = text if len(text) <= 80 else text[:77] + "..."
    return Reading(None, f"it holds {shown!r}, not {FULL_SHA_WORDS}" if text else "it is empty")


# One codec per format the schema allows (manifest/schema.py `PinFileFormat`): render, read.
_CODECS: dict[str, tuple[Callable[[str], bytes], Callable[[bytes], Reading]]] = {
    "sha-line": (_render_sha_line, _read_sha_line),
}


def render(pin_file: PinFile, sha: str) -> bytes:
    """The file's bytes when it records `sha`."""
    return _CODECS[pin_file.format][0](sha)


def read(pin_file: PinFile, data: bytes) -> Reading:
    return _CODECS[pin_file.format][1](data)


def paths(consumer: Consumer) -> list[str]:
    return [pin_file.path for pin_file in consumer.pin_files]


def _not_a_file(entry: TreeEntry | None) -> str | None:
    """Why the tree entry cannot be the record (None: it is a regular file)."""
    if entry is None:
        return "the tree has no such file"
    if entry.kind == "tree":
        return "it is a folder"
    if entry.kind == "commit":
        return "it is a gitlink"
    if entry.mode not in REGULAR_FILE_MODES:
        return "it is a symbolic link"
    return None


# --- the bump: write every record with the gitlink ---------------------------------------------------


class RecordChange(msgspec.Struct, frozen=True):
    """One record a bump commit rewrites: from the commit it named (None: malformed) to the new pin."""

    path: str
    format: str
    old: str | None
    new: str
    mode: str
    blob: str  # the new content, written to the repository


def record_changes(
    objects: Objects, parent: str, consumer: Consumer, entries: dict[str, TreeEntry], new: str
) -> list[RecordChange]:
    """The records of `consumer` rewritten to name `new` (blobs written, nothing else touched). A record
    that the parent's tree lacks, or that is not a regular file there, is refused: the consumer does not
    keep the record the manifest names (renamed, moved, dropped), and writing one it does not read would
    leave the record it does read stale."""
    changes = []
    for pin_file in consumer.pin_files:
        entry = entries.get(pin_file.path)
        why = _not_a_file(entry)
        if why is not None or entry is None:
            raise BadInput(
                f"{consumer.name}@{parent[:12]}: cannot write the pin record {pin_file.path} ({why})",
                hint=f"fix consumers[].pin_files of {consumer.name} in the manifest (remove {pin_file.path} "
                "if the consumer no longer keeps it there), or add the file to the consumer first",
            )
        old = read(pin_file, objects.blob_bytes(entry.sha)).sha
        blob = objects.write_blob(render(pin_file, new))
        changes.append(RecordChange(pin_file.path, pin_file.format, old, new, entry.mode, blob))
    return changes


def message_lines(changes: list[RecordChange]) -> list[str]:
    """The bump commit message's lines for the records (old value, or that it was not a SHA)."""
    return [f"{c.path}: {c.old or '(not a commit SHA)'} -> {c.new}" for c in changes]


# --- check-pins: every record agrees with its gitlink ------------------------------------------------


def check_records(
    link: LinkResult,
    objects: Objects,
    consumer: Consumer,
    entries: dict[str, TreeEntry],
    pinned: str,
    bump_command: str,
    under_test: bool,
) -> None:
    """Add one `pin-file` finding per record of `consumer` at the link's commit: it names `pinned` (the
    gitlink's commit), or it is missing, malformed, or names another commit. The fix writes the
    gitlink's commit into the file when the gitlink itself passes, else it is the bump (`bump_command`),
    which writes both."""
    pin_ok = not any(f.status != Status.OK and f.check in ("pin", "nested") for f in link.findings)
    for pin_file in consumer.pin_files:
        entry = entries.get(pin_file.path)
        why = _not_a_file(entry)
        reading = (
            Reading(None, why or "")
            if why is not None or entry is None
            else read(pin_file, objects.blob_bytes(entry.sha))
        )
        agrees = reading.sha == pinned
        link.records.append(PinRecord(pin_file.path, pin_file.format, reading.sha, agrees))
        write = shlex.join(["printf", "%s\\n", pinned]) + " > " + shlex.quote(pin_file.path)
        fix = (
            f"{write} (in a checkout of {consumer.name}, then commit it; {bump_command} writes it with the gitlink)"
            if pin_ok
            else f"{bump_command} (it writes {link.gitlink} and {pin_file.path} in one commit)"
        )
        if agrees:
            finding = ChainFinding(
                CHECK, Status.OK, "ok", f"{pin_file.path} names the gitlink's {pinned[:12]}"
            )
        elif entry is None:
            finding = ChainFinding(
                CHECK,
                Status.MISMATCH,
                "pin-file-missing",
                f"{pin_file.path} is missing: the manifest says {consumer.name} records its pin there too "
                f"(pin_files), so its own checks of that record fail",
                f"{fix}; or remove {pin_file.path} from consumers[].pin_files of {consumer.name} in the "
                "manifest if it no longer keeps that record",
            )
        elif reading.sha is None:
            finding = ChainFinding(
                CHECK,
                Status.MISMATCH,
                "pin-file-malformed",
                f"{pin_file.path} does not record a commit ({reading.problem}); {link.gitlink} pins {pinned}",
                fix,
            )
        else:
            finding = ChainFinding(
                CHECK,
                Status.MISMATCH,
                "pin-file-mismatch",
                f"{pin_file.path} names {reading.sha} but {link.gitlink} pins {pinned}: a fresh recursive "
                f"clone builds the gitlink's commit, while {consumer.name}'s own checks and scripts that "
                f"read {pin_file.path} get the other one",
                fix,
            )
        if under_test:
            finding = msgspec.structs.replace(finding, file=pin_file.path, line=1 if entry else None)
        link.findings.append(finding)
