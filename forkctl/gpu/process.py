"""Child processes of `forkctl validate`: each in its own process group, with a time limit that also
ends whatever the child started (torchrun's ranks, a benchmark's workers)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

import msgspec

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
        proc = subprocess.Popen(
            args,
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,
        )
    except OSError as exc:
        raise BadInput(
            f"cannot run {args[0]}: {exc.strerror}", hint="pass --python PATH to a working interpreter"
        ) from None
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        return Finished(None, output or "")
    except BaseException:
        # Ctrl-C or SIGTERM (raised by the CLI) while the child runs in its own session, which no terminal
        # signal reaches: end its whole group rather than leave it running.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    return Finished(proc.returncode, output or "")
