"""One hook on one materialised tree: what it says, as findings (hook, file, line, message).

A linter's message is read from its output in the `path:line[:col]: message` shape every common Python
linter prints (pylint, flake8, ruff, pygrep-style checkers); a formatter (which rewrites files, as
pre-commit runs it) is read from the files it changed, one finding per changed hunk, and the files are
put back so that each hook judges the tree as it is. A hook that fails and says nothing of that shape is
one finding with its exit status and last line.
"""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path

import msgspec

from forkctl import process
from forkctl.upstreamlint.hooks import Hook

HOOK_TIMEOUT_S = 900
_LOCATED_RE = re.compile(r"^(?P<file>[^:\n]+?):(?P<line>\d+):(?:(?P<col>\d+):?)?\s*(?P<message>.*)$")
# What a tool may inherit: never an interpreter path or start-up file of the user's environment.
_DROPPED_ENV = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "PYTHONSAFEPATH")


class Finding(msgspec.Struct, frozen=True):
    hook: str
    tool: str
    message: str
    file: str | None = None
    line: int | None = None
    source: str = (
        ""  # the text of that line: a finding is the same on both trees when this is, wherever it moved
    )


def _env(bin_dir: Path | None, scratch: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in _DROPPED_ENV}
    path = env.get("PATH", os.defpath)
    env["PATH"] = f"{bin_dir}{os.pathsep}{path}" if bin_dir is not None else path
    # The tools' own caches live with the run, not in the user's home (and never answer for another tree).
    env["PYLINTHOME"] = str(scratch / "pylint")
    env["BLACK_CACHE_DIR"] = str(scratch / "black")
    env["RUFF_CACHE_DIR"] = str(scratch / "ruff")
    return env


def _source_line(root: Path, rel: str, line: int | None) -> str:
    if line is None:
        return ""
    try:
        lines = (root / rel).read_bytes().decode(errors="replace").splitlines()
    except OSError:
        return ""
    return lines[line - 1].strip() if 0 < line <= len(lines) else ""


def _relative(root: Path, printed: str) -> str:
    path = Path(printed.strip())
    if path.is_absolute():
        try:
            return path.resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            return printed
    return path.as_posix()


def located(hook: Hook, root: Path, output: str, paths: list[str]) -> list[Finding]:
    """The `path:line: message` lines of a tool's output about the files it was given."""
    given = set(paths)
    found = []
    for text in output.splitlines():
        match = _LOCATED_RE.match(text.strip())
        if match is None:
            continue
        rel = _relative(root, match["file"])
        if rel not in given:
            continue
        line = int(match["line"])
        message = match["message"].strip()
        found.append(Finding(hook.id, hook.tool, message, rel, line, _source_line(root, rel, line)))
    return found


def _changed_lines(before: bytes, after: bytes) -> list[int]:
    """The first line of each hunk a rewrite changed, numbered in the file as it was."""
    old = before.decode(errors="replace").splitlines()
    new = after.decode(errors="replace").splitlines()
    opcodes = difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes()
    return [min(first + 1, max(len(old), 1)) for tag, first, _, _, _ in opcodes if tag != "equal"] or [1]


def reformatted(hook: Hook, root: Path, before: dict[str, bytes]) -> list[Finding]:
    """Each hunk of the files the hook rewrote, at its first line; each file is put back as it was."""
    found = []
    for rel, old in before.items():
        target = root / rel
        new = target.read_bytes() if target.is_file() else b""
        if new == old:
            continue
        target.write_bytes(old)
        message = f"{hook.tool} would rewrite this line"
        for line in _changed_lines(old, new):
            found.append(Finding(hook.id, hook.tool, message, rel, line, _source_line(root, rel, line)))
    return found


def _argument(path: str) -> str:
    # A file name is data: one that starts with a dash must not read as an option.
    return f"./{path}" if path.startswith("-") else path


def run_hook(hook: Hook, bin_dir: Path | None, root: Path, paths: list[str], scratch: Path) -> list[Finding]:
    """Run `hook` on `paths` of the tree at `root` (its working folder, so upstream's config files there
    apply) and return what it found."""
    if not paths:
        return []
    before = {rel: (root / rel).read_bytes() for rel in paths}
    argv = [*hook.argv, *map(_argument, paths)]
    try:
        done = process.run(
            argv, timeout=HOOK_TIMEOUT_S, env=_env(bin_dir, scratch), cwd=root, text=True, merge_stderr=True
        )
    except OSError as exc:
        return [Finding(hook.id, hook.tool, f"cannot run {hook.argv[0]}: {exc.strerror or exc}")]
    except process.TimedOut:
        return [Finding(hook.id, hook.tool, f"did not finish within {HOOK_TIMEOUT_S} s")]
    output = str(done.stdout)
    found = located(hook, root, output, paths) + reformatted(hook, root, before)
    if done.returncode != 0 and not found:
        last = next((line.strip() for line in reversed(output.splitlines()) if line.strip()), "no output")
        found.append(Finding(hook.id, hook.tool, f"exited with status {done.returncode}: {last}"))
    return found


def new_on_head(base: list[Finding], head: list[Finding]) -> list[Finding]:
    """The fork head's findings the base does not have: compared by hook, file, message and the text of
    the line (the series moves lines, so numbers alone would call every moved message new)."""
    remaining: dict[tuple[str, str | None, str, str], int] = {}
    for finding in base:
        key = (finding.hook, finding.file, finding.message, finding.source)
        remaining[key] = remaining.get(key, 0) + 1
    new = []
    for finding in head:
        key = (finding.hook, finding.file, finding.message, finding.source)
        if remaining.get(key, 0) > 0:
            remaining[key] -= 1
        else:
            new.append(finding)
    return new
