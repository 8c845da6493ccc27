"""Child processes of `forkctl validate` (pytest, torchrun, the benchmark, interpreter probes): through
forkctl.process, each in its own process group, with a time limit that also ends whatever the child
started (torchrun's ranks, a benchmark's workers); stdout and stderr read as one text."""

from __future__ import annotations

from pathlib import Path

import msgspec

from forkctl import process
from forkctl.errors import BadInput


class Finished(msgspec.Struct, frozen=True):
    """A child process that ended (or was killed at the time limit)."""

    returncode: int | None  # None: killed at the time limit
    output: str  # stdout and stderr, interleaved

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.output.strip().splitlines()[-lines:])


def run(
    args: list[str], timeout: float, env: dict[str, str] | None = None, cwd: Path | None = None
) -> Finished:
    """Run a child in its own process group, so a timeout also ends whatever it started."""
    try:
        done = process.run(args, timeout=timeout, env=env, cwd=cwd, text=True, merge_stderr=True)
    except OSError as exc:
        raise BadInput(
            f"cannot run {args[0]}: {exc.strerror}", hint="pass --python PATH to a working interpreter"
        ) from None
    except process.TimedOut as late:
        return Finished(None, str(late.stdout))
    return Finished(done.returncode, str(done.stdout))
