"""validate's launcher options: where the run happens (here, or as a Slurm job) and what the Slurm job
asks for. Each Slurm option overrides the manifest's `validation.slurm` (forkctl.manifest.validation checks
both alike); the command passes them on as keyword arguments."""

from __future__ import annotations

from typing import Any

import click

LAUNCHER_OPTIONS = [
    click.option(
        "--launcher",
        type=click.Choice(["local", "slurm"]),
        default="local",
        show_default=True,
        help="local: run here (a CUDA host). slurm: submit one batch job (sbatch), follow it and stream its "
        "log, cancel it on Ctrl-C, then check, record and sign the evidence it wrote. The options below "
        "override the manifest's validation.slurm.",
    ),
    click.option("--partition", help="[slurm] The partition (checked with sinfo before submitting)."),
    click.option("--account", help="[slurm] The account to charge."),
    click.option("--time", metavar="LIMIT", help="[slurm] The time limit (minutes, HH:MM:SS, D-HH:MM:SS)."),
    click.option("--nodes", type=int, help="[slurm] Nodes (the GPU suites run on one)."),
    click.option(
        "--gpus-per-node", type=int, help="[slurm] GPUs per node (default: --ep N, else 1; 0 asks for none)."
    ),
    click.option(
        "--container-image",
        metavar="IMAGE",
        help="[slurm] Run the job in this image: a registry reference or an image file (.sqsh, .sif).",
    ),
    click.option(
        "--container",
        type=click.Choice(["pyxis", "apptainer"]),
        help="[slurm] The site's container route: pyxis (srun --container-image, default) or apptainer exec.",
    ),
    click.option(
        "--job-python",
        metavar="PATH",
        help="[slurm] The interpreter on the node that has forkctl, torch and megatron-core "
        "(default: this one, on a shared filesystem).",
    ),
    click.option(
        "--job-dir",
        metavar="DIR",
        help="[slurm] Where the job's private folder goes, on a filesystem the node sees (default: .forkctl/slurm).",
    ),
    click.option(
        "--pending-limit",
        type=int,
        metavar="SECONDS",
        help="[slurm] Give up on a job pending for its nodes being down or drained after this long (default 600).",
    ),
    click.option("--poll", type=float, default=2.0, hidden=True, help="Seconds between Slurm polls."),
]


def launcher_options(func: Any) -> Any:
    for option in reversed(LAUNCHER_OPTIONS):
        func = option(func)
    return func
