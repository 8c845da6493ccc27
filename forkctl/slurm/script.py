"""The batch script of a validate job, and the sbatch options that go with it.

The script's every value (paths, the interpreter, the image, forkctl's arguments) is quoted with
`shlex.quote`; the allocation's options (partition, account, time, GPUs, the log file) are sbatch
arguments, not `#SBATCH` lines, so no user string is parsed twice. On the node the script finds the
rendezvous host (the first of `scontrol show hostnames $SLURM_JOB_NODELIST`), exports it as
MASTER_ADDR with a port derived from the job id, and starts forkctl validate there with `srun` (one
task; validate's own torchrun starts one rank per GPU for --ep), inside the container where one is given:
pyxis (`srun --container-image`) or Apptainer (`apptainer exec --nv`).
"""

from __future__ import annotations

import shlex
from pathlib import Path

import msgspec

from forkctl import __version__
from forkctl.manifest.validation import SlurmSettings

JOB_NAME = "forkctl-validate"
ON_HEAD_NODE = '--nodelist="$head_node"'  # srun's option, expanded by the job's shell


class JobFiles(msgspec.Struct, frozen=True):
    """The job's private folder and what goes in it."""

    folder: Path

    @property
    def script(self) -> Path:
        return self.folder / "job.sh"

    @property
    def log(self) -> Path:
        return self.folder / "job.log"

    @property
    def evidence(self) -> Path:
        return self.folder / "evidence"


def sbatch_options(chosen: SlurmSettings, gpus: int, files: JobFiles, root: Path) -> list[str]:
    """sbatch's arguments (each `--option=value`, so no value is read as an option)."""
    options = [
        f"--job-name={JOB_NAME}",
        f"--nodes={chosen.nodes}",
        "--ntasks-per-node=1",
        f"--output={files.log}",
        f"--chdir={root}",
        "--export=ALL",
        "--no-requeue",  # a lost node is reported, not hidden behind a rerun that overwrites the log
    ]
    if gpus > 0:
        options.append(f"--gpus-per-node={gpus}")
    for key in ("partition", "account", "time"):
        value = getattr(chosen, key)
        if value is not None:
            options.append(f"--{key}={value}")
    return options


def container_prefix(chosen: SlurmSettings, image: str | None, root: Path) -> tuple[list[str], list[str]]:
    """(srun options, command prefix) that run the job's command in the container, if any."""
    if image is None:
        return [], []
    if chosen.container == "pyxis":
        mounts = f"{root}:{root}"
        return [
            f"--container-image={image}",
            f"--container-mounts={mounts}",
            f"--container-workdir={root}",
        ], []
    return [], ["apptainer", "exec", "--nv", "--bind", str(root), image]


def batch_script(
    chosen: SlurmSettings, root: Path, job_python: str, forkctl_args: list[str], image: str | None
) -> str:
    """The script sbatch runs on the first node of the allocation."""
    srun_options, prefix = container_prefix(chosen, image, root)
    command = [*prefix, job_python, "-m", "forkctl", *forkctl_args]
    srun = ["srun", "--nodes=1", "--ntasks=1", *srun_options]
    lines = [
        "#!/bin/bash",
        f"# forkctl {__version__}: validate --launcher slurm (one job, written by forkctl; do not edit)",
        "set -euo pipefail",
        f"cd -- {shlex.quote(str(root))}",
        'head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        'export MASTER_ADDR="$head_node" MASTER_PORT=$((20000 + SLURM_JOB_ID % 20000))',
        'echo "forkctl: job $SLURM_JOB_ID on $SLURM_JOB_NODELIST, rendezvous $MASTER_ADDR:$MASTER_PORT"',
        f"{shlex.join(srun)} {ON_HEAD_NODE} {shlex.join(command)}",
        "",
    ]
    return "\n".join(lines)


def validate_args(manifest_path: Path, evidence: Path, passed: list[str]) -> list[str]:
    """forkctl's arguments on the node: this manifest, the job's evidence folder, unsigned (signing is
    done here, where the key is), and the validate options the user gave."""
    return ["--manifest", str(manifest_path), "validate", "--out", str(evidence), "--unsigned", *passed]
