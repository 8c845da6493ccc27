"""What the git layer remembers within one command, and forgets when the next one starts.

A check asks about the same objects, branches and `.gitmodules` blobs many times; the answers are kept
in the modules that ask (`memo(...)`), for the run. In a process that runs several commands (a test
session, a tool that drives the CLI in process) each command starts from what is on disk, as a new
process would: `start_run()` empties every memo. What outlives a run is written to disk (`facts.py`) by
`end_run()`, which the CLI calls when any command ends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

Memo = TypeVar("Memo", set, dict, list)

_MEMOS: list[set | dict] = []
_AT_END: list[Callable[[], None]] = []


def memo(container: Memo) -> Memo:
    """Register a module's memo (an empty set or dict) to be emptied when a command starts."""
    _MEMOS.append(container)
    return container


def at_end(keep: Callable[[], None]) -> None:
    """Register what writes a module's lasting answers to disk when a command ends (`facts.py`)."""
    _AT_END.append(keep)


def start_run() -> None:
    """Forget every answer an earlier command in this process kept."""
    for container in _MEMOS:
        container.clear()


def end_run() -> None:
    """Write what this command learnt that outlives it, whichever verb it was and however it ended."""
    for keep in _AT_END:
        keep()


# Locations the user named (on this command line, or in the manifest, which is reviewed like code), as
# given: `git.remote` admits the local ones among them (and normalises them) when it is first asked, so
# a command that contacts no remote never imports it.
NAMED_BY_USER: list[str] = memo([])
