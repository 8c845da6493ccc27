"""Text laid out for a width: the terminal's, or 120 columns when the output is a log or a pipe.

Prose is wrapped only between words (a word, path or URL longer than the room stays whole on a line of
its own), and never inside a command it names; a fix starts a line of its own (`fix: ...`), and a command
a line ends with is put whole on a line of its own, so either can be copied as it stands. A table too wide for the width wraps its widest columns in place
(columns stay aligned) and shows its `fix` column under the row, one line per fix.

A line is a list of segments (text, style); the style names a colour for a terminal, and plain text
ignores it.
"""

from __future__ import annotations

import os
import re
import textwrap
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from forkctl.report import Problem, Table

LOG_WIDTH = 120  # a CI log or a pipe: wide enough for a path and a SHA, narrow enough to read
GAP = "  "  # between table columns
FIX_COLUMN = "fix"
MIN_COLUMN = 12  # a wrapped column keeps at least this many characters (or its longest word)

Segment = tuple[str, "str | None"]
Line = list[Segment]

# "what to do: <command>": the command is put on a line of its own, whole.
_COMMAND_TAIL = re.compile(
    r"^(?P<lead>.*?:)\s+(?P<command>(?:git|gh|forkctl|python3?|pip|uv|ssh-keygen|cd|pre-commit)\s.*)$"
)


def width_of(stream: TextIO, terminal: bool) -> int:
    """The terminal's columns ($COLUMNS first, as shutil reads them), or for a log or a pipe
    $FORKCTL_LOG_WIDTH (40 or more; default LOG_WIDTH)."""
    if not terminal:
        given = os.environ.get("FORKCTL_LOG_WIDTH", "")
        return int(given) if given.isdigit() and int(given) >= 40 else LOG_WIDTH
    given = os.environ.get("COLUMNS", "")
    if given.isdigit() and int(given) > 0:
        return max(40, int(given))
    try:  # os, not shutil: a re-apply's start-up imports no shutil (tests/test_reapply.py)
        return max(40, os.get_terminal_size(stream.fileno()).columns)
    except (OSError, ValueError, AttributeError):
        return LOG_WIDTH


# A command inside prose (`... with forkctl port --onto X (git's ...`): from its program to the next
# bracket, comma or semicolon. Its spaces are not places to break a line.
_COMMAND = re.compile(
    r"(?:(?<=[\s`])|^)(?:git|gh|forkctl|python3?|pip|uv|ssh-keygen|pre-commit)\s"
    r"(?:'[^']*'|\"[^\"]*\"|[^(),;`'\"])*"  # a quoted argument is one piece, whatever it holds
)
_UNBROKEN = "\ue000"  # a private-use character standing in for a space that must not break


def _keep_commands(text: str) -> str:
    return _COMMAND.sub(
        lambda m: m.group(0).rstrip().replace(" ", _UNBROKEN) + m.group(0)[len(m.group(0).rstrip()) :], text
    )


def words(text: str, width: int, first: str = "", rest: str = "") -> list[str]:
    """`text` (one line) in lines of at most `width`, broken only at spaces, and never inside a
    command it names (a command longer than the room stays whole on its own line)."""
    if _UNBROKEN in text:  # not ours to stand in for: wrap as it is
        return _wrap(text, width, first, rest)
    return [line.replace(_UNBROKEN, " ") for line in _wrap(_keep_commands(text), width, first, rest)]


def _wrap(text: str, width: int, first: str, rest: str) -> list[str]:
    wrapper = textwrap.TextWrapper(
        width=max(width, len(first) + 1, len(rest) + 1),
        initial_indent=first,
        subsequent_indent=rest,
        break_long_words=False,
        break_on_hyphens=False,
        replace_whitespace=False,
    )
    return wrapper.wrap(text) or [first.rstrip()]


def prose(text: str, width: int) -> list[str]:
    """A report line: each of its lines wrapped at words under its own indent, but a fenced block, a
    Markdown table row, a drawn diagram and a command at the end of a line are kept whole."""
    out: list[str] = []
    fenced = False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        keep = fenced or line.lstrip().startswith(("```", "|", "└─", "--- ")) or len(line) <= width
        if keep:
            out.append(line)
            continue
        indent = line[: len(line) - len(line.lstrip())]
        command = _COMMAND_TAIL.match(line.strip())
        if command:
            out += words(command.group("lead"), width, indent, indent + "  ")
            out.append(f"{indent}  {command.group('command')}")
        else:
            out += words(line.strip(), width, indent, indent + "  ")
    return out


