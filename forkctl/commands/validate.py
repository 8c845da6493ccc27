"""forkctl validate: run the GPU tests (and the benchmarks) on the patched megatron-core, record evidence.

The run itself is `forkctl.gpu.validate` here, or `forkctl.slurm.launch` as a Slurm job (--launcher
slurm); this command parses the options, shows its progress and turns the recorded run into a report.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
import msgspec

from forkctl import report
from forkctl.cli import options, verbs
from forkctl.cli.kit import Context, forkctl_command, output_options
from forkctl.cli.launcher import launcher_options
from forkctl.gpu import validate as gpu_validate
from forkctl.gpu.evidence import Run
from forkctl.manifest import Manifest
from forkctl.report import Level, Problem, Report, Table
from forkctl.series import load_series
from forkctl.slurm import launch, request


@click.command("validate", short_help=verbs.summary("validate"))
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    help="Folder for the evidence (default: the manifest's validation.evidence_dir).",
)
@click.option(
    "--source",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    callback=options.regular_file,
    metavar="ARCHIVE",
    help="A git archive of the upstream base (git archive --format=tar.gz -o base.tgz BASE megatron tests): "
    "test the fork head built from it, the tree consumers pin, and run upstream's own tests "
    "(validation.upstream_tests) on the base and on the fork head. Without it the installed release is "
    "patched instead, and forkctl gate refuses that evidence.",
)
@options.upstream_repo(
    "With --source: where the base commit's tree is read to check the archive against (a clone holding "
    "the base, or a URL); default: forkctl's cache of upstream.url, as check-pins reaches it. An archive "
    "whose folders differ from the base commit's, or that cannot be checked, is refused before any test."
)
@click.option("--quick", is_flag=True, help="Run the GPU tests only, not the benchmark.")
@click.option(
    "--timeout",
    type=click.IntRange(min=1),
    default=gpu_validate.DEFAULT_TIMEOUT_S,
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
    help="Run the expert-parallel suite (the manifest's validation.multigpu_tests, torchrun on N GPUs) instead of the "
    "single-GPU one, and record it as the environment sm90-epN. Needs N CUDA devices; the benchmark is "
    "the end-to-end MoELayer arm at EP=N (skip it with --quick).",
)
@click.option(
    "--bench-rows",
    help="Routed-row counts the benchmark measures (comma separated; default: the manifest's "
    "validation.benchmark_rows).",
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
@launcher_options
@output_options()
@forkctl_command
def command(
    ctx: Context,
    out: Path | None,
    source: Path | None,
    upstream_repo: str | None,
    quick: bool,
    timeout: int,
    python: str,
    env_suffix: str | None,
    ep: int | None,
    bench_rows: str | None,
    keep: bool,
    sign_key: Path | None,
    unsigned: bool,
    launcher: str,
    poll: float,
    **slurm: Any,
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

    \b
    With --launcher slurm it runs as one Slurm job: forkctl validate on the allocated node
    (--job-python), its evidence checked (series, suite, tree, environment tag) and recorded and
    signed here. A job that fails, is cancelled, times out or waits on a drained node: exit 1,
    with its id, state, exit code and log tail, and no evidence.
    """
    ctx.require_local("validate runs the toolkit's tests and benchmark scripts and records evidence in it")
    manifest = ctx.manifest()
    series = load_series(manifest)
    run_options = gpu_validate.Options(
        python=python,
        out=out,
        quick=quick,
        timeout=timeout,
        env_suffix=env_suffix,
        ep=ep,
        bench_rows=bench_rows,
        keep=keep,
        sign_key=sign_key,
        unsigned=unsigned,
        source=source,
        base_entries=_base_entries(manifest, series.base, upstream_repo) if source is not None else None,
    )
    if launcher == "slurm":
        job = launch.Job(request.settings(manifest, slurm), _passed(run_options, upstream_repo), poll)
        with report.phases("validate (Slurm)") as step:
            launched = launch.validate(manifest, series, run_options, job, step)
        if launched.failed is not None:
            return _job_failed(launched.failed)
        assert launched.validated is not None
        result = _report(manifest, launched.validated)
        result.lines.insert(0, f"Slurm job {launched.job_id} completed")
        return result
    with report.phases("validate") as step:
        validated = gpu_validate.validate(manifest, series, run_options, step)
    return _report(manifest, validated)


