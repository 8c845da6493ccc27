"""The report layer: one result model, rendered as text, JSON, or GitHub annotations + step summary.

Commands build a `Report` and return it; only this package writes to the terminal (its submodules,
such as `chain`, build the `Report` of one area). Progress for long
work goes to stderr (so `--json` on stdout stays parseable).

Text is laid out once (`layout`) for a width, the terminal's or 120 columns in a log or a pipe: aligned
columns without borders, prose wrapped only between words and never inside a URL or a command, each
fix on a line of its own, each finding once (a problem a table already shows is not printed again).
rich only colours that layout and draws progress bars on a terminal, and is imported only then, so a
command that prints to a pipe never pays for importing it.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import msgspec

from forkctl.compat import StrEnum
from forkctl.errors import EXIT_BAD_INPUT, EXIT_CHECK_FAILED, EXIT_OK, ForkctlError
from forkctl.redact import clean, clean_data, inert
from forkctl.report import layout
from forkctl.report.pace import after as after  # re-exported: commands call report.after

if TYPE_CHECKING:
    from rich.console import Console


class Format(StrEnum):
    TEXT = "text"
    JSON = "json"
    GITHUB = "github"


class Level(StrEnum):
    ERROR = "error"
    WARNING = "warning"
    NOTICE = "notice"


class Problem(msgspec.Struct):
    message: str
    level: Level = Level.ERROR
    file: str | None = None
    line: int | None = None
    hint: str | None = None
    # A finding a table of the same report already shows with its fix (check-pins' rows): text prints
    # it once, in the table; JSON and GitHub annotations carry it as a problem still.
    in_table: bool = False

    def text(self) -> str:
        where = (
            f"{self.file}:{self.line}: " if self.file and self.line else f"{self.file}: " if self.file else ""
        )
        return f"{where}{self.message}" + (f" (fix: {self.hint})" if self.hint else "")


class Table(msgspec.Struct):
    title: str
    columns: list[str]
    rows: list[list[str]]


class Report(msgspec.Struct):
    """What a command found or did. `data` is the JSON payload; tables and lines are for people.

    The exit code has one source, the problems: 1 when one is an error (which says what failed and
    how to fix it, so the output always explains a failure), else 0. Bad input is an exception
    (exit 2), never a report."""

    command: str
    data: dict[str, Any] = msgspec.field(default_factory=dict)
    tables: list[Table] = msgspec.field(default_factory=list)
    lines: list[str] = msgspec.field(default_factory=list)
    problems: list[Problem] = msgspec.field(default_factory=list)
    summary_markdown: str | None = None  # extra Markdown for the GitHub step summary (e.g. a diagram)

    def fail(self, problem: Problem) -> None:
        """Record `problem`; one of level error makes the command exit 1."""
        self.problems.append(problem)

    @property
    def ok(self) -> bool:
        return not any(problem.level == Level.ERROR for problem in self.problems)

    @property
    def code(self) -> int:
        return EXIT_OK if self.ok else EXIT_CHECK_FAILED


STATUS_STYLES = {
    "OK": "green",
    "applies": "green",
    "applied": "green",
    "MISMATCH": "red",
    "UNREACHABLE": "red",
    "conflict": "red",
    "stale": "red",
    "absorbed": "yellow",
    "passed": "green",
    "failed": "red",
}


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


def _console(stderr: bool = False) -> Console:
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=True)


def _escape(text: str) -> str:
    return text.replace("[", r"\[")


def _json_default(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "isoformat"):
        return value.isoformat()
    raise TypeError(f"cannot serialise {type(value).__name__}")


# The version of the JSON documents every command prints: the keys below and each command's data. It goes
# up when a key is removed or changes type, so a CI step can refuse a shape it does not know.
JSON_SCHEMA_VERSION = 1


def to_json(report: Report) -> str:
    payload = {
        "schema_version": JSON_SCHEMA_VERSION,
        "command": report.command,
        "ok": report.ok,
        **report.data,
        "problems": [
            {k: v for k, v in msgspec.structs.asdict(p).items() if v is not None and k != "in_table"}
            | {"level": str(p.level)}
            for p in report.problems
        ],
    }
    import json  # only a JSON document needs it: a text report (the common case) does not

    plain = json.loads(json.dumps(payload, default=_json_default))
    return json.dumps(clean_data(plain), indent=2, sort_keys=False)


def emit(report: Report, fmt: Format = Format.TEXT) -> int:
    """Write the report to stdout in `fmt`; return the exit code. A reader that went away
    (`forkctl check-pins | head -1`) ends the output quietly: the exit code is still the verb's."""
    try:
        _emit(report, fmt)
        sys.stdout.flush()  # a closed pipe is found here, not by the interpreter's flush at exit
    except BrokenPipeError:
        output_closed(sys.stdout)
    return report.code


