"""Following a submitted job: its state from Slurm, its log streamed line by line as progress, until it
ends, or until it has waited `pending_limit` seconds for a reason no waiting cures (its nodes down or
drained, its partition down). The caller cancels the job on Ctrl-C or SIGTERM."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from forkctl.slurm.tools import JobInfo, Slurm

Progress = Callable[[str], None]
ENDED = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "PREEMPTED",
        "OUT_OF_MEMORY",
        "BOOT_FAIL",
        "DEADLINE",
    }
)
# Pending reasons that an administrator, not time, resolves (Slurm 22.05's wording).
STUCK = (
    "ReqNodeNotAvail",
    "Nodes required for job are DOWN",
    "NodeDown",
    "PartitionDown",
    "PartitionInactive",
    "PartitionNodeLimit",
    "PartitionConfig",
    "BadConstraints",
)
LOST_AFTER_S = 30  # a job Slurm no longer knows (no accounting) for this long is reported as lost


class Followed(msgspec.Struct, frozen=True):
    """How the job ended: its last state, and whether forkctl gave up waiting for its node."""

    info: JobInfo
    stuck: bool = False  # pending past the limit for a reason in STUCK


class LogStream:
    """The job's log, read from where the last read stopped; each whole new line goes to progress."""

    def __init__(self, path: Path, progress: Progress) -> None:
        self.path, self.progress, self.offset, self.partial = path, progress, 0, b""

    def pump(self, final: bool = False) -> None:
        try:
            with self.path.open("rb") as handle:
                handle.seek(self.offset)
                data = handle.read()
        except FileNotFoundError:
            return
        self.offset += len(data)
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()
        if final and self.partial:
            lines.append(self.partial)
            self.partial = b""
        for line in lines:
            self.progress("job: " + line.decode("utf-8", errors="replace").rstrip("\r"))


def stuck(info: JobInfo) -> bool:
    return info.state == "PENDING" and info.reason.startswith(STUCK)


def follow(
    slurm: Slurm, job_id: str, log: Path, progress: Progress, poll_s: float, pending_limit: int
) -> Followed:
    """Poll until the job ends; stream its log meanwhile."""
    stream = LogStream(log, progress)
    seen, stuck_since, unknown_since = "", None, None
    while True:
        info = slurm.job(job_id)
        stream.pump()
        now = time.monotonic()
        if info is None:
            unknown_since = unknown_since or now
            if now - unknown_since > LOST_AFTER_S:
                return Followed(JobInfo(job_id, "UNKNOWN", "Slurm no longer knows the job"))
            time.sleep(poll_s)
            continue
        said = f"job {job_id} {info.state}" + (f" ({info.reason})" if info.reason not in ("", "None") else "")
        if info.state == "RUNNING" and info.nodes:
            said += f" on {info.nodes}"
        if said != seen:
            progress(said)
            seen = said
        if info.state in ENDED:
            stream.pump(final=True)
            return Followed(info)
        stuck_since = (stuck_since or now) if stuck(info) else None
        if stuck_since is not None and now - stuck_since >= pending_limit:
            return Followed(info, stuck=True)
        time.sleep(poll_s)
