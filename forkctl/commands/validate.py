"""forkctl validate: run the GPU tests (and the grouped-GEMM benchmark) on the patched package, record evidence.

The story: refuse without CUDA (at once on a host with no NVIDIA driver); copy the installed `megatron/`
package into a scratch folder and apply the series to it (all or nothing, treepatch); capture the
environment; run `pytest -m gpu` on the manifest's GPU suite with the patched copy first on PYTHONPATH;
run bench/grouped_gemm.py; write the run into <evidence_dir>/<series-digest>.json. Torch is never
imported here: every GPU step is a child process of the target interpreter (--python), so forkctl
itself stays light.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import msgspec

from forkctl import __version__, report
from forkctl.cli import verbs
from forkctl.cli.kit import Context, forkctl_command, output_options
from forkctl.errors import BadInput
from forkctl.gpu import digest, evidence, junit, probe, signing
from forkctl.manifest import Manifest
from forkctl.ops import patch_dir as treepatch
from forkctl.report import Level, Problem, Report, Table
from forkctl.series import Series, load_series

# The contract with tests/gpu: the folder that holds the patched `megatron/` package. The suite may
# use it instead of building its own copy; it is also first on PYTHONPATH.
PATCHED_ENV_VAR = "FORKCTL_PATCHED_MEGATRON"
# The contract with tests/multigpu: how many GPUs (expert-parallel ranks) its torchrun launch uses.
EP_ENV_VAR = "FORKCTL_EP"
# NVLink multicast stays off for every child (NCCL NVLS, torch symmetric memory, NVSHMEM).
MULTICAST_OFF = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
BENCH_SCRIPT = "bench/grouped_gemm.py"
LAYER_BENCH_SCRIPT = "bench/moe_layer.py"  # the end-to-end arm: a full MoELayer with LoRA, at EP=1 or N
DEFAULT_BENCH_ROWS = "8192,32768,131072"
CHECK_CUDA = "import torch; print(torch.cuda.is_available(), torch.cuda.device_count())"
FIND_MEGATRON = (
    "import importlib.util, pathlib; spec = importlib.util.find_spec('megatron.core'); "
    "print(pathlib.Path(spec.origin).parent.parent if spec and spec.origin else '')"
)
# Where an NVIDIA driver shows itself without running anything: its device nodes in /dev (nvidia0,
# nvidiactl, ... also inside containers, which get them from the runtime; dxg: WSL2's GPU node) or its
# nvidia-smi on PATH. A host with none of them has no CUDA device, so validate refuses at once instead of
# importing torch (seconds) to hear the same.
DRIVER_DEVICE_NODES = ("nvidia*", "dxg")
DRIVER_TOOL = "nvidia-smi"
# pytest exit codes that mean the tests ran to the end (0 all passed, 1 some failed).
PYTEST_COMPLETED = {0, 1}


@dataclass(frozen=True)
class Finished:
    """A child process that ended (or was killed at the time limit)."""

    returncode: int | None  # None: killed at the time limit
    output: str  # stdout and stderr, interleaved

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.output.strip().splitlines()[-lines:])


def _run(
    args: list[str], timeout: float, env: dict[str, str] | None = None, cwd: Path | None = None
) -> Finished:
    """Run a child in its own process group, so a timeout also ends whatever it started."""
    try:
        proc = subprocess.Popen(
            args,
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,
        )
    except OSError as exc:
        raise BadInput(
            f"cannot run {args[0]}: {exc.strerror}", hint="pass --python PATH to a working interpreter"
        ) from None
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        return Finished(None, output or "")
    return Finished(proc.returncode, output or "")


@dataclass(frozen=True)
class Suite:
    """Which tests a validate run covers: the folder, the pytest marker, the GPUs it needs."""

    root: str
    marker: str
    ep: int | None = None  # expert-parallel ranks (--ep), None for the single-GPU suite

    @property
    def gpus(self) -> int:
        return self.ep or 1


def _select_suite(manifest: Manifest, ep: int | None, env_suffix: str | None) -> tuple[Suite, str | None]:
    """The suite and the environment-tag suffix: --ep N runs tests/multigpu and tags the run epN."""
    if ep is None:
        if env_suffix is not None and evidence.ep_size(f"-{env_suffix}") is not None:
            raise BadInput(
                f"--env-suffix {env_suffix} names an expert-parallel run, but the single-GPU suite would run",
                hint=f"use --ep {evidence.ep_size('-' + env_suffix)} to run {evidence.MULTIGPU_TESTS}",
            )
        return Suite(manifest.validation.gpu_tests, "gpu"), env_suffix
    suffix = f"ep{ep}"
    if env_suffix not in (None, suffix):
        raise BadInput(
            f"--ep {ep} records the run as {suffix}, but --env-suffix {env_suffix} asks for another tag",
            hint=f"drop --env-suffix (--ep {ep} implies {suffix})",
        )
    return Suite(evidence.MULTIGPU_TESTS, "multigpu", ep), suffix


def _host_shows_a_gpu_driver() -> bool:
    """Whether this host may have a CUDA device: an NVIDIA device node or nvidia-smi on PATH (nothing run)."""
    dev = Path("/dev")
    if any(next(dev.glob(pattern), None) is not None for pattern in DRIVER_DEVICE_NODES):
        return True
    return shutil.which(DRIVER_TOOL) is not None


def _require_cuda(python: str, gpus: int = 1) -> None:
    need = f" (--ep {gpus} needs {gpus} GPUs)" if gpus > 1 else ""
    if not _host_shows_a_gpu_driver():
        raise BadInput(
            f"no CUDA device is available on this host (no NVIDIA device in /dev, no {DRIVER_TOOL} on PATH)"
            f"{need}: forkctl validate runs the GPU test suite and must run on a CUDA host",
            hint="run it on the GPU machine; on a CPU host, `forkctl gate` checks the committed evidence",
        )
    finished = _run([python, "-c", CHECK_CUDA], timeout=300)
    if finished.returncode != 0:
        raise BadInput(
            f"{python} cannot import torch:\n{finished.tail(5)}",
            hint="install torch in that interpreter, or pass --python PATH to one that has it",
        )
    answer = (finished.output.strip().splitlines() or [""])[-1].split()
    if answer[:1] != ["True"]:
        raise BadInput(
            f"no CUDA device is available to {python} (torch.cuda.is_available() is False){need}: "
            "forkctl validate runs the GPU test suite and must run on a CUDA host",
            hint="run it on the GPU machine; on a CPU host, `forkctl gate` checks the committed evidence",
        )
    count = int(answer[1]) if len(answer) > 1 and answer[1].isdigit() else 0
    _require_gpu_count(python, count, gpus)


def _require_gpu_count(python: str, count: int, gpus: int) -> None:
    if count < gpus:
        raise BadInput(
            f"--ep {gpus} needs {gpus} CUDA devices, but {python} sees {count} "
            "(torch.cuda.device_count()); no evidence was written",
            hint=f"run it on a host with {gpus} GPUs (check CUDA_VISIBLE_DEVICES), or lower --ep",
        )


def _installed_megatron(python: str) -> Path:
    finished = _run([python, "-c", FIND_MEGATRON], timeout=120)
    location = finished.output.strip().splitlines()[-1:] if finished.returncode == 0 else []
    if not location or not location[0] or not Path(location[0]).is_dir():
        raise BadInput(
            f"megatron-core is not installed for {python}",
            hint="pip install megatron-core==0.19.2 --no-deps (the release closest to the pinned base)",
        )
    return Path(location[0])


def _patched_copy(series: Series, installed: Path, scratch: Path) -> tuple[Path, str]:
    """Copy the installed package to scratch/site/megatron and apply the series; (site, what happened)."""
    site = scratch / "site"
    shutil.copytree(installed, site / "megatron", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    plan = treepatch.plan(site, series.patches)
    if plan.state == treepatch.TreeState.PARTIAL:
        failing = [
            f"{v.patch.path.name}: {v.message or v.status}"
            for v in plan.verdicts
            if v.status == treepatch.PatchStatus.CONFLICT
        ]
        raise BadInput(
            f"the series does not apply to the installed package at {installed}: "
            + "; ".join(failing or ["partial"]),
            hint="install the megatron-core release the series is made for (see FACTS.md), or port the series",
        )
    if plan.state == treepatch.TreeState.APPLIED:
        return site, f"{installed} already carries the series: copied as is"
    applied = treepatch.execute(plan)
    return site, f"applied {len(applied)} patch(es) to a copy of {installed}"


def _child_env(manifest: Manifest, site: Path, ep: int | None = None) -> dict[str, str]:
    env = dict(os.environ)
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


def _pytest_args(python: str, suite: Suite, junit: Path) -> list[str]:
    return [
        python,
        "-m",
        "pytest",
        "-m",
        suite.marker,
        suite.root,
        "-p",
        "no:cacheprovider",
        "-o",
        "junit_family=xunit1",
        f"--junitxml={junit}",
        "-q",
        "-rfEs",
    ]


def _run_tests(
    manifest: Manifest, python: str, suite: Suite, env: dict[str, str], scratch: Path, timeout: float
) -> tuple[Finished, list[evidence.TestOutcome], bytes]:
    """pytest on the suite: how it finished, the parsed outcomes, and the raw JUnit XML they came from."""
    junit = scratch / "junit.xml"
    args = _pytest_args(python, suite, junit)
    finished = _run(args, timeout=timeout, env=env, cwd=manifest.root)
    if finished.returncode is None:
        raise BadInput(
            f"the GPU tests did not finish within {timeout:.0f} s; no evidence was written\n{finished.tail()}",
            hint="raise --timeout, or find the hanging test",
        )
    if finished.returncode not in PYTEST_COMPLETED or not junit.is_file():
        raise BadInput(
            f"pytest stopped with exit code {finished.returncode} (collection error, no tests, or a crash); "
            f"no evidence was written\n{finished.tail()}",
            hint="run the same pytest command by hand to see the whole output",
        )
    return finished, junit.parse_junit(junit), junit.read_bytes()


def _run_json_script(
    manifest: Manifest,
    script: str,
    args: list[str],
    out: Path,
    run: tuple[str, dict[str, str], float],
    *,
    json_on_failure: bool = False,
) -> dict[str, Any]:
    """Run a benchmark script of the toolkit that writes JSON to `out`: its JSON, or why there is none.
    `json_on_failure`: a failing exit still wrote figures worth keeping (e.g. a parity verdict)."""
    python, env, timeout = run
    if not (manifest.root / script).is_file():
        return {"status": "missing", "detail": f"{script} not found"}
    finished = _run([python, str(manifest.root / script), *args], timeout=timeout, env=env, cwd=manifest.root)
    if not out.is_file() or (finished.returncode != 0 and not json_on_failure):
        what = "timed out" if finished.returncode is None else f"exit code {finished.returncode}"
        return {"status": "crashed", "detail": what, "output_tail": finished.tail(20)}
    data: dict[str, Any] = json.loads(out.read_text())
    return data


def _run_bench(
    manifest: Manifest, python: str, env: dict[str, str], scratch: Path, timeout: float, rows: str, plot: Path
) -> dict[str, Any]:
    out = scratch / "bench.json"
    args = ["--out", str(out), "--rows", rows, "--plot", str(plot)]
    return _run_json_script(manifest, BENCH_SCRIPT, args, out, (python, env, timeout))


def _run_layer_bench(
    manifest: Manifest, python: str, env: dict[str, str], scratch: Path, timeout: float, site: Path, ep: int
) -> dict[str, Any]:
    """bench/moe_layer.py at this EP (it starts torchrun itself for EP > 1); it exits 1 when the arms
    disagree, with the figures written, so they are kept."""
    out = scratch / f"moe-layer-ep{ep}.json"
    args = ["--megatron", str(site), "--ep", str(ep), "--out", str(out)]
    return _run_json_script(
        manifest, LAYER_BENCH_SCRIPT, args, out, (python, env, timeout), json_on_failure=True
    )


def _layer_table(layer: dict[str, Any]) -> list[Table]:
    if layer.get("status") != "ok":
        return []
    rows = []
    for size in layer.get("sizes", []):
        for arm, figures in size["arms"].items():
            speedup = size["speedup_torch_vs_default_max_over_ranks"] if arm == "torch" else 1.0
            rows.append(
                [
                    f"{size['routed_rows_per_rank']:,}",
                    arm,
                    f"{figures['median_ms_max_over_ranks']:.3f}",
                    f"{speedup:.2f}x",
                    f"{figures['step_peak_mib_max_over_ranks']:.0f}",
                    "ok" if size["parity_ok"] else "FAILED",
                ]
            )
    title = f"MoELayer + LoRA end to end at EP={layer.get('ep')} (fwd + bwd, median ms, slowest rank)"
    return [Table(title, ["rows/rank", "arm", "ms", "speedup", "step MiB", "parity"], rows)]


def _bench_tables(bench: dict[str, Any]) -> list[Table]:
    tables = _layer_table(bench.get("moe_layer") or {})
    if bench.get("status") != "ok":
        return tables
    rows = []
    for size in bench.get("sizes", []):
        for arm, figures in {**size["arms"], **size.get("gemm_arms", {})}.items():
            rows.append(
                [
                    f"{size['routed_rows']:,}",
                    arm,
                    f"{figures['median_ms']:.3f}",
                    f"{figures['speedup_vs_per_expert']:.2f}x",
                    f"{figures['tflops']:.0f}",
                    f"{figures['pct_dense_ceiling']:.0f}%",
                    f"{figures['pct_roofline']:.0f}%",
                    f"{figures['peak_mem_mib']:.0f}",
                ]
            )
    targets = [
        [t["name"], f"{t['value']:.3g}", t["threshold"], "passed" if t["passed"] else "failed"]
        for t in bench.get("targets", [])
    ]
    return [
        Table(
            "grouped GEMM benchmark (fwd + dgrad, median ms)",
            ["rows", "arm", "ms", "speedup", "TFLOP/s", "% dense", "% roofline", "peak MiB"],
            rows,
        ),
        Table("benchmark targets", ["target", "value", "threshold", "status"], targets),
        *tables,
    ]


@click.command("validate", short_help=verbs.summary("validate"))
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    help="Folder for the evidence (default: the manifest's validation.evidence_dir).",
)
@click.option("--quick", is_flag=True, help="Run the GPU tests only, not the benchmark.")
@click.option(
    "--timeout",
    type=click.IntRange(min=1),
    default=300,
    show_default=True,
    help="Seconds allowed for each stage (the tests; the benchmark).",
)
@click.option(
    "--python",
    "python",
    type=click.Path(dir_okay=False),
    default=sys.executable,
    show_default="this interpreter",
    help="The interpreter that has torch, CUDA and megatron-core (tests and benchmark run in it).",
)
@click.option(
    "--env-suffix",
    metavar="NAME",
    help="Name a topology in the environment tag: sm90 becomes sm90-NAME (e.g. ep4).",
)
@click.option(
    "--ep",
    type=click.IntRange(min=1),
    metavar="N",
    help=f"Run the expert-parallel suite ({evidence.MULTIGPU_TESTS}, torchrun on N GPUs) instead of the "
    "single-GPU one, and record it as the environment sm90-epN. Needs N CUDA devices; the benchmark is "
    "the end-to-end MoELayer arm at EP=N (skip it with --quick).",
)
@click.option(
    "--bench-rows",
    default=DEFAULT_BENCH_ROWS,
    show_default=True,
    help="Routed-row counts the benchmark measures (comma separated).",
)
@click.option(
    "--keep", is_flag=True, help="Keep the scratch folder (patched package, JUnit XML) for debugging."
)
@click.option(
    "--sign-key",
    type=click.Path(path_type=Path, dir_okay=False),
    envvar="FORKCTL_SIGNING_KEY",
    help="The GPU runner's private SSH key: sign the evidence (<file>.sig, git's SSH signature format). "
    "Required when the manifest lists validation.allowed_signers. Default: $FORKCTL_SIGNING_KEY.",
)
@click.option(
    "--unsigned",
    is_flag=True,
    help="Record without signing although the manifest lists allowed signers (sign later, where the key "
    "is, with forkctl sign; the gate refuses the evidence until then).",
)
@output_options()
@forkctl_command
def command(
    ctx: Context,
    out: Path | None,
    quick: bool,
    timeout: int,
    python: str,
    env_suffix: str | None,
    ep: int | None,
    bench_rows: str,
    keep: bool,
    sign_key: Path | None,
    unsigned: bool,
) -> Report:
    """Run the GPU test suite on the patched megatron-core and record the evidence (CUDA host only).

    \b
    Writes <evidence_dir>/<series-digest>.json (one run per environment tag, e.g. sm90; a new run
    replaces the old one for its tag) and, with matplotlib, <series-digest>-<tag>.png. Exit 1 if
    any test failed (a failed run is recorded, and `forkctl gate` rejects it); a crash or timeout
    writes nothing (exit 2). The patched package's folder is exported to the tests as
    $FORKCTL_PATCHED_MEGATRON and put first on PYTHONPATH.

    \b
    With --ep N it runs the multi-GPU suite instead (pytest -m multigpu tests/multigpu with
    $FORKCTL_EP=N: a full MoE layer behind the all-to-all dispatcher on N GPUs) and records it
    under its own tag, e.g. sm90-ep4, which validation.require can list. NVLink multicast is
    kept off in every child (NCCL_NVLS_ENABLE=0 and friends).
    """
    manifest = ctx.manifest()
    series = load_series(manifest)
    _check_signing(manifest, sign_key, unsigned)
    selected, env_suffix = _select_suite(manifest, ep, env_suffix)
    suite = digest.suite_record(manifest, selected.root)
    folder = evidence.evidence_dir(manifest, out)
    report.info(f"checking for CUDA in {python}")
    _require_cuda(python, selected.gpus)
    installed = _installed_megatron(python)
    scratch = Path(tempfile.mkdtemp(prefix="forkctl-validate-"))
    try:
        return _validate(
            manifest,
            series,
            selected,
            suite,
            folder,
            python,
            installed,
            scratch,
            quick,
            timeout,
            env_suffix,
            bench_rows,
            sign_key=sign_key,
        )
    finally:
        if keep:
            report.info(f"kept the scratch folder {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


def _check_signing(manifest: Manifest, sign_key: Path | None, unsigned: bool) -> None:
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


def _validate(
    manifest: Manifest,
    series: Series,
    selected: Suite,
    suite: evidence.SuiteRecord,
    folder: Path,
    python: str,
    installed: Path,
    scratch: Path,
    quick: bool,
    timeout: int,
    env_suffix: str | None,
    bench_rows: str,
    *,
    sign_key: Path | None = None,
) -> Report:
    started = evidence.now()
    site, how = _patched_copy(series, installed, scratch)
    report.info(how)
    env = _child_env(manifest, site, selected.ep)
    # The probe's text goes to `-c` (see forkctl.gpu.probe): the target interpreter need not have forkctl.
    probed = _run([python, "-c", Path(probe.__file__).read_text(encoding="utf-8")], timeout=300, env=env)
    if probed.returncode != 0:
        raise BadInput(f"the environment probe failed:\n{probed.tail(10)}")
    environment = environment_from_probe(probed.output, env_suffix)
    _require_gpu_count(python, environment.gpu_count, selected.gpus)
    report.info(f"running the GPU tests in {selected.root} on {environment.gpu_name} ({environment.tag})")
    finished, tests, junit_bytes = _run_tests(manifest, python, selected, env, scratch, timeout)
    plot = folder / f"{series.digest}-{environment.tag}.png"
    skipped = "--quick" if selected.ep is None else "--ep: the grouped-GEMM benchmark runs on one GPU"
    bench: dict[str, Any] = {"status": "skipped", "detail": skipped}
    if not quick:
        if selected.ep is None:
            report.info("running the grouped-GEMM benchmark")
            folder.mkdir(parents=True, exist_ok=True)
            bench = _run_bench(manifest, python, env, scratch, timeout, bench_rows, plot)
        ep = selected.ep or 1
        report.info(f"running the end-to-end MoELayer benchmark at EP={ep}")
        bench["moe_layer"] = _run_layer_bench(manifest, python, env, scratch, timeout, site, ep)
    run = evidence.Run(
        status=junit.run_status(tests, finished.returncode or 0),
        environment=environment,
        gpu_tests=suite,
        tests=tests,
        pytest_exit_code=finished.returncode or 0,
        started_at=started,
        finished_at=evidence.now(),
        forkctl_version=__version__,
        benchmark=bench,
        plot=plot.name if plot.is_file() else None,
        report_sha256=evidence.sha256_bytes(junit_bytes) if junit_bytes else None,
    )
    path = evidence.record_run(manifest, series, run, folder)
    if sign_key is not None:
        signature = signing.sign(path, sign_key)
        report.info(f"signed {path.name} with {sign_key.name}: {signature.name}")
    return _report(manifest, run, path, finished)


def environment_from_probe(output: str, tag_suffix: str | None = None) -> evidence.Environment:
    """Turn the probe's JSON (its last stdout line) into an Environment with its tag."""
    lines = [line for line in output.strip().splitlines() if line.startswith("{")]
    if not lines:
        raise BadInput(f"the environment probe printed no JSON: {output.strip()[-500:]}")
    data = json.loads(lines[-1])
    return evidence.Environment(tag=evidence.environment_tag(data["compute_capability"], tag_suffix), **data)


