"""Every forkctl command line the README shows names a real verb and only flags that verb shows in --help.

A README is where a new user copies commands from: a renamed or hidden flag there is a command that
fails (or, worse, a retired spelling that still works but is documented nowhere else).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest

from forkctl.cli import cli

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
# `forkctl <verb> ...` up to the end of a code span, a comment, a table cell or the line.
COMMAND = re.compile(r"(?<![\w/.@-])forkctl ([a-z][a-z-]*)((?: +[^`|#\n]*)?)")
GLOBAL = {"--manifest", "--help", "-h", "--version"}


def code_of(text: str) -> list[tuple[int, str]]:
    """(line number, code) for each line of a fenced block and each inline code span."""
    code, fenced = [], False
    for number, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif fenced:
            code.append((number, line))
        else:
            code += [(number, span) for span in re.findall(r"`([^`]+)`", line)]
    return code


def shown_commands(text: str) -> list[tuple[int, str, list[str]]]:
    """(line number, verb, flags) for each forkctl command line in the README's code."""
    found = []
    for number, line in code_of(text):
        for match in COMMAND.finditer(line):
            verb, rest = match.group(1), match.group(2)
            if rest.lstrip().startswith("<"):  # a git identity (`forkctl bump <bump@...>`), not a command
                continue
            try:
                words = shlex.split(rest.replace("\\", " "), posix=True)
            except ValueError:
                words = rest.split()
            flags = [w.split("=", 1)[0] for w in words if re.fullmatch(r"--?[a-z][a-z0-9-]*(=.*)?", w)]
            found.append((number, verb, flags))
    return found


def visible_flags(command: click.Command) -> set[str]:
    names: set[str] = set()
    for param in command.params:
        if isinstance(param, click.Option) and not param.hidden:
            names.update(param.opts)
            names.update(param.secondary_opts)
    return names | GLOBAL


def test_the_readme_shows_commands() -> None:
    assert len(shown_commands(README.read_text(encoding="utf-8"))) >= 40


@pytest.mark.parametrize("path", ["README.md", "docs/architecture.md", "validation/README.md"])
def test_every_command_line_shown_names_a_verb_and_its_visible_flags(path: str) -> None:
    ctx = click.Context(cli)
    verbs = set(cli.list_commands(ctx))
    wrong = []
    for number, verb, flags in shown_commands((ROOT / path).read_text(encoding="utf-8")):
        if verb not in verbs:
            wrong.append(f"{path}:{number}: forkctl {verb}: no such verb")
            continue
        known = visible_flags(cli.get_command(ctx, verb))
        wrong += [
            f"{path}:{number}: forkctl {verb} {flag}: not a visible option"
            for flag in flags
            if flag not in known
        ]
    assert not wrong, "\n".join(wrong)


def test_a_retired_flag_in_a_command_line_is_caught() -> None:
    ctx = click.Context(cli)
    (_, verb, flags), *_ = shown_commands("`forkctl export --from my-branch --repo CLONE`")
    assert (verb, flags) == ("export", ["--from", "--repo"])
    assert "--from" not in visible_flags(cli.get_command(ctx, verb))
