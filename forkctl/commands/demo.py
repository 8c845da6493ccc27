"""forkctl demo: the whole job, offline, in well under a minute, on a chain made from megatron-core.

Builds a synthetic upstream from the installed megatron-core's `megatron/` tree, the fork by the apply
core, a Bridge-shaped and a NeMo-RL-shaped consumer (local bare remotes), then runs check-pins (finds
the unpatched base), bump-bridge --through nemo-rl --push --no-gate (the demo's series, on a synthetic
base, has no GPU evidence: the chain moves without it, in the open), and check-pins on the bumped branches.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import click

from forkctl import report
from forkctl.chain.model import ChainResult, Status
from forkctl.cli import verbs
from forkctl.cli.kit import Context, forkctl_command, output_options
from forkctl.demo import chain as demochain
from forkctl.demo.package import find_installed
from forkctl.errors import BadInput
from forkctl.gpu import gatecheck
from forkctl.report import Problem, Report, Table
from forkctl.report.chain import chain_report, records_json, text_diagram
from forkctl.series import Series, parse_patches


def _workdir(keep: Path | None) -> tuple[Path, tempfile.TemporaryDirectory[str] | None]:
    if keep is None:
        scratch = tempfile.TemporaryDirectory(prefix="forkctl-demo-")
        return Path(scratch.name), scratch
    if keep.exists() and any(keep.iterdir()):
        raise BadInput(f"--keep-in {keep}: the folder is not empty", hint="give a new or empty folder")
    keep.mkdir(parents=True, exist_ok=True)
    return keep.resolve(), None


def _check_json(result: ChainResult, manifest: Any) -> dict[str, Any]:
    data = chain_report("check-pins", manifest, result).data
    kinds = sorted({f["kind"] for link in data["links"] for f in link["findings"] if f["status"] != "OK"})
    return {"ok": result.ok, "failure_kinds": kinds, "links": data["links"]}


def _tables(prefix: str, result: ChainResult, manifest: Any) -> list[Table]:
    tables = chain_report("check-pins", manifest, result).tables
    return [
        Table(f"{prefix}: {t.title}", t.columns, t.rows) for t in tables if not t.title.startswith("fork")
    ]


def _first_failure(result: ChainResult) -> str:
    for link in result.links:
        failure = link.first_failure()
        if failure is not None:
            return f"{link.consumer} {failure.message} [{failure.kind}]"
    return "no link failed"


@click.command("demo", short_help=verbs.summary("demo"))
@click.option(
    "--keep-in",
    "keep",
    type=click.Path(path_type=Path, file_okay=False),
    metavar="DIR",
    help="Build the demo chain in DIR (new or empty) and keep it for a look around; default: a temp "
    "folder, removed at the end.",
)
@output_options()
@forkctl_command
def command(ctx: Context, keep: Path | None) -> Report:
    """Run the whole flow offline on a chain built from the installed megatron-core: check-pins finds the
    consumer pinning the unpatched upstream base, bump-bridge --through nemo-rl --push --no-gate moves the
    chain to apply(series, base) (no GPU run recorded the demo's series, so the bump commits say they
    were published without GPU evidence), check-pins on the bumped branches passes. Uses the real manifest's patch series;
    touches none of your repositories and not ~/.cache/forkctl. Exit 0 when the final check passes, 1 when
    it fails, 2 when the series does not apply to the installed megatron-core."""
    root, scratch = _workdir(keep)
    try:
        with demochain.isolated_environment(root), report.phases("demo") as step:
            # Read inside: the manifest cache is the demo's own then, never ~/.cache/forkctl.
            real = ctx.manifest()
            package = find_installed(real.package)
            chain = demochain.build_chain(root, real, package, step)
            note = _no_evidence(chain)
            flow = demochain.run_flow(chain, step, note)
        return _report(chain, flow, keep is not None, note)
    finally:
        if scratch is not None:
            scratch.cleanup()


def _no_evidence(chain: demochain.DemoChain) -> list[str]:
    """The override the demo's bump commits carry. The demo's series is the real patches on a synthetic
    base made from the installed package: no GPU run ever recorded evidence for it, so the demo moves
    the chain as `bump-bridge --push --no-gate` would, in the open, rather than pretend to evidence."""
    series = Series(base=chain.base, patches=parse_patches(chain.manifest.patch_paths()))
    package = " ".join(
        filter(None, [chain.package.distribution or chain.package.name, chain.package.version])
    )
    why = (
        f"forkctl demo: the series is the toolkit's {len(series.patches)} patches on a synthetic upstream "
        f"base {chain.base[:12]} built from the installed {package}; no GPU run recorded evidence for it"
    )
    return gatecheck.note_lines(series.digest, [why])


def _report(
    chain: demochain.DemoChain, flow: demochain.Flow, kept: bool, note: list[str] | None = None
) -> Report:
    manifest = chain.manifest
    out = Report(command="demo")
    out.tables += _tables("before", flow.first, manifest)
    out.tables += _tables("after", flow.final, manifest)
    out.lines += _story(chain, flow)
    verdict = _verdict(flow)
    for problem in _final_errors(flow.final):
        out.fail(problem)
    if kept:
        out.lines.append(f"the demo chain is kept in {chain.root} (toolkit: {chain.toolkit})")
    out.lines.append(verdict)
    out.data = _data(chain, flow, kept, verdict)
    out.data["bump"]["gate_note"] = note or []
    return out


def _final_errors(final: ChainResult) -> list[Problem]:
    """What makes the demo exit 1: each failing finding of the last check-pins, with its fix. A link's
    is a row of the "after" tables, so text prints it once, there; JSON carries each as a problem."""
    problems = [
        Problem(
            f"after the bump: {link.consumer}@{link.commit[:12]}: {f.status.value}: {f.message}",
            hint=f.fix or None,
            in_table=True,
        )
        for link in final.links
        for f in link.findings
        if f.status != Status.OK
    ]
    # The demo shows no fork-branch table (it built that branch itself): such a finding prints.
    problems += [
        Problem(f"after the bump: fork branch: {f.message}", hint=f.fix or None)
        for f in final.fork_branch_notes
        if f.status != Status.OK
    ]
    return problems


def _story(chain: demochain.DemoChain, flow: demochain.Flow) -> list[str]:
    """What was built, then each step of the flow, then the final chain."""
    manifest = chain.manifest
    version = chain.package.version or "(unknown version)"
    lines = [
        f"upstream: {chain.package.distribution or chain.package.name} {version} from {chain.package.folder} "
        f"-> base {chain.base[:12]}; "
        f"fork {manifest.fork.branch} = apply({len(flow.fork.patches)} patches) = {flow.fork.head[:12]}"
    ]
    first_state = "OK" if flow.first.ok else "FAILED"
    lines.append(
        f"1. check-pins on {manifest.consumers[0].branch}: {first_state}: {_first_failure(flow.first)}"
    )
    for step in flow.steps:
        url_note = f", .gitmodules url -> {step.url_changed[1]}" if step.url_changed else ""
        url_note += "".join(f", {r.path} -> {r.new[:12]}" for r in step.records)
        lines.append(
            f"2. bump-bridge --no-gate: {step.consumer.name} {step.branch} = {step.commit[:12]}: {step.gitlink} "
            f"{(step.old or '-')[:12]} -> {step.new[:12]}{url_note}"
        )
    lines.append(
        "   (as bump-bridge --no-gate: no GPU run recorded the demo's series, so the chain moves without GPU evidence, "
        "in the open: each bump commit says 'Published without GPU evidence'; a real toolkit records it "
        "with forkctl validate first)"
    )
    final_state = "OK" if flow.final.ok else "FAILED"
    lines.append(f"3. check-pins on {flow.branch}: {final_state}")
    return lines + text_diagram(manifest, flow.final)


def _verdict(flow: demochain.Flow) -> str:
    if flow.final.ok and not flow.first.ok:
        return (
            f"demo: OK: the chain was pinning the unpatched base; after one bump every consumer pins "
            f"apply(series, base) = {flow.fork.head[:12]} (moved without GPU evidence, as bump-bridge --no-gate)"
        )
    if flow.final.ok:
        return (
            "demo: OK: the final check passes (the first check already passed too; moved without GPU "
            "evidence, as bump-bridge --no-gate)"
        )
    return f"demo: FAILED: after the bump check-pins still fails: {_first_failure(flow.final)}"


def _data(chain: demochain.DemoChain, flow: demochain.Flow, kept: bool, verdict: str) -> dict[str, Any]:
    manifest = chain.manifest
    return {
        "workdir": str(chain.root) if kept else None,
        "package": {
            "name": chain.package.name,
            "distribution": chain.package.distribution,
            "version": chain.package.version,
            "path": str(chain.package.folder),
        },
        "base": chain.base,
        "fork_head": flow.fork.head,
        "patches": [{"file": p.path.name, "subject": p.subject} for p in flow.fork.patches],
        "remotes": {name: str(path) for name, path in chain.remotes.items()},
        "first_check": _check_json(flow.first, manifest),
        "bump": {
            "branch": flow.branch,
            "pushed": flow.bump_check.ok,
            "steps": [
                {
                    "consumer": s.consumer.name,
                    "commit": s.commit,
                    "parent": s.parent,
                    "gitlink": s.gitlink,
                    "old": s.old,
                    "new": s.new,
                    "gitmodules_url": list(s.url_changed) if s.url_changed else None,
                    "records": records_json(s),
                }
                for s in flow.steps
            ],
        },
        "final_check": _check_json(flow.final, manifest),
        "verdict": verdict,
    }
