"""A real one-node Slurm cluster for a test: Debian's slurm-wlm 22.05 unpacked under .tools/slurm
(scripts/slurm-setup.sh, `make setup-slurm`), run as the current user, no root.

`running_cluster` (the body of a test's fixture) writes a slurm.conf into the test's tmp folder (auth/none, cred/none, the
current user as SlurmUser and SlurmdUser, private state, spool, pid and log files, free ports, one node
`localhost` with this host's CPUs, a partition `debug`, no accounting), starts `slurmctld -D` and
`slurmd -D` as child processes with SLURM_CONF set, waits until `sinfo` shows the node idle, and at
teardown cancels what is left and stops each daemon by its PID (SIGTERM, wait, SIGKILL if it lingers).
Where Slurm cannot be brought (no apt-get / dpkg-deb, no package lists) the test skips and says why.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PREFIX = REPO / ".tools" / "slurm"
LIBDIR = PREFIX / "usr/lib/x86_64-linux-gnu"
PLUGINS = LIBDIR / "slurm-wlm"
PARTITION = "debug"
NODE = "localhost"
START_TIMEOUT_S = 60


def bring_slurm() -> str | None:
    """Run scripts/slurm-setup.sh once; None when Slurm is there, else why it is not."""
    if (PREFIX / ".ready").is_file():
        return None
    missing = [tool for tool in ("apt-get", "dpkg-deb", "python3") if shutil.which(tool) is None]
    if missing:
        return (
            f"cannot bring Slurm 22.05: {', '.join(missing)} missing (Debian 12 needed; see make setup-slurm)"
        )
    proc = subprocess.run([str(REPO / "scripts/slurm-setup.sh")], capture_output=True, text=True)
    if proc.returncode != 0:
        return f"scripts/slurm-setup.sh failed: {(proc.stderr or proc.stdout).strip()[-400:]}"
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class SlurmCluster:
    """A running cluster: its folder, its environment (SLURM_CONF, PATH, LD_LIBRARY_PATH) and daemons."""

    root: Path
    env: dict[str, str]
    daemons: dict[str, subprocess.Popen] = field(default_factory=dict)

    def run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(argv), env=self.env, capture_output=True, text=True, check=check, timeout=60
        )

    def jobs(self) -> list[str]:
        """Job ids squeue still shows (any state)."""
        out = self.run("squeue", "-h", "-o", "%i").stdout
        return out.split()

    def node_state(self) -> str:
        return self.run("sinfo", "-h", "-n", NODE, "-o", "%T").stdout.strip()

    def wait_idle(self, timeout: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, proc in self.daemons.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited ({proc.returncode}): {self.log_tail(name)}")
            if self.run("sinfo", "-h", "-o", "%T", check=False).stdout.strip() == "idle" and not self.jobs():
                return
            time.sleep(0.3)
        raise RuntimeError(f"the node did not become idle: {self.log_tail('slurmctld')}")

    def log_tail(self, daemon: str) -> str:
        path = self.root / "log" / f"{daemon}.log"
        return path.read_text(errors="replace")[-2000:] if path.is_file() else "(no log)"

    def stop(self) -> None:
        if self.daemons.get("slurmctld") and self.daemons["slurmctld"].poll() is None:
            user = pwd.getpwuid(os.getuid()).pw_name
            with contextlib.suppress(subprocess.TimeoutExpired):  # a controller that is going away
                subprocess.run(["scancel", "--user", user], env=self.env, capture_output=True, timeout=10)
        for proc in reversed(list(self.daemons.values())):
            if proc.poll() is None:
                proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for pid in self.orphans():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def orphans(self) -> list[int]:
        """Processes of this cluster left behind (a step's slurmstepd whose slurmd a test killed): the
        ones whose environment names this cluster's slurm.conf, each by its PID."""
        mark = f"SLURM_CONF={self.env['SLURM_CONF']}".encode()
        found = []
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit() or int(proc.name) == os.getpid():
                continue
            with contextlib.suppress(OSError):
                if mark in (proc / "environ").read_bytes().split(b"\0"):
                    found.append(int(proc.name))
        return found


def slurm_conf(root: Path, user: str, extra: tuple[str, ...] = ()) -> str:
    ctld, slurmd = free_port(), free_port()
    lines = [
        "ClusterName=forkctltest",
        f"SlurmctldHost={NODE}",
        f"SlurmctldPort={ctld}",
        f"SlurmdPort={slurmd}",
        "AuthType=auth/none",
        "CredType=cred/none",
        f"SlurmUser={user}",
        f"SlurmdUser={user}",
        f"StateSaveLocation={root / 'state'}",
        f"SlurmdSpoolDir={root / 'spool'}",
        f"SlurmctldPidFile={root / 'slurmctld.pid'}",
        f"SlurmdPidFile={root / 'slurmd.pid'}",
        f"SlurmctldLogFile={root / 'log/slurmctld.log'}",
        # slurmd works in its log file's folder, where it finds ./slurmstepd (scripts/slurm-setup.sh)
        f"SlurmdLogFile={root / 'spool/slurmd.log'}",
        f"PluginDir={PLUGINS}",
        f"PlugStackConfig={root / 'plugstack.conf'}",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "ReturnToService=2",
        "MpiDefault=none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        "SwitchType=switch/none",
        "MailProg=/bin/true",
        "KillWait=2",
        "MinJobAge=300",
        "InactiveLimit=0",
        f"NodeName={NODE} CPUs={os.cpu_count() or 1} RealMemory=500 State=UNKNOWN",
        f"PartitionName={PARTITION} Nodes={NODE} Default=YES MaxTime=INFINITE State=UP",
        *extra,
    ]
    return "\n".join(lines) + "\n"


def start_cluster(root: Path, extra: tuple[str, ...] = ()) -> SlurmCluster:
    user = pwd.getpwuid(os.getuid()).pw_name
    for sub in ("state", "spool", "log"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "plugstack.conf").write_text("")
    (root / "slurm.conf").write_text(slurm_conf(root, user, extra))
    (root / "spool/slurmstepd").symlink_to(PREFIX / "usr/sbin/slurmstepd-wlm")
    env = dict(os.environ)
    env["SLURM_CONF"] = str(root / "slurm.conf")
    env["PATH"] = os.pathsep.join([str(PREFIX / "usr/bin"), env.get("PATH", "")])
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        [str(PLUGINS), str(LIBDIR), *filter(None, [env.get("LD_LIBRARY_PATH")])]
    )
    for name in [n for n in env if n.startswith(("SLURM_", "SBATCH_", "SQUEUE_", "SINFO_", "SRUN_"))]:
        if name != "SLURM_CONF":
            del env[name]
    cluster = SlurmCluster(root, env)
    sbin = PREFIX / "usr/sbin"
    for name, cwd in (("slurmctld", root / "log"), ("slurmd", root / "spool")):
        argv = [str(sbin / f"{name}-wlm"), "-D"] + (["-i"] if name == "slurmctld" else [])
        out = (root / "log" / f"{name}.out").open("wb")
        cluster.daemons[name] = subprocess.Popen(
            argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        out.close()
    try:
        cluster.wait_idle()
    except BaseException:
        cluster.stop()
        raise
    return cluster


def running_cluster(
    tmp_path_factory: pytest.TempPathFactory, extra: tuple[str, ...] = ()
) -> Iterator[SlurmCluster]:
    """The body of a test module's cluster fixture: skip without Slurm, else start, yield, stop."""
    reason = bring_slurm()
    if reason is not None:
        pytest.skip(reason)
    root = Path(tmp_path_factory.mktemp("slurm"))
    cluster = start_cluster(root, extra)
    try:
        yield cluster
    finally:
        cluster.stop()


def main(argv: list[str]) -> int:
    """`python -m tests.slurmcluster DIR`: start a cluster in DIR (empty or new), write DIR/env.sh (the
    exports that point Slurm's commands at it), and keep it until Ctrl-C or SIGTERM; for running
    `forkctl validate --launcher slurm` by hand, e.g. on a GPU host."""
    if len(argv) != 1:
        print("usage: python -m tests.slurmcluster DIR", file=sys.stderr)
        return 2
    reason = bring_slurm()
    if reason is not None:
        print(reason, file=sys.stderr)
        return 1
    root = Path(argv[0]).resolve()
    cluster = start_cluster(root)
    exports = "".join(
        f"export {name}={shlex.quote(cluster.env[name])}\n"
        for name in ("SLURM_CONF", "PATH", "LD_LIBRARY_PATH")
    )
    (root / "env.sh").write_text(exports)
    print(f"slurm is up: . {root / 'env.sh'}  (Ctrl-C stops it)", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        while all(proc.poll() is None for proc in cluster.daemons.values()):
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