def _emit(report: Report, fmt: Format) -> None:
    if fmt == Format.JSON:
        sys.stdout.write(to_json(report) + "\n")
        return
    report = _cleaned(report)
    if _is_terminal(sys.stdout):
        _print_rich(report)
    else:
        sys.stdout.write(plain_text(report, layout.LOG_WIDTH))
    if fmt == Format.GITHUB:
        from forkctl.report import github

        github.annotate(report)


def output_closed(stream: TextIO) -> None:
    """The reader of `stream` went away: nothing more can reach it. Its descriptor is pointed at
    /dev/null, so what is still buffered (and the interpreter's flush at exit) goes nowhere quietly
    instead of failing again."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)


def _print_rich(report: Report) -> None:
    """The same layout as a log's, for the terminal's width, with the statuses and levels in colour."""
    from rich.text import Text

    console = _console()
    colours = {**STATUS_STYLES, "error": "red", "warning": "yellow", "notice": "cyan", "fix": "cyan"}
    for line in _laid_out(report, console.width):
        text = Text(no_wrap=True, overflow="ignore", end="\n")
        for part, style in line:
            text.append(part, style=colours.get(style) if style else None)
        console.print(text, soft_wrap=True)


def _laid_out(report: Report, width: int) -> list[layout.Line]:
    """Tables, then lines, then the problems no table showed, laid out for `width` (report/layout.py)."""
    lines: list[layout.Line] = []
    for table in report.tables:
        lines += [*layout.table_lines(table, width, STATUS_STYLES), []]
    for line in report.lines:
        lines += [[(text, None)] for text in layout.prose(line, width)]
    for problem in report.problems:
        if not problem.in_table:
            lines += layout.problem_lines(problem, width)
    return [_inert_line(line) for line in lines]


def _inert_line(line: layout.Line) -> layout.Line:
    """`line` as laid out, checked again: wrapping can start a line with data that was mid-line before
    (a long URL, then ` ::stop-commands::`), so the check is made on the lines that are printed. A line
    that needed escaping loses its colours, never its text."""
    text = "".join(part for part, _ in line)
    shown = inert(text)
    return line if shown == text else [(shown, None)]


def plain_text(report: Report, width: int = layout.LOG_WIDTH) -> str:
    """The report as plain text for `width` columns: tables, then lines, then the problems no table
    showed; each finding once, wrapped between words, each fix whole on its own line."""
    return layout.plain(_laid_out(report, width))


def _note(text: str, label: str = "", style: str | None = None) -> None:
    """`label` and `text` on stderr, wrapped between words for its width (a terminal's, or 120 columns)
    under a two-space indent; on a terminal the label (or, without one, the text) in `style`. Never a
    workflow command (the runner reads stderr too)."""
    terminal = _is_terminal(sys.stderr)
    head = f"{label} " if label else ""
    wrapped = layout.words(
        inert(text),
        layout.width_of(sys.stderr, terminal),
        head,
        "  " + " " * (len(head) - len(head.lstrip())),
    )
    lines = [inert(line) for line in wrapped]  # checked after wrapping, as the runner reads them
    try:
        if terminal:
            from rich.text import Text

            console = _console(stderr=True)
            for number, line in enumerate(lines):
                shown = Text(no_wrap=True, overflow="ignore")
                if number == 0 and label:
                    shown.append(label, style=style)
                    shown.append(line[len(label) :])
                else:
                    shown.append(line, style=None if label else style)
                console.print(shown, soft_wrap=True)
        else:
            sys.stderr.write("".join(f"{line}\n" for line in lines))
            sys.stderr.flush()
    except BrokenPipeError:  # `forkctl ... 2>&1 | head -1`: progress nobody reads stops the command not
        output_closed(sys.stderr)


def error(exc: ForkctlError, fmt: Format = Format.TEXT, command: str | None = None) -> int:
    """Render an error that ended a command; return its exit code. Under --json the document names the
    command and carries `problems` like every report, so a machine reads one shape for every outcome."""
    message, hint = clean(exc.message), clean(exc.hint) if exc.hint else None
    if fmt == Format.JSON:
        problem = {"message": message, "level": str(Level.ERROR)} | ({"hint": hint} if hint else {})
        payload = {
            "schema_version": JSON_SCHEMA_VERSION,
            "command": command,
            "ok": False,
            "error": message,
            "hint": hint,
            "exit_code": exc.exit_code,
            "problems": [problem],
        }
        import json

        try:
            sys.stdout.write(json.dumps(payload, indent=2) + "\n")
            sys.stdout.flush()
        except BrokenPipeError:
            output_closed(sys.stdout)
    else:
        for number, line in enumerate(message.split("\n")):
            _note(line if number == 0 else f"  {line}", "forkctl: error:" if number == 0 else "", "red")
        if hint:
            _note(hint, "  hint:", "cyan")
        if fmt == Format.GITHUB:
            from forkctl.report import github

            github.error(message, hint, command)
    return exc.exit_code if exc.exit_code else EXIT_BAD_INPUT


def usage_error(exc: Any) -> None:
    """click's usage error (a `click.ClickException`) as click shows it, each line redacted, printable
    and inert: it quotes the arguments given, which may be data."""
    import io

    shown = io.StringIO()
    exc.show(file=shown)
    try:
        sys.stderr.write("".join(f"{_shown(line)}\n" for line in shown.getvalue().splitlines()))
        sys.stderr.flush()
    except BrokenPipeError:
        output_closed(sys.stderr)


def info(message: str) -> None:
    """A progress note for people, on stderr."""
    text = clean(message)
    _note(text, style="dim")


def _shown(text: str) -> str:
    """A string as text output shows it: redacted, printable, no line a workflow command."""
    return inert(clean(text))


def _one_line(text: str) -> str:
    """A table cell or title: `_shown`, and a newline written `\\x0a` (a cell is one line)."""
    return inert(clean(text).replace("\n", "\\x0a"))


def _cleaned(report: Report) -> Report:
    """A copy of `report` whose every string is redacted, printable and inert (forkctl/redact.py)."""
    return msgspec.structs.replace(
        report,
        lines=[_shown(line) for line in report.lines],
        tables=[
            Table(
                title=_one_line(t.title),
                columns=[_one_line(c) for c in t.columns],
                rows=[[_one_line(c) for c in row] for row in t.rows],
            )
            for t in report.tables
        ],
        problems=[
            msgspec.structs.replace(
                p,
                message=_shown(p.message),
                file=_one_line(p.file) if p.file else None,
                hint=_shown(p.hint) if p.hint else None,
            )
            for p in report.problems
        ],
        summary_markdown=clean(report.summary_markdown)
        if report.summary_markdown
        else report.summary_markdown,
    )


@contextlib.contextmanager
def progress(description: str, total: int | None) -> Iterator[Any]:
    """A progress bar on stderr; yields a function `advance(label)`. Silent when stderr is not a tty."""
    if not _is_terminal(sys.stderr):
        yield lambda label="": None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = _console(stderr=True)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[label]}"),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task(description, total=total, label="")

        def advance(label: str = "") -> None:
            bar.update(task, advance=1, label=label)

        yield advance


@contextlib.contextmanager
def phases(description: str) -> Iterator[Callable[[str], None]]:
    """For work told in phases of unknown length (validate, a chain check with its fetches): yields
    `step(message)`, which prints the message as `info` does and, on a terminal, shows it beside a
    running bar with the elapsed time, so a long fetch or test run visibly moves."""
    with progress(description, None) as advance:

        def step(message: str) -> None:
            info(message)
            advance(clean(message))

        yield step
