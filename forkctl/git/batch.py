"""One long-lived `git cat-file --batch` per repository: object reads without a process each.

A check reads many small objects of one repository (a `.gitmodules` blob per link, the fork-base file,
a consumer's own files); a snapshot reads every file of a folder. Each read used to be one `git
cat-file blob` process (a few milliseconds of start-up each); here the repository's reader sends the
object's name on one line and reads `<name> <type> <size>` and the bytes back, the protocol git
documents for `--batch`.

The process is started on the first read, hermetic like every git forkctl runs (`runner.argv`,
`runner.hermetic_env`), in its own process group. A read of contents is what `git cat-file blob` was: in
a cache (a partial clone) git fetches a blob it lacks from the cache's promisor remote, one object, as
it did for every read before; existence questions never fetch (`objects.Objects`, `NO_LAZY_FETCH`). When
that fetch fails, git 2.39 ends the whole batch: the reader then answers "not here" for that object and
starts a new process for the next read. Every answer is bounded by the runner's time limit: a reader that stops answering is killed
with its group (`process.kill_group`). The repository object closes its reader when it is dropped, and
at exit at the latest.
"""

from __future__ import annotations

import os
import selectors
import subprocess
import time
from pathlib import Path

from forkctl import process
from forkctl.git.runner import GitTimeout, argv, hermetic_env, network_timeout, trace_wanted


class ObjectReader:
    """`git cat-file --batch` of one git dir, started on the first read."""

    def __init__(self, git_dir: Path) -> None:
        self.git_dir = git_dir
        self._proc: subprocess.Popen[bytes] | None = None
        self._buffer = bytearray()
        self._started_at = (0, 0)  # `_stamp()` when the process started

    def read(self, name: str) -> tuple[str, bytes] | None:
        """(type, contents) of the object `name` (an object name, `<tree-ish>:<path>`), or None when
        this repository has no such object. `name` must not hold a newline (the protocol is lines)."""
        if "\n" in name:
            raise ValueError(
                "an object name holds no newline: cat-file's batch protocol reads one name a line"
            )
        proc = self._started()
        deadline = time.monotonic() + network_timeout()
        try:
            assert proc.stdin is not None
            proc.stdin.write(f"{name}\n".encode())
            proc.stdin.flush()
            header = self._line(deadline)
            if header is None or header.endswith((b" missing", b" ambiguous")):
                return None if header is not None else self._ended()
            _, kind, size = header.decode().rsplit(" ", 2)
            data = self._exactly(int(size) + 1, deadline)  # the contents, then a newline
        except (BrokenPipeError, ConnectionResetError):
            return self._ended()  # git stopped at an object a partial clone lacks and could not fetch
        return (kind, data[:-1]) if data is not None else self._ended()

    def close(self) -> None:
        if self._proc is not None:
            process.kill_group(self._proc)
            self._proc.wait()
            for stream in (self._proc.stdin, self._proc.stdout):
                if stream is not None:
                    stream.close()
            self._proc = None
        self._buffer.clear()

    def _started(self) -> subprocess.Popen[bytes]:
        stamp = self._stamp()
        if self._proc is not None and stamp != self._started_at:
            # git reads the alternates once, when it starts: one named since (a cache given a local
            # clone to borrow from, `clonecache`) is seen only by a new process. A new pack, too, is read
            # at once by a new process, where a running one would first try the promisor remote.
            self.close()
        if self._proc is None:
            args = ["--git-dir", str(self.git_dir), "cat-file", "--batch"]
            env = hermetic_env()
            tracing = trace_wanted(env)
            if tracing:  # only a traced run imports the trace module
                from forkctl.git import trace
            trace_fds = trace.route_to_stderr(env) if tracing else []
            try:
                self._proc = process.start(argv(args), env=env, pass_fds=trace_fds)
            finally:
                for fd in trace_fds:
                    os.close(fd)
            if tracing:
                trace.log(args, str(Path.cwd()), "started (answers until closed)")
            self._started_at = stamp
        return self._proc

    def _stamp(self) -> tuple[int, int]:
        """When the repository's alternates and packs last changed (0 where it has none)."""
        objects = self.git_dir / "objects"
        found = []
        for path in (objects / "info" / "alternates", objects / "pack"):
            try:
                found.append(os.stat(path).st_mtime_ns)
            except OSError:
                found.append(0)
        return found[0], found[1]

    def _ended(self) -> tuple[str, bytes] | None:
        """The process ended (an object a partial clone lacks and could not fetch): that object is not
        here (None, what `read` answers); the next read starts a new process."""
        self.close()
        return None

    def _line(self, deadline: float) -> bytes | None:
        while b"\n" not in self._buffer:
            if not self._fill(deadline):
                return None
        line, _, rest = bytes(self._buffer).partition(b"\n")
        self._buffer[:] = rest
        return line

    def _exactly(self, size: int, deadline: float) -> bytes | None:
        while len(self._buffer) < size:
            if not self._fill(deadline):
                return None
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data

    def _fill(self, deadline: float) -> bool:
        """Read what git has written (up to 1 MiB) into the buffer; False at the end of its output."""
        assert self._proc is not None and self._proc.stdout is not None
        stdout = self._proc.stdout
        with selectors.DefaultSelector() as selector:
            selector.register(stdout, selectors.EVENT_READ)
            if not selector.select(max(0.0, deadline - time.monotonic())):
                self.close()
                raise GitTimeout(f"git cat-file did not answer within {network_timeout():.0f} s")
        chunk = os.read(stdout.fileno(), 1 << 20)
        self._buffer += chunk
        return bool(chunk)
