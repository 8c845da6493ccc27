"""Run forkctl and SIGKILL it right before its Nth side effect, so kill tests choose where a run dies.

A side effect is a git process started, a file renamed into place (the last step of an atomic write:
a kill there leaves the temp file), a file deleted or a folder tree removed. Run as
`python -m tests.killpoints`: it imports forkctl once, then for each request line on stdin
(JSON: {"argv": [...], "kill_before": N, "anchor": [kind, what] or null, "signal": name or absent})
forks a child that runs
`forkctl <argv>` and kills itself before side effect N (0: never), counted from the first side effect
equal to `anchor` when one is given (so that a run which first sweeps a killed run's leftovers, and so
does more before it, is killed at the same point), and answers one JSON line: {"killed": bool,
"exit_code": int, "events": [[kind, what], ...]}, the side effects the child started. "signal" (e.g.
"SIGTERM") sends that signal instead of SIGKILL, which forkctl may handle. Forking keeps each run free of start-up time and starts
every run from the same process state.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from forkctl.cli import main


def _describe(kind: str, args: tuple[Any, ...]) -> str:
    """The path a file event touches (relative for the files rmtree deletes); "" for a process."""
    if kind == "spawn":
        return ""
    return str(args[1] if kind == "replace" else args[0])


def _arm(kill_before: int, anchor: list[str] | None, report: int, signum: int = signal.SIGKILL) -> None:
    """Wrap every side effect: log it to `report`, and die before number `kill_before` (from `anchor`)."""
    count = 0
    counting = anchor is None

    def tripwire(kind: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            nonlocal count, counting
            counting = counting or [kind, _describe(kind, args)] == anchor
            count += counting
            if counting and count == kill_before:
                os.kill(os.getpid(), signum)
            os.write(report, (json.dumps([kind, _describe(kind, args)]) + "\n").encode())
            return original(*args, **kwargs)

        return wrapped

    os.replace = tripwire("replace", os.replace)
    os.unlink = tripwire("unlink", os.unlink)
    shutil.rmtree = tripwire("rmtree", shutil.rmtree)
    subprocess.Popen.__init__ = tripwire("spawn", subprocess.Popen.__init__)  # type: ignore[method-assign]


def _child(argv: list[str], kill_before: int, anchor: list[str] | None, report: int, signum: int) -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    _arm(kill_before, anchor, report, signum)
    sys.argv = ["forkctl", *argv]
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0
    finally:
        os._exit(code)


def _run(
    argv: list[str], kill_before: int, anchor: list[str] | None, signum: int = signal.SIGKILL
) -> dict[str, Any]:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        _child(argv, kill_before, anchor, write_end, signum)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as stream:
        lines = stream.read().decode().splitlines()
    _, status = os.waitpid(pid, 0)
    return {
        "killed": os.WIFSIGNALED(status),
        "exit_code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
        "events": [json.loads(line) for line in lines],
    }


def serve() -> None:
    for line in sys.stdin:
        request = json.loads(line)
        signum = getattr(signal, request.get("signal", "SIGKILL"))
        answer = _run(request["argv"], request["kill_before"], request.get("anchor"), signum)
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    serve()
