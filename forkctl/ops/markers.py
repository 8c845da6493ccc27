"""Conflict markers a person can read: the names git wrote on them (object ids in a port, `ours` /
`theirs` after `git apply --3way`) replaced by what each side is, the way `git rebase` names its sides.

Ours is the head the patch was being applied to (the upstream commit, plus the patches already done);
theirs is the patch (its file and subject). Only the label after a marker changes: git's merge, its
marker lines and the `:path` git appends on a rename are kept, so a file resolves exactly as before.
"""

from __future__ import annotations

import re
from pathlib import Path

from forkctl.files import atomic_write

CONFLICT_MARKER_RE = re.compile(rb"^(<{7}|>{7})( |$)", re.MULTILINE)
LABEL_LENGTH = 100  # a marker line stays readable in a terminal and an editor
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f]+")


def _label(prefix: str, subject: str, suffix: str = "") -> str:
    """`prefix (subject)suffix` on one line of at most LABEL_LENGTH characters: the subject (data: no
    control character) is what gets shortened."""
    flat = _UNPRINTABLE.sub(" ", subject).strip()
    room = max(LABEL_LENGTH - len(prefix) - len(suffix) - 3, 20)
    if len(flat) > room:
        flat = flat[: room - 3].rstrip() + "..."
    return f"{prefix} ({flat}){suffix}"


def _short(file: str) -> str:
    """A patch file by its number (`0003`), or its name when it has none."""
    name = Path(file).name
    return name[:4] if name[:4].isdigit() else name


def ours_label(base: str, base_subject: str, last_done: str | None) -> str:
    """`upstream <sha12> (<subject>)`, and ` + patches to NNNN` when earlier patches are already on it."""
    return _label(
        f"upstream {base[:12]}", base_subject, f" + patches to {_short(last_done)}" if last_done else ""
    )


def theirs_label(file: str, subject: str) -> str:
    return _label(Path(file).name, subject)


def relabel(worktree: Path, paths: list[str], sides: dict[str, str]) -> None:
    """In each conflicted file, replace the name after `<<<<<<<` / `>>>>>>>` (`sides`: git's name ->
    ours or theirs label). A line whose name is not one of git's is left alone: it is the file's own."""
    if not sides:
        return
    names = b"|".join(re.escape(name.encode()) for name in sorted(sides, key=len, reverse=True))
    pattern = re.compile(rb"^(<{7}|>{7}) (" + names + rb")(:[^\n]*)?$", re.MULTILINE)
    labels = {name.encode(): label.encode() for name, label in sides.items()}

    def named(match: re.Match[bytes]) -> bytes:
        return match.group(1) + b" " + labels[match.group(2)] + (match.group(3) or b"")

    for rel in paths:
        target = worktree / rel
        if not target.is_file() or target.is_symlink():
            continue
        text = target.read_bytes()
        relabelled = pattern.sub(named, text)
        if relabelled != text:
            atomic_write(target, relabelled)
