"""The GitHub Actions channel: workflow-command annotations (values escaped as GitHub documents) and the
Markdown step summary appended to $GITHUB_STEP_SUMMARY (data in code spans: report/markdown.py)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from forkctl.redact import inert
from forkctl.report import Report, Table, _note
from forkctl.report.markdown import cell, code, fenced


def markdown_table(table: Table) -> str:
    """A table for the step summary: the title and every cell in code (forkctl/report/markdown.py)."""
    head = "| " + " | ".join(cell(c) for c in table.columns) + " |\n|" + "---|" * len(table.columns) + "\n"
    body = "".join("| " + " | ".join(cell(c, empty="") for c in row) + " |\n" for row in table.rows)
    return f"**{code(table.title)}**\n\n{head}{body}"


def _github_escape(text: str) -> str:
    """A message value escaped as GitHub documents it; the runner also reads the legacy `##[` anywhere
    in a line, so that is made inert too (forkctl/redact.py)."""
    return inert(text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def _github_property(text: str) -> str:
    """A property value (file=, line=) as GitHub's workflow commands require it escaped."""
    return _github_escape(text).replace(":", "%3A").replace(",", "%2C")


def annotate(report: Report) -> None:
    """One annotation per problem, on its file and line, then the report's step summary."""
    for problem in report.problems:
        props = []
        if problem.file:
            props.append(f"file={_github_property(problem.file)}")
        if problem.line:
            props.append(f"line={problem.line}")
        message = problem.message + (f" Fix: {problem.hint}" if problem.hint else "")
        sys.stdout.write(f"::{problem.level} {','.join(props)}::{_github_escape(message)}\n")
    _append_step_summary(step_summary(report))


def step_summary(report: Report) -> str:
    verdict = "passed" if report.ok else "failed"
    parts = [f"## forkctl {report.command}: {verdict}\n"]
    if report.summary_markdown:
        parts.append(report.summary_markdown + "\n")
    parts += [markdown_table(t) for t in report.tables]
    parts += [f"- **{p.level}**: {code(p.text())}\n" for p in report.problems if not p.in_table]
    return "\n".join(parts) + "\n"


# "path:line: what" (a manifest or patch error names its file and line this way).
_WHERE_RE = re.compile(r"^(?P<file>[^\s:][^:\n]*):(?P<line>\d+): (?P<what>.*)$", re.DOTALL)


def error(message: str, hint: str | None, command: str | None) -> None:
    """An error as GitHub wants it: one annotation per line of the message, on the file and line it
    names (relative to the workspace, so the annotation lands on the diff), and a step summary."""
    workspace = Path(os.environ.get("GITHUB_WORKSPACE") or Path.cwd())
    for line in message.splitlines() or [message]:
        props, text = "", line
        match = _WHERE_RE.match(line)
        if match:
            file = Path(match.group("file"))
            if file.is_absolute() and file.is_relative_to(workspace):
                file = file.relative_to(workspace)
            props, text = (
                f" file={_github_property(str(file))},line={match.group('line')}",
                match.group("what"),
            )
        text += f" Fix: {hint}" if hint else ""
        sys.stdout.write(f"::error{props}::{_github_escape(text)}\n")
    lines = [f"## forkctl {command or ''}: error", "", *fenced(message)]
    lines += ["", "hint:", "", *fenced(hint)] if hint else []
    _append_step_summary("\n".join(lines) + "\n\n")


def _append_step_summary(text: str) -> None:
    """Append to $GITHUB_STEP_SUMMARY (GitHub's own protocol: each step appends its Markdown)."""
    summary_path = os.environ.get("GITHUB_STEP_SUMMARY")
    if not summary_path:
        return
    import stat

    # Only a regular file is written: a FIFO with no reader (or a device) would block forkctl forever.
    # O_NONBLOCK makes the open itself return at once even if a FIFO appears after the check.
    not_regular = f"warning: the step summary {summary_path} is not a regular file; skipped"
    try:
        if os.path.exists(summary_path) and not stat.S_ISREG(os.stat(summary_path).st_mode):
            _note(not_regular)
            return
        handle = os.open(summary_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o644)
        with os.fdopen(handle, "a", encoding="utf-8") as summary:
            if not stat.S_ISREG(os.fstat(handle).st_mode):
                _note(not_regular)
                return
            summary.write(inert(text))  # every line, as for the log: a summary is data too
    except OSError as exc:  # the verdict and exit code stand; the summary is a courtesy
        _note(f"warning: cannot write the step summary {summary_path}: {exc.strerror}")
