"""Tracing the git layer: `FORKCTL_TRACE` logs every git process forkctl starts, and git's own
`GIT_TRACE*` variables reach git.

`FORKCTL_TRACE=1` (or `true`) writes one line per git call to stderr, `FORKCTL_TRACE=/some/file`
appends it to that file: `forkctl trace: git <argv> | cwd <dir> | <ms> ms | exit <status>` (a
`cat-file --batch` reader: `started (answers until closed)`). The argv is what follows the pinned `-c`
settings (`runner.PINNED_CONFIG`, the same on every call); credentials in URLs are redacted and control
characters escaped (`redact`). This log is the one thing outside the report layer that writes to
stderr: only the git layer sees every git call, and the log is a diagnostic channel, not output.

git's trace variables are passed through unchanged where they name a file (or a unix socket, for
trace2). Where they name git's stderr (`1`, `2`, `true`) or a descriptor of forkctl's, git would write
into the stderr that forkctl captures and reads (its error messages, a merge's conflict text), so such a
variable is pointed at a duplicate of forkctl's own stderr instead (`/dev/fd/N`, the descriptor passed to
that one child).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from forkctl.errors import BadInput
from forkctl.git.runner import TRACE_OFF

# The variables that name where git writes a trace (the others of the family, e.g. GIT_TRACE_REDACT,
# GIT_TRACE2_BRIEF, GIT_TRACE2_ENV_VARS, say what a trace holds and pass through as they are).
DESTINATIONS = frozenset(
    {
        "GIT_TRACE",
        "GIT_TRACE_CURL",
        "GIT_TRACE_FSMONITOR",
        "GIT_TRACE_PACK_ACCESS",
        "GIT_TRACE_PACKET",
        "GIT_TRACE_PACKFILE",
        "GIT_TRACE_PERFORMANCE",
        "GIT_TRACE_REFS",
        "GIT_TRACE_SETUP",
        "GIT_TRACE_SHALLOW",
        "GIT_TRACE2",
        "GIT_TRACE2_EVENT",
        "GIT_TRACE2_PERF",
    }
)
_STDERR = ("1", "2", "true")


def route_to_stderr(env: dict[str, str]) -> list[int]:
    """Point the trace destinations in `env` that mean git's stderr (or another descriptor) at a duplicate
    of forkctl's stderr; returns the descriptors to pass to the child (the caller closes them once it
    started). A destination forkctl cannot honour (no stderr to duplicate) is dropped."""
    wanted = [name for name in DESTINATIONS if name in env and _is_descriptor(env[name])]
    if not wanted:
        return []
    try:
        fd = os.dup(2)
    except OSError:
        for name in wanted:
            del env[name]
        return []
    for name in wanted:
        env[name] = f"/dev/fd/{fd}"
    return [fd]


def _is_descriptor(value: str) -> bool:
    value = value.strip().lower()
    return value in _STDERR or (len(value) == 1 and value.isdigit() and value != "0")


def log(args: Sequence[str], cwd: str, outcome: str) -> None:
    """One line for one git call, where FORKCTL_TRACE says (nothing when it is unset, empty, 0, false)."""
    where = os.environ.get("FORKCTL_TRACE", "")
    if where.strip().lower() in TRACE_OFF:
        return
    import shlex  # only a traced run pays for these

    from forkctl.redact import clean, inert

    line = inert(clean(f"forkctl trace: git {shlex.join(args)} | cwd {cwd} | {outcome}")) + "\n"
    if where.strip().lower() in _STDERR:
        try:
            sys.stderr.write(line)
            sys.stderr.flush()
        except (OSError, ValueError):
            pass  # a closed stderr ends the trace, not the command
        return
    try:
        with open(where, "a", encoding="utf-8") as out:
            out.write(line)
    except OSError as error:
        raise BadInput(
            f"FORKCTL_TRACE={where!r}: cannot write the trace there ({error.strerror})",
            hint="set FORKCTL_TRACE=1 for stderr, or to a file in a folder that exists and is writable",
        ) from None


def finished(status: int, seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms | exit {status}"
