"""`forkctl validate --launcher slurm`: the validate run as one Slurm job, followed to its end.

`tools` runs Slurm's commands (sbatch, squeue, scontrol, scancel, sinfo, sacct) through
`forkctl.process`; `request` is what was asked (the manifest's `validation.slurm` under the command
line) and its checks before anything is submitted; `script` writes the batch script and sbatch's
arguments; `follow` polls the job and streams its log; `launch` is the story: check, submit, follow,
cancel on Ctrl-C or SIGTERM, then check the evidence the job wrote and record (and sign) it here.
"""