def _base_entries(manifest: Manifest, base: str, location: str | None):  # type: ignore[no-untyped-def]
    """{top-level name: object id} of the base commit's tree for the names asked, read from upstream as
    check-pins reaches it (--upstream-repo, else the cache of upstream.url); refused when unreachable."""

    def read(names: list[str]) -> dict[str, str]:
        from forkctl.chain.sources import parse_location
        from forkctl.errors import BadInput
        from forkctl.git.repo import repo_holding
        from forkctl.git.runner import GitFailed

        local, url = (parse_location(location)[0::2]) if location else (None, None)
        where = str(local or url or manifest.upstream.url)
        hint = (
            "pass --upstream-repo CLONE (any clone that holds the base, e.g. git clone --bare "
            "--filter=blob:none), or run where upstream's URL answers"
        )
        try:
            repo = repo_holding(local, url or manifest.upstream.url, [base])
            if repo.objects.resolve_commit(base) is None:
                raise BadInput(f"{where} does not hold the base {base}")
            return {name: entry.sha for name, entry in repo.objects.tree_entries(base, names).items()}
        except (BadInput, GitFailed) as exc:
            said = exc.message if isinstance(exc, BadInput) else str(exc)
            raise BadInput(
                f"cannot read the base commit's tree from {where} to check the --source archive against: "
                f"{said}; nothing was tested",
                hint=hint,
            ) from None

    return read


def _passed(options: gpu_validate.Options, upstream_repo: str | None) -> list[str]:
    """validate's options as the job passes them on to forkctl validate on the node (a local
    --upstream-repo as an absolute path: the job starts elsewhere)."""
    passed = ["--timeout", str(options.timeout)]
    passed += ["--quick"] if options.quick else []
    passed += ["--ep", str(options.ep)] if options.ep is not None else []
    passed += ["--env-suffix", options.env_suffix] if options.env_suffix is not None else []
    passed += ["--bench-rows", options.bench_rows] if options.bench_rows is not None else []
    passed += ["--source", str(options.source.resolve())] if options.source is not None else []
    if upstream_repo is not None:
        local = Path(upstream_repo)
        passed += ["--upstream-repo", str(local.resolve()) if local.exists() else upstream_repo]
    return passed


def _job_failed(failed: launch.JobFailed) -> Report:
    result = Report(command="validate")
    why = f", reason {failed.reason}" if failed.reason not in ("", "None") else ""
    nodes = "".join(f"\nnode {line}" for line in failed.node_reasons)
    result.fail(
        Problem(
            f"Slurm job {failed.job_id} {failed.state} (exit code {failed.exit_code or '?'}{why}): "
            f"{failed.detail}{nodes}\nlog tail:\n{failed.log_tail or '(empty)'}",
            hint="no evidence was recorded; fix what the log shows and submit again",
        )
    )
    result.data = msgspec.to_builtins(failed)
    return result


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


def _report(manifest: Manifest, validated: gpu_validate.Validated) -> Report:
    run, path, finished = validated.run, validated.path, validated.pytest
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
    _tested_lines(run, result)
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
        "tested": msgspec.to_builtins(run.tested),
        "upstream_tests": msgspec.to_builtins(run.upstream_tests),
    }
    return result


def _tested_lines(run: Run, result: Report) -> None:
    """Which tree was tested, and upstream's tests on the base against the fork head."""
    tested = run.tested
    if tested is not None and tested.source == "upstream-base":
        result.lines.append(
            f"tested: the fork head built from upstream {tested.base_commit}: megatron/ tree {tested.package_tree}"
            f" (base {tested.base_package_tree})"
        )
    elif tested is not None:
        result.fail(
            Problem(
                f"tested {tested.distribution or 'the installed release'} with the series applied "
                f"(megatron/ tree {tested.package_tree}), not the fork head: forkctl gate refuses this evidence",
                level=Level.WARNING,
                hint="pass --source with a git archive of the upstream base",
            )
        )
    regression = run.upstream_tests
    if regression is None:
        return
    rows = [
        [name, str(c.passed), str(c.failed), str(c.errors), str(c.skipped)]
        for name, c in (("base", regression.base), ("fork head", regression.head))
    ]
    result.tables.append(
        Table(
            "upstream's tests of the touched modules", ["tree", "passed", "failed", "errors", "skipped"], rows
        )
    )
    for nodeid in regression.newly_failing:
        said = f"upstream test {nodeid} passes on the base and fails on the fork head{regression.why(nodeid)}"
        result.fail(Problem(said))
    for nodeid in regression.head_only_failing:
        result.fail(Problem(f"test {nodeid}, which only the fork head has, failed{regression.why(nodeid)}"))
    for nodeid in regression.order_dependent:
        result.fail(
            Problem(
                f"upstream test {nodeid} failed on the fork head after other tests and passed alone on both "
                "trees: order-dependent, not counted",
                level=Level.WARNING,
            )
        )