def _report(manifest: Manifest, run: evidence.Run, path: Path, finished: Finished) -> Report:
    result = Report(command="validate")
    result.tables.append(
        Table(
            f"GPU tests on {run.environment.gpu_name} ({run.environment.tag})",
            ["test", "outcome", "seconds"],
            [[t.nodeid, t.outcome, f"{t.duration_s:.2f}"] for t in run.tests],
        )
    )
    bench = run.benchmark or {}
    result.tables.extend(_bench_tables(bench))
    for test in run.tests:
        if test.outcome in ("failed", "error"):
            result.fail(Problem(f"test {test.nodeid} {test.outcome}: {test.message or ''}".rstrip(": ")))
    if run.status != "passed" and result.ok:
        result.fail(
            Problem(
                f"the GPU tests did not pass (pytest exit code {run.pytest_exit_code}):\n{finished.tail()}"
            )
        )
    for target in bench.get("targets", []):
        if not target["passed"]:
            result.fail(
                Problem(
                    f"benchmark target missed: {target['name']} = {target['value']:.3g} "
                    f"(want {target['threshold']})",
                    level=Level.WARNING,
                )
            )
    if bench.get("status") not in ("ok", "skipped"):
        result.fail(
            Problem(f"benchmark {bench.get('status')}: {bench.get('detail', '')}", level=Level.WARNING)
        )
    layer = bench.get("moe_layer") or {}
    if layer and layer.get("status") != "ok":
        result.fail(
            Problem(
                f"MoELayer benchmark {layer.get('status')}: {layer.get('detail', '')}", level=Level.WARNING
            )
        )
    if bench.get("plot_skipped"):
        result.lines.append(f"plot skipped: {bench['plot_skipped']}")
    rel = path.relative_to(manifest.root) if path.is_relative_to(manifest.root) else path
    result.lines.append(f"evidence: {rel} (run {run.status} for {run.environment.tag})")
    if run.plot:
        result.lines.append(f"plot: {path.parent / run.plot}")
    if run.status == "passed":
        result.lines.append("commit the evidence (and plot) so that `forkctl gate` passes in CI")
    result.data = {
        "evidence_file": str(rel),
        "status": run.status,
        "environment": msgspec.to_builtins(run.environment),
        "tests": msgspec.to_builtins(run.tests),
        "benchmark": bench,
    }
    return result
