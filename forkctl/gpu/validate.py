"""A validate run: the GPU tests (and the benchmarks) on the patched package, recorded as evidence.

The story: refuse without CUDA (at once on a host with no NVIDIA driver); copy the installed `megatron/`
package into a scratch folder and apply the series to it (all or nothing, ops/patch_dir); capture the
environment; run `pytest -m gpu` on the manifest's GPU suite with the patched copy first on PYTHONPATH;
run bench/grouped_gemm.py; write the run into <evidence_dir>/<series-digest>.json. Torch is never
imported here: every GPU step is a child process of the target interpreter (--python), so forkctl
itself stays light. Progress goes to a callback: the command decides how to show it.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from forkctl import __version__
from forkctl.errors import BadInput
from forkctl.git.treehash import folder_tree_id
from forkctl.gpu import host, probe, process, signing, source, upstream
from forkctl.gpu.digest import suite_record
from forkctl.gpu.evidence import (
    Environment,
    Run,
    SuiteRecord,
    TestedTree,
    TestOutcome,
    UpstreamRegression,
    environment_tag,
    ep_size,
    evidence_dir,
    now,
    record_run,
    sha256_bytes,
)
from forkctl.gpu.junit import parse_junit, pytest_command, run_pytest, run_status
from forkctl.manifest import Manifest
from forkctl.ops import patch_dir
from forkctl.series import Series

# The contract with tests/gpu: the folder that holds the patched `megatron/` package. The suite may
# use it instead of building its own copy; it is also first on PYTHONPATH.
PATCHED_ENV_VAR = "FORKCTL_PATCHED_MEGATRON"
# The contract with tests/gpu: the folder that holds the unpatched base's `megatron/` (validate --source).
PLAIN_ENV_VAR = "FORKCTL_PLAIN_MEGATRON"
# The contract with tests/multigpu: how many GPUs (expert-parallel ranks) its torchrun launch uses.
EP_ENV_VAR = "FORKCTL_EP"
# NVLink multicast stays off for every child (NCCL NVLS, torch symmetric memory, NVSHMEM).
MULTICAST_OFF = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
DEFAULT_TIMEOUT_S = 300

Progress = Callable[[str], None]


class Options(msgspec.Struct, frozen=True):
    """What `forkctl validate` was asked for (its command-line options)."""

    python: str  # the interpreter that has torch, CUDA and megatron-core
    out: Path | None = None  # the evidence folder; None: the manifest's validation.evidence_dir
    quick: bool = False  # the tests only, no benchmark
    timeout: int = DEFAULT_TIMEOUT_S  # seconds for each stage
    env_suffix: str | None = None  # names a topology in the environment tag (sm90-NAME)
    ep: int | None = None  # run the expert-parallel suite on this many GPUs
    bench_rows: str | None = None  # default: the manifest's validation.benchmark_rows
    keep: bool = False  # keep the scratch folder
    sign_key: Path | None = None
    unsigned: bool = False  # record without signing although the manifest lists allowed signers
    # A `git archive` of the upstream base (megatron/ + tests/): test the fork head built from it, and
    # run upstream's tests on both. None: the installed release with the series applied (not the fork
    # head; the gate refuses such evidence).
    source: Path | None = None
    # The base commit's top-level tree entries, read from upstream (the command reaches it as check-pins
    # does): what the --source archive must hold (gpu/source.py BaseEntries).
    base_entries: Callable[[list[str]], dict[str, str]] | None = None


class Suite(msgspec.Struct, frozen=True):
    """Which tests a validate run covers: the folder, the pytest marker, the GPUs it needs."""

    root: str
    marker: str
    ep: int | None = None  # expert-parallel ranks (--ep), None for the single-GPU suite

    @property
    def gpus(self) -> int:
        return self.ep or 1


class Validated(msgspec.Struct, frozen=True):
    """A recorded run: the run, the evidence file it went into, and how pytest finished."""

    run: Run
    path: Path
    pytest: process.Finished


class _Job(msgspec.Struct, frozen=True):
    """Everything a run needs once the host has passed the checks."""

    manifest: Manifest
    series: Series
    options: Options
    selected: Suite
    suite: SuiteRecord
    folder: Path
    env_suffix: str | None
    installed: Path
    scratch: Path
    progress: Progress
    key: bytes | None = None  # the signing key, read before any tested code ran


def validate(manifest: Manifest, series: Series, options: Options, progress: Progress) -> Validated:
    """Check what can be checked before any GPU work, then run the suite and record the evidence."""
    check_signing(manifest, options.sign_key, options.unsigned)
    key = signing.read_key(options.sign_key) if options.sign_key is not None else None
    selected, env_suffix = select_suite(manifest, options.ep, options.env_suffix)
    suite = suite_record(manifest, selected.root)
    folder = evidence_dir(manifest, options.out)
    scratch = Path(tempfile.mkdtemp(prefix="forkctl-validate-"))
    try:
        if options.source is not None:  # the archive is what it says before anything else is asked
            source.check_whole(options.source)  # a truncated copy is bad input, said before a GPU is asked
            progress(f"checking {options.source.name} against the base commit's tree")
            entries = options.base_entries or source.no_base_entries
            source.checked_base(options.source, series, scratch, manifest.package.folder_name, entries)
        progress(f"checking for CUDA in {options.python}")
        host.require_cuda(options.python, selected.gpus)
        installed = host.installed_megatron(options.python, manifest.package.requirement)
        job = _Job(
            manifest, series, options, selected, suite, folder, env_suffix, installed, scratch, progress, key
        )
        return _record(job)
    finally:
        if options.keep:
            progress(f"kept the scratch folder {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


def check_signing(manifest: Manifest, sign_key: Path | None, unsigned: bool) -> None:
    """Before any test runs: a key when the manifest wants signatures, and the tool to sign with."""
    if manifest.validation.allowed_signers and sign_key is None and not unsigned:
        raise BadInput(
            "the manifest requires signed evidence (validation.allowed_signers) and no key was given",
            hint="pass --sign-key PATH (or set $FORKCTL_SIGNING_KEY) with a key whose public half is listed, "
            "or --unsigned to record now and sign where the key is with forkctl sign",
        )
    if sign_key is None:
        return
    if not sign_key.is_file():
        raise BadInput(
            f"signing key {sign_key} does not exist", hint="check --sign-key / $FORKCTL_SIGNING_KEY"
        )
    if shutil.which("ssh-keygen") is None:
        raise BadInput(
            "--sign-key needs ssh-keygen, which this host lacks",
            hint="install OpenSSH's client tools, or record with --unsigned and sign where the key is: "
            "forkctl sign --key KEY",
        )


def select_suite(manifest: Manifest, ep: int | None, env_suffix: str | None) -> tuple[Suite, str | None]:
    """The suite and the environment-tag suffix: --ep N runs validation.multigpu_tests and tags the run epN."""
    if ep is None:
        if env_suffix is not None and ep_size(f"-{env_suffix}") is not None:
            raise BadInput(
                f"--env-suffix {env_suffix} names an expert-parallel run, but the single-GPU suite would run",
                hint=f"use --ep {ep_size('-' + env_suffix)} to run {manifest.validation.multigpu_tests}",
            )
        return Suite(manifest.validation.gpu_tests, "gpu"), env_suffix
    suffix = f"ep{ep}"
    if env_suffix not in (None, suffix):
        raise BadInput(
            f"--ep {ep} records the run as {suffix}, but --env-suffix {env_suffix} asks for another tag",
            hint=f"drop --env-suffix (--ep {ep} implies {suffix})",
        )
    return Suite(manifest.validation.multigpu_tests, "multigpu", ep), suffix


def patched_copy(series: Series, installed: Path, scratch: Path, package: str) -> tuple[Path, str]:
    """Copy the installed package to scratch/site/<package> (the manifest's package.name) and apply the
    series; (site, what happened)."""
    site = scratch / "site"
    shutil.copytree(installed, site / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    plan = patch_dir.plan(site, series.patches)
    if plan.state == patch_dir.TreeState.PARTIAL:
        failing = [
            f"{v.patch.path.name}: {v.message or v.status}"
            for v in plan.verdicts
            if v.status == patch_dir.PatchStatus.CONFLICT
        ]
        raise BadInput(
            f"the series does not apply to the installed package at {installed}: "
            + "; ".join(failing or ["partial"]),
            hint="install the megatron-core release cut from the manifest's upstream.base (or closest to it), or port the series",
        )
    if plan.state == patch_dir.TreeState.APPLIED:
        return site, f"{installed} already carries the series: copied as is"
    applied = patch_dir.execute(plan)
    return site, f"applied {len(applied)} patch(es) to a copy of {installed}"


def child_env(
    manifest: Manifest, site: Path, ep: int | None = None, plain: Path | None = None
) -> dict[str, str]:
    """The environment of every GPU child: allow-listed (no token, no key path: `process.sealed_env`),
    the patched copy first on PYTHONPATH, multicast off."""
    env = process.sealed_env()
    if plain is not None:
        env[PLAIN_ENV_VAR] = str(plain)
    else:
        env.pop(PLAIN_ENV_VAR, None)
    env.update(MULTICAST_OFF)
    if ep is not None:
        env[EP_ENV_VAR] = str(ep)
    else:
        env.pop(EP_ENV_VAR, None)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(site), str(manifest.root), *filter(None, [env.get("PYTHONPATH")])]
    )
    env[PATCHED_ENV_VAR] = str(site)
    env.setdefault("PYTHONDONTWRITEBYTECODE", "1")  # keep __pycache__ out of the suite folder
    return env


def pytest_args(python: str, suite: Suite, junit: Path) -> list[str]:
    return pytest_command(python, ["-m", suite.marker, suite.root], junit, "-rfEs")


def environment_from_probe(output: str, tag_suffix: str | None = None) -> Environment:
    """Turn the probe's JSON (its last stdout line) into an Environment with its tag."""
    lines = [line for line in output.strip().splitlines() if line.startswith("{")]
    if not lines:
        raise BadInput(f"the environment probe printed no JSON: {output.strip()[-500:]}")
    data = json.loads(lines[-1])
    return Environment(tag=environment_tag(data["compute_capability"], tag_suffix), **data)


def _probe(python: str, env: dict[str, str], tag_suffix: str | None) -> Environment:
    # The probe's text goes to `-c` (see forkctl.gpu.probe): the target interpreter need not have forkctl.
    source = Path(probe.__file__).read_text(encoding="utf-8")
    finished = process.run([python, "-c", source], timeout=300, env=env)
    if finished.returncode != 0:
        raise BadInput(f"the environment probe failed:\n{finished.tail(10)}")
    return environment_from_probe(finished.output, tag_suffix)


def prepare_trees(job: _Job) -> source.PreparedTrees:
    """The package under test: the fork head from the base archive, or the installed release patched."""
    package = job.manifest.package.folder_name
    if job.options.source is not None:
        prepared = source.from_base_archive(  # checked and extracted by validate() already
            job.options.source, job.series, job.installed, job.scratch, package
        )
        job.progress(
            f"built the fork head from {job.options.source.name} (upstream {job.series.base[:12]}): "
            f"{package}/ tree {prepared.tested.package_tree[:12]}"
        )
        return prepared
    site, how = patched_copy(job.series, job.installed, job.scratch, package)
    job.progress(how + "; this is not the fork head: pass --source to test the tree consumers pin")
    tested = TestedTree(source="installed", package_tree=folder_tree_id(site / package))
    return source.PreparedTrees(site=site, tested=tested)


def _upstream_regression(
    job: _Job, prepared: source.PreparedTrees, env: dict[str, str]
) -> UpstreamRegression | None:
    paths = job.manifest.validation.upstream_tests
    if not paths or prepared.base_root is None or prepared.head_root is None or job.selected.ep is not None:
        return None
    roots = (prepared.base_root, prepared.head_root)
    return upstream.regression(
        job.options.python, paths, roots, env, prepared.site, job.options.timeout, job.progress
    )


def _record(job: _Job) -> Validated:
    """Build the tested trees, probe, run the tests and benchmarks, write (and sign) the evidence."""
    options = job.options
    started = now()
    prepared = prepare_trees(job)
    site = prepared.site
    env = child_env(job.manifest, site, job.selected.ep, prepared.plain)
    environment = _probe(options.python, env, job.env_suffix)
    tested = prepared.tested
    if tested.source == "installed":
        tested = msgspec.structs.replace(tested, distribution=f"megatron-core {environment.megatron_core}")
    host.require_gpu_count(options.python, environment.gpu_count, job.selected.gpus)
    job.progress(
        f"running the GPU tests in {job.selected.root} on {environment.gpu_name} ({environment.tag})"
    )
    finished, tests, junit_bytes = _run_tests(job, env)
    regression = _upstream_regression(job, prepared, env)
    plot = job.folder / f"{job.series.digest}-{environment.tag}.png"
    bench = _benchmarks(job, env, site, plot)
    status = run_status(tests, finished.returncode or 0)
    run = Run(
        status=status if regression is None or regression.ok else "failed",
        environment=environment,
        gpu_tests=job.suite,
        tests=tests,
        pytest_exit_code=finished.returncode or 0,
        started_at=started,
        finished_at=now(),
        forkctl_version=__version__,
        benchmark=bench,
        plot=plot.name if plot.is_file() else None,
        report_sha256=sha256_bytes(junit_bytes) if junit_bytes else None,
        tested=tested,
        upstream_tests=regression,
    )
    path = record_run(job.manifest, job.series, run, job.folder)
    if options.sign_key is not None and job.key is not None:  # in this process, after every test
        signature = signing.sign_with(path, job.key, options.sign_key.name)
        job.progress(f"signed {path.name} with {options.sign_key.name}: {signature.name}")
    return Validated(run, path, finished)


def _run_tests(job: _Job, env: dict[str, str]) -> tuple[process.Finished, list[TestOutcome], bytes]:
    """pytest on the suite: how it finished, the parsed outcomes, and the raw JUnit XML they came from."""
    junit = job.scratch / "junit.xml"
    args = pytest_args(job.options.python, job.selected, junit)
    timeout = job.options.timeout
    finished = run_pytest(
        args,
        junit,
        timeout,
        env,
        job.manifest.root,
        "the GPU tests",
        "raise --timeout, or find the hanging test",
    )
    return finished, parse_junit(junit), junit.read_bytes()


def _benchmarks(job: _Job, env: dict[str, str], site: Path, plot: Path) -> dict[str, Any]:
    """The grouped-GEMM benchmark (single-GPU suite only) and the end-to-end MoELayer one, unless --quick."""
    validation = job.manifest.validation
    if validation.benchmark is None:
        skipped = "no validation.benchmark in the manifest"
    else:
        skipped = "--quick" if job.selected.ep is None else "--ep: the grouped-GEMM benchmark runs on one GPU"
    bench: dict[str, Any] = {"status": "skipped", "detail": skipped}
    if job.options.quick:
        return bench
    if job.selected.ep is None and validation.benchmark is not None:
        job.progress(f"running the benchmark {validation.benchmark}")
        job.folder.mkdir(parents=True, exist_ok=True)
        out = job.scratch / "bench.json"
        rows = job.options.bench_rows or validation.benchmark_rows
        args = ["--out", str(out), "--rows", rows, "--plot", str(plot)]
        bench = _run_json_script(job, env, validation.benchmark, args, out)
    if validation.layer_benchmark is None:
        return bench
    ep = job.selected.ep or 1
    job.progress(f"running the end-to-end MoELayer benchmark at EP={ep}")
    # bench/moe_layer.py starts torchrun itself for EP > 1; it exits 1 when the arms disagree, with the
    # figures written, so they are kept.
    out = job.scratch / f"moe-layer-ep{ep}.json"
    args = ["--megatron", str(site), "--ep", str(ep), "--out", str(out)]
    bench["moe_layer"] = _run_json_script(
        job, env, validation.layer_benchmark, args, out, json_on_failure=True
    )
    return bench


def _run_json_script(
    job: _Job, env: dict[str, str], script: str, args: list[str], out: Path, *, json_on_failure: bool = False
) -> dict[str, Any]:
    """Run a benchmark script of the toolkit that writes JSON to `out`: its JSON, or why there is none.
    `json_on_failure`: a failing exit still wrote figures worth keeping (e.g. a parity verdict)."""
    root = job.manifest.root
    if not (root / script).is_file():
        return {"status": "missing", "detail": f"{script} not found"}
    command = [job.options.python, str(root / script), *args]
    finished = process.run(command, timeout=job.options.timeout, env=env, cwd=root)
    if not out.is_file() or (finished.returncode != 0 and not json_on_failure):
        what = "timed out" if finished.returncode is None else f"exit code {finished.returncode}"
        return {"status": "crashed", "detail": what, "output_tail": finished.tail(20)}
    data: dict[str, Any] = json.loads(out.read_text())
    return data