def problem_lines(problem: Problem, width: int) -> list[Line]:
    """`level: where message` wrapped at words (git's own lines of the message indented under it), then
    `  fix: <hint>` whole on its own line."""
    where = (
        f"{problem.file}:{problem.line}: "
        if problem.file and problem.line
        else f"{problem.file}: "
        if problem.file
        else ""
    )
    level = str(problem.level)
    message_lines = f"{where}{problem.message}".split("\n")
    wrapped = words(message_lines[0], width, f"{level}: ", "  ")
    lines: list[Line] = [[(f"{level}:", level), (wrapped[0][len(level) + 1 :], None)]]
    lines += [[(text, None)] for text in wrapped[1:]]
    for more in message_lines[1:]:
        lines += [[(text, None)] for text in words(more.strip(), width, "  ", "    ")]
    if problem.hint:
        lines += _fix_lines("  ", problem.hint, width)
    return lines


def _fix_lines(indent: str, fix: str, width: int) -> list[Line]:
    """`fix: <fix>` on lines of its own, wrapped at words under itself, each command in it whole."""
    label = f"{indent}fix: "
    wrapped = words(fix, width, label, " " * len(label))
    lines: list[Line] = [[(label, "fix"), (wrapped[0][len(label) :], None)]]
    lines += [[(text, None)] for text in wrapped[1:]]
    return lines


def _fit(natural: list[int], floors: list[int], room: int) -> list[int]:
    """Column widths that sum to at most `room`: the widest column gives way first, none below its
    floor. A table that cannot fit even so (a word, such as a long URL, wider than the room): when that
    word is in the last column, the others keep their floors and the last wraps at the room left (only
    a line holding such a word runs past the width, and nothing after it is pushed out of line);
    elsewhere the table is left as it is, every cell whole on its row and the columns aligned."""
    widths = list(natural)
    if sum(floors) > room:
        last = len(widths) - 1
        if floors[last] <= max(floors[:last], default=0) or room - sum(floors[:last]) < MIN_COLUMN:
            return widths
        return [*floors[:last], room - sum(floors[:last])]
    while sum(widths) > room:
        shrinkable = [i for i, w in enumerate(widths) if w > floors[i]]
        if not shrinkable:
            break
        widest = max(shrinkable, key=lambda i: widths[i])
        widths[widest] -= 1
    return widths


def table_lines(table: Table, width: int, styles: dict[str, str]) -> list[Line]:
    """The table under its title, its columns aligned and wrapped at words to fit `width`; the `fix`
    column becomes a `fix:` line under its row."""
    fix = table.columns.index(FIX_COLUMN) if FIX_COLUMN in table.columns else None
    shown = [i for i in range(len(table.columns)) if i != fix]
    cells = [[row[i] if i < len(row) else "" for i in shown] for row in table.rows]
    header = [table.columns[i] for i in shown]
    natural = [max(len(c) for c in column) for column in zip(header, *cells, strict=True)]
    floors = [
        min(n, max(MIN_COLUMN, *(len(w) for c in column for w in c.split() or [""])))
        for n, column in zip(natural, zip(header, *cells, strict=True), strict=True)
    ]
    widths = _fit(natural, floors, width - len(GAP) * (len(shown) - 1))
    lines: list[Line] = [[(text, None)] for text in words(table.title, width)] if table.title else []
    lines.append(_aligned(header, widths, {}))
    lines.append(_aligned(["-" * len(h) for h in header], widths, {}))
    main = max(range(len(shown)), key=lambda i: widths[i])
    fix_indent = " " * min(sum(widths[:main]) + len(GAP) * main, 40)
    for row, shown_cells in zip(table.rows, cells, strict=True):
        wrapped = [words(cell, widths[i]) if cell else [""] for i, cell in enumerate(shown_cells)]
        for depth in range(max(len(w) for w in wrapped)):
            parts = [w[depth] if depth < len(w) else "" for w in wrapped]
            lines.append(_aligned(parts, widths, styles if depth == 0 else {}))
        if fix is not None and fix < len(row) and row[fix]:
            lines += _fix_lines(fix_indent, row[fix], width)
    return lines


def _aligned(parts: list[str], widths: list[int], styles: dict[str, str]) -> Line:
    line: Line = []
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        padded = part if last else part.ljust(widths[i]) + GAP
        if part in styles:
            line += [(part, part), (padded[len(part) :], None)]
        else:
            line.append((padded, None))
    # Trailing blanks of the last cells are dropped, as a person types a line.
    text_end = len("".join(t for t, _ in line).rstrip())
    kept: Line = []
    used = 0
    for text, style in line:
        if used >= text_end:
            break
        kept.append((text[: text_end - used], style))
        used += len(text)
    return kept


def plain(lines: list[Line]) -> str:
    return "".join("".join(text for text, _ in line) + "\n" for line in lines)
