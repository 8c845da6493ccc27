"""Slurm's client commands, each run through `forkctl.process` (an argument list, never a shell; every
value a separate argument), with a time limit. What they answer is parsed here into plain values."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import msgspec

from forkctl import process
from forkctl.errors import BadInput

TIMEOUT_S = 60
NEEDED = ("sbatch", "squeue", "scontrol", "scancel", "sinfo")
SETUP_HINT = (
    "run forkctl on a Slurm login node (Slurm's client commands on PATH); for a local test cluster: "
    "make setup-slurm (Debian 12)"
)
# A key of `scontrol show job -o` output: `Key=` at the start or after a space.
_KEY = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_:/]*)=")


class JobInfo(msgspec.Struct, frozen=True):
    """What Slurm says about a job now."""

    job_id: str
    state: str  # PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL...
    reason: str = ""  # why it pends or ended (None when nothing to say)
    exit_code: str = ""  # "code:signal", e.g. 2:0
    nodes: str = ""  # the node list once it runs


class Slurm(msgspec.Struct, frozen=True):
    """The client commands found on PATH."""

    paths: dict[str, str]
    sacct: str | None = None

    def run(self, name: str, *args: str, check: bool = True) -> str:
        program = self.paths.get(name) or (self.sacct if name == "sacct" else None)
        if program is None:
            raise BadInput(f"{name} is not on PATH", hint=SETUP_HINT)
        try:
            done = process.run([program, *args], timeout=TIMEOUT_S, text=True)
        except OSError as exc:
            raise BadInput(f"cannot run {program}: {exc.strerror}", hint=SETUP_HINT) from None
        except process.TimedOut:
            raise BadInput(
                f"{name} did not answer within {TIMEOUT_S} s", hint="is slurmctld up? try: sinfo"
            ) from None
        if check and done.returncode != 0:
            detail = (str(done.stderr) or str(done.stdout)).strip()
            raise BadInput(f"{name} {' '.join(args[:1])} failed: {detail[-600:]}", hint="check with: sinfo")
        return str(done.stdout)

    def partitions(self) -> list[str]:
        names = self.run("sinfo", "-h", "-a", "-o", "%R").split()
        return sorted(set(names))

    def submit(self, options: list[str], script: Path) -> str:
        """sbatch --parsable: the job id (a cluster name after ';' is dropped)."""
        out = self.run("sbatch", "--parsable", *options, str(script)).strip()
        job_id = out.splitlines()[-1].split(";")[0] if out else ""
        if not job_id.isdigit():
            raise BadInput(f"sbatch did not answer with a job id: {out[-300:]!r}")
        return job_id

    def job(self, job_id: str) -> JobInfo | None:
        """scontrol show job; sacct where accounting exists and scontrol no longer knows the job."""
        out = self.run("scontrol", "show", "job", "-o", job_id, check=False)
        fields = parse_fields(out)
        if "JobState" in fields:
            return JobInfo(
                job_id,
                fields["JobState"].split()[0],
                fields.get("Reason", "").replace("_", " "),  # scontrol writes its spaces as _
                fields.get("ExitCode", ""),
                fields.get("NodeList", ""),
            )
        if self.sacct is None:
            return None
        rows = self.run("sacct", "-n", "-P", "-X", "-j", job_id, "-o", "State,ExitCode,NodeList", check=False)
        for row in rows.splitlines():
            state, _, rest = row.partition("|")
            exit_code, _, nodes = rest.partition("|")
            if state:
                return JobInfo(job_id, state.split()[0], "", exit_code, nodes)
        return None

    def in_queue(self, job_id: str) -> bool:
        return bool(self.run("squeue", "-h", "-j", job_id, "-o", "%i", check=False).strip())

    def cancel(self, job_id: str) -> None:
        self.run("scancel", job_id, check=False)

    def node_reasons(self, partition: str | None) -> list[str]:
        """`node (state): reason` for every node Slurm holds a reason for (drained, down, failing)."""
        args = ["-h", "-R", "-o", "%n|%T|%E"] + (["-p", partition] if partition else [])
        lines = []
        for row in self.run("sinfo", *args, check=False).splitlines():
            node, state, reason = [*row.split("|", 2), "", ""][:3]
            if node:
                lines.append(f"{node} ({state}): {reason}")
        return lines


def find() -> Slurm:
    """Slurm's client commands on PATH, or exit 2 naming the first one missing."""
    paths = {name: shutil.which(name) for name in NEEDED}
    missing = [name for name, path in paths.items() if path is None]
    if missing:
        raise BadInput(f"{', '.join(missing)} not found on PATH: Slurm is not here", hint=SETUP_HINT)
    return Slurm({name: str(path) for name, path in paths.items()}, shutil.which("sacct"))


def parse_fields(text: str) -> dict[str, str]:
    """`Key=Value Key=Value with spaces ...` (scontrol's one-line form) as a dict."""
    text = text.strip()
    matches = list(_KEY.finditer(text))
    ends = [m.start() for m in matches[1:]] + [len(text)]
    fields: dict[str, str] = {}
    for here, end in zip(matches, ends, strict=True):
        fields.setdefault(here.group(1), text[here.end() : end].strip())
    return fields
