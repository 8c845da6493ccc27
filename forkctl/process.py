"""The one way forkctl runs a child process (git, gh, ssh-keygen, pytest, torchrun, a probe).

Each child runs as an argument list (never through a shell) in a session of its own, so a terminal's
Ctrl-C reaches forkctl and not the child, and forkctl decides what ends: when the time is up, or when
forkctl itself is told to stop (SIGINT, or SIGTERM, which the CLI raises as an exception), the child's
whole process group is killed, grandchildren included (git's remote helpers and ssh, torchrun's ranks, a
shell's background jobs). A group already gone is not an error. Where nothing turns SIGTERM into an
exception (SIGTERM's default disposition), `run` does so while it waits, kills the group, and then dies of
the signal as it would have.

The caller says what a failure means: `run` returns the exit status (`check=True` raises `Failed`), raises
`TimedOut` with what the child wrote before it was killed, and lets OSError (no such program) through.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import msgspec


class Exited(msgspec.Struct, frozen=True):
    """A child that exited: its status and output (text or bytes, as asked)."""

    argv: list[str]
    returncode: int
    stdout: str | bytes
    stderr: str | bytes  # empty when stderr went into stdout (`merge_stderr=True`)


class TimedOut(Exception):
    """The child ran past `timeout` seconds; its group was killed. What it wrote until then is kept."""

    def __init__(self, argv: Sequence[str], timeout: float, stdout: str | bytes, stderr: str | bytes) -> None:
        super().__init__(f"{argv[0]} did not finish within {timeout:.0f} s")
        self.argv, self.timeout, self.stdout, self.stderr = list(argv), timeout, stdout, stderr


class Failed(Exception):
    """`check=True` and the child exited non-zero."""

    def __init__(self, exited: Exited) -> None:
        super().__init__(f"{exited.argv[0]} exited with status {exited.returncode}")
        self.exited = exited


class _Terminated(BaseException):
    """SIGTERM under its default disposition, raised while `run` waits (see the module's docstring)."""


def run(
    argv: Sequence[str],
    *,
    timeout: float,
    input: str | bytes | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | str | None = None,
    text: bool = False,
    merge_stderr: bool = False,
    check: bool = False,
    pass_fds: Sequence[int] = (),
) -> Exited:
    """Run `argv` in its own session and wait for it, at most `timeout` seconds.

    stdin is `input` (EOF at once when None); stdout and stderr are read whole, decoded as UTF-8 with
    replacement when `text`, stderr into stdout when `merge_stderr`; `pass_fds` stay open in the child.
    """
    data = input.encode() if isinstance(input, str) else input
    proc: subprocess.Popen[bytes] | None = None
    try:
        # The handler is in place before the child starts: a SIGTERM while it starts is kept until
        # there is a group to kill (`arm`), never lost between the start and the wait.
        with _sigterm_raises() as arm:
            proc = subprocess.Popen(
                list(argv),
                cwd=str(cwd) if cwd is not None else None,
                env=dict(env) if env is not None else None,
                stdin=subprocess.DEVNULL if input is None else subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
                start_new_session=True,
                pass_fds=tuple(pass_fds),
            )
            arm()
            stdout, stderr = proc.communicate(data, timeout=timeout)
    except subprocess.TimeoutExpired:
        assert proc is not None
        kill_group(proc)
        stdout, stderr = proc.communicate()
        raise TimedOut(argv, timeout, _decoded(stdout, text), _decoded(stderr, text)) from None
    except _Terminated:
        _end(proc)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        raise  # not reached: the default disposition ends the process
    except BaseException:
        _end(proc)
        raise
    done = Exited(list(argv), proc.returncode, _decoded(stdout, text), _decoded(stderr, text))
    if check and done.returncode != 0:
        raise Failed(done)
    return done


def start(
    argv: Sequence[str], *, env: Mapping[str, str] | None = None, pass_fds: Sequence[int] = ()
) -> subprocess.Popen[bytes]:
    """Start `argv` in its own session with pipes to its stdin and stdout (stderr discarded), for a
    child that answers many requests (`git cat-file --batch`). Its owner bounds every answer and ends
    it with `kill_group`; a child whose owner is killed outright sees EOF on its stdin and exits."""
    return subprocess.Popen(
        list(argv),
        env=dict(env) if env is not None else None,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        pass_fds=tuple(pass_fds),
    )


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the child's process group (its session's); a group that already ended is no error."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def _end(proc: subprocess.Popen[bytes] | None) -> None:
    """Kill the child's group and reap it (nothing when it never started)."""
    if proc is not None:
        kill_group(proc)
        proc.wait()


def _no_signal_waiting() -> None:
    """`arm` where `run` leaves SIGTERM to someone else."""


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[Callable[[], None]]:
    """SIGTERM under its default disposition raises `_Terminated` once `arm` was called; one that came
    before (while the child started) is raised by `arm` itself, and one left when the block ends without
    `arm` (the start failed) is sent again under the default disposition, so it is never lost."""
    # Only the main thread may set a handler, and a handler someone installed (the CLI's) is theirs.
    if threading.current_thread() is not threading.main_thread():
        yield _no_signal_waiting
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield _no_signal_waiting
        return
    armed = waiting = False

    def _handle(signum: int, frame: object) -> None:
        nonlocal waiting
        if armed:
            raise _Terminated
        waiting = True

    def arm() -> None:
        nonlocal armed
        armed = True
        if waiting:
            raise _Terminated

    signal.signal(signal.SIGTERM, _handle)
    try:
        yield arm
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if waiting and not armed:
            os.kill(os.getpid(), signal.SIGTERM)


def _decoded(output: bytes | None, text: bool) -> str | bytes:
    output = output or b""
    return output.decode("utf-8", errors="replace") if text else output
