"""`forkctl validate --launcher slurm`, the story: refuse bad input before anything is submitted (Slurm's
commands missing, an unknown partition, a missing image file, options validate itself refuses); write the
batch script into a job-private folder (temp file + rename) on a filesystem the node sees; submit it with
`sbatch --parsable`; follow the job, its log streamed as progress; on Ctrl-C or SIGTERM cancel it
(`scancel`) and wait until the queue no longer shows it. When it ends, the evidence the job wrote is
checked (`returned`) and recorded into the evidence folder here, and signed here where the key is. A job
that failed, was cancelled, hit its time limit, lost its node or waited on a drained one is a `JobFailed`
(id, state, exit code, reason, the nodes' reasons, the log's tail); nothing is recorded for it, and the
job's folder is removed either way (unless --keep).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import msgspec

from forkctl.files import atomic_write, atomic_write_text
from forkctl.gpu import process, signing
from forkctl.gpu import validate as gpu_validate
from forkctl.gpu.digest import suite_record
from forkctl.gpu.evidence import evidence_dir, record_run
from forkctl.manifest import Manifest
from forkctl.manifest.validation import SlurmSettings
from forkctl.series import Series
from forkctl.slurm import request, script, tools
from forkctl.slurm.follow import Followed, Progress, follow
from forkctl.slurm.returned import Expected, returned_run

GONE_WAIT_S = 30
TAIL_LINES = 40


class Job(msgspec.Struct, frozen=True):
    """What the job is to do: the settings it runs under, validate's options on the node, how often to poll."""

    settings: SlurmSettings
    passed: list[str]  # validate's options for the node (--quick, --ep N, --timeout ...)
    poll_s: float = 2.0


class JobFailed(msgspec.Struct, frozen=True):
    """A job that gave no evidence: how it ended and what its log says."""

    job_id: str
    state: str
    exit_code: str
    reason: str
    detail: str  # what forkctl concluded
    log_tail: str
    node_reasons: list[str] = msgspec.field(default_factory=list)


class Launched(msgspec.Struct, frozen=True):
    job_id: str
    validated: gpu_validate.Validated | None = None
    failed: JobFailed | None = None


def validate(
    manifest: Manifest, series: Series, options: gpu_validate.Options, job: Job, progress: Progress
) -> Launched:
    """Check, submit, follow, collect: the Slurm form of `forkctl.gpu.validate.validate`."""
    gpu_validate.check_signing(manifest, options.sign_key, options.unsigned)
    selected, env_suffix = gpu_validate.select_suite(manifest, options.ep, options.env_suffix)
    expected = Expected(suite_record(manifest, selected.root), env_suffix, options.source is not None)
    gpus = request.gpus_per_node(job.settings, options.ep)
    slurm = tools.find()
    request.check(job.settings, slurm, manifest.root)
    parent = request.job_parent(job.settings, manifest.root)
    parent.mkdir(parents=True, exist_ok=True)
    files = script.JobFiles(Path(tempfile.mkdtemp(prefix="job-", dir=parent)))
    try:
        job_id = _submit(manifest, job, gpus, files, slurm)
        progress(f"submitted Slurm job {job_id}; its log: {files.log}")
        followed = _follow_or_cancel(slurm, job_id, files, job, progress)
        return _collect(manifest, series, options, expected, files, followed, slurm)
    finally:
        if options.keep:
            progress(f"kept the job folder {files.folder}")
        else:
            shutil.rmtree(files.folder, ignore_errors=True)


def _submit(manifest: Manifest, job: Job, gpus: int, files: script.JobFiles, slurm: tools.Slurm) -> str:
    files.evidence.mkdir()
    image = job.settings.container_image
    image = request.image_path(image, manifest.root) if image is not None else None
    args = script.validate_args(manifest.path, files.evidence, job.passed)
    text = script.batch_script(job.settings, manifest.root, request.job_python(job.settings), args, image)
    atomic_write_text(files.script, text)
    return slurm.submit(script.sbatch_options(job.settings, gpus, files, manifest.root), files.script)


def _follow_or_cancel(
    slurm: tools.Slurm, job_id: str, files: script.JobFiles, job: Job, progress: Progress
) -> Followed:
    try:
        followed = follow(slurm, job_id, files.log, progress, job.poll_s, job.settings.pending_limit)
    except BaseException:  # Ctrl-C, SIGTERM (raised by the CLI), or Slurm stopped answering
        progress(f"cancelling Slurm job {job_id}")
        cancel(slurm, job_id)
        raise
    if followed.stuck:
        progress(f"cancelling Slurm job {job_id}: still pending ({followed.info.reason})")
        cancel(slurm, job_id)
    return followed


def cancel(slurm: tools.Slurm, job_id: str) -> None:
    """scancel, then wait (bounded) until squeue no longer shows the job."""
    slurm.cancel(job_id)
    deadline = time.monotonic() + GONE_WAIT_S
    while slurm.in_queue(job_id) and time.monotonic() < deadline:
        time.sleep(0.5)


def _collect(
    manifest: Manifest,
    series: Series,
    options: gpu_validate.Options,
    expected: Expected,
    files: script.JobFiles,
    followed: Followed,
    slurm: tools.Slurm,
) -> Launched:
    info = followed.info
    log = files.log.read_text(errors="replace") if files.log.is_file() else ""
    tail = "\n".join(log.strip().splitlines()[-TAIL_LINES:])
    # validate exits 1 when tests failed and still records the run (the gate rejects it), as locally.
    tests_ran = info.state == "COMPLETED" or (info.state == "FAILED" and info.exit_code.startswith("1:"))
    if followed.stuck:
        detail = f"the job waited past its pending limit for a reason no waiting cures: {info.reason}"
        return _failed(info, detail, tail, slurm.node_reasons(None))
    if not tests_ran:
        return _failed(
            info, _ended(info), tail, slurm.node_reasons(None) if info.state == "NODE_FAIL" else []
        )
    run = returned_run(manifest, series, files, expected)
    if isinstance(run, str):
        return _failed(info, run, tail, [])
    folder = evidence_dir(manifest, options.out)
    path = record_run(manifest, series, run, folder)
    if run.plot and (files.evidence / run.plot).is_file():
        atomic_write(folder / run.plot, (files.evidence / run.plot).read_bytes())
    if options.sign_key is not None:
        signing.sign(path, options.sign_key)
    finished = process.Finished(run.pytest_exit_code, log)
    return Launched(info.job_id, validated=gpu_validate.Validated(run, path, finished))


def _ended(info: tools.JobInfo) -> str:
    what = {
        "TIMEOUT": "hit its time limit",
        "CANCELLED": "was cancelled",
        "NODE_FAIL": "lost its node",
        "FAILED": "failed",
        "OUT_OF_MEMORY": "ran out of memory",
        "PREEMPTED": "was preempted",
    }.get(info.state, f"ended {info.state}")
    return f"the job {what} and wrote no evidence"


def _failed(info: tools.JobInfo, detail: str, tail: str, nodes: list[str]) -> Launched:
    failed = JobFailed(info.job_id, info.state, info.exit_code, info.reason, detail, tail, nodes)
    return Launched(info.job_id, failed=failed)
