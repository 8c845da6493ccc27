"""forkctl gate: refuse a merge until committed GPU evidence covers exactly this series and test suite."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from forkctl.cli import options, verbs
from forkctl.cli.kit import Context, forkctl_command, output_options
from forkctl.errors import BadInput
from forkctl.gpu import gate
from forkctl.report import Level, Problem, Report, Table
from forkctl.series import load_series

if TYPE_CHECKING:
    from forkctl.git.sha import TreeSha
    from forkctl.manifest import Manifest
    from forkctl.series import Series


def _env_status(tag: str, verdict: gate.GateVerdict) -> str:
    """One environment's line: its own problems, or the evidence's as a whole, fail it; another
    environment's do not (`--require X` for a missing X leaves a passing sm90 passed)."""
    if tag in verdict.pending and tag not in verdict.covered:
        if tag in verdict.allowed_pending:
            return "PENDING, accepted by --allow-pending (see the warnings)"
        return "PENDING: not recorded for this series (see the errors)"
    if tag not in verdict.covered:
        return "missing"
    if any(problem.env == tag for problem in verdict.problems):
        return "failed (its errors are listed)"
    if any(problem.env is None for problem in verdict.problems):
        return "recorded, but the evidence fails as a whole (see the errors)"
    return "passed"


def _fork_head_tree(manifest: Manifest, series: Series, repo_path: Path | None) -> TreeSha:
    """The package tree of apply(series, base) in the upstream clone at `repo_path` (gate --repo), else
    in forkctl's cache of upstream.url, as check-pins reaches it."""
    from forkctl.git.repo import repo_holding
    from forkctl.ops import replay

    package = manifest.package.folder_name
    repo = repo_holding(repo_path, manifest.upstream.url, [series.base])
    tree = replay.fork_head_tree(repo, series.base, series.patches, package)
    if tree is None:
        where = repo_path or manifest.upstream.url
        raise BadInput(f"the fork head built in {where} has no {package}/ folder", hint="check --repo")
    return tree


def _reached_tree(manifest: Manifest, series: Series) -> tuple[TreeSha | None, str | None]:
    """(the fork head's package tree from upstream.url, None) where upstream answers, else (None, why)."""
    from forkctl.git.runner import GitFailed

    try:
        return _fork_head_tree(manifest, series, None), None
    except BadInput as exc:
        return None, exc.message
    except GitFailed as exc:
        return None, str(exc)


def _unreached_problem(manifest: Manifest, why: str) -> Problem:
    return Problem(
        f"the tested trees were NOT compared with apply(series, base): upstream ({manifest.upstream.url}) "
        f"could not be read ({why}); only the base the evidence names was checked",
        level=Level.WARNING,
        hint="pass --repo CLONE (an upstream clone holding the base), or run where upstream.url answers",
    )


@click.command("gate", short_help=verbs.summary("gate"))
@click.option(
    "--require",
    "extra_required",
    multiple=True,
    metavar="ENV",
    help="An environment tag that must be covered, in addition to the manifest's validation.require "
    "(repeatable), e.g. sm90 or sm90-ep4; a tag named here is required even if validation.pending lists it.",
)
@click.option(
    "--allow-pending",
    "allow_pending",
    multiple=True,
    metavar="ENV",
    help="Accept a required environment that validation.pending lists (with its reason) although no "
    "evidence covers it (repeatable), e.g. in the project's own CI; the verdict names it. Naming one that "
    "is not pending is a usage error (exit 2).",
)
@options.repo(
    "A local upstream clone holding the base, where each run's tested package tree is compared with "
    "apply(series, base)'s (git rev-parse <fork head>:megatron). Without it the gate reads upstream.url "
    "through forkctl's cache, as check-pins does, and where that cannot be read it says so (a warning) "
    "and checks only the base the signed evidence names."
)
@output_options(github=True)
@forkctl_command
def command(
    ctx: Context, extra_required: tuple[str, ...], allow_pending: tuple[str, ...], repo_path: Path | None
) -> Report:
    """Check that GPU evidence exists for the current series (CPU only; for CI).

    \b
    Passes (exit 0) only when <evidence_dir>/<series-digest>.json exists, was recorded with the
    current GPU test suite, every recorded test passed (at least one ran), every run tested the fork
    head built from the manifest's base (validate --source) with upstream's tests no worse than on
    the base, each run recorded the library versions validation.environments pins for its tag, and
    every required environment is covered. A tag listed in validation.pending is never covered
    by older evidence and fails the gate with the manifest's reason, unless named with
    --allow-pending (then the verdict says it was accepted). Otherwise exits 1 and says what is
    missing: which patch changed since the nearest evidence, which GPU test file changed, which
    environment is not covered, which test failed.
    Malformed evidence for the current series is an error naming the file (exit 2).
    """
    manifest = ctx.manifest()
    series = load_series(manifest)
    required = list(dict.fromkeys([*manifest.validation.require, *extra_required]))
    pending = {tag: why for tag, why in manifest.validation.pending.items() if tag not in extra_required}
    unreached = None
    if repo_path is not None:
        fork_head_tree: TreeSha | None = _fork_head_tree(manifest, series, repo_path)
    else:
        fork_head_tree, unreached = _reached_tree(manifest, series)
    verdict = gate.check(
        manifest,
        series,
        required,
        pending=pending,
        fork_head_tree=fork_head_tree,
        allow_pending=allow_pending,
    )
    result = Report(command="gate")
    for finding in verdict.problems:
        result.fail(Problem(finding.message, file=finding.file, hint=finding.hint))
    for finding in verdict.warnings:
        result.fail(Problem(finding.message, level=Level.WARNING, file=finding.file, hint=finding.hint))
    if unreached is not None:
        result.fail(_unreached_problem(manifest, unreached))
    result.data = {
        "series_digest": verdict.series_digest,
        "gpu_tests_digest": verdict.suite_digest,
        "evidence_file": verdict.evidence_file,
        "required": verdict.required,
        "covered": verdict.covered,
        "pending": verdict.pending,
        "allowed_pending": verdict.allowed_pending,
        "fork_head_tree": fork_head_tree,
        "fork_head_tree_checked": fork_head_tree is not None,
        "signed_by": verdict.signed_by,
        "baselines": verdict.baselines,
        "signatures_required": bool(manifest.validation.allowed_signers),
    }
    rows = [[tag, _env_status(tag, verdict), verdict.baselines.get(tag, "-")] for tag in required]
    if rows:
        result.tables.append(
            Table(
                title="required GPU environments",
                columns=["environment", "status", "baseline (speedup at the largest size)"],
                rows=rows,
            )
        )
    result.lines.append(f"series digest {verdict.series_digest}, GPU tests digest {verdict.suite_digest}")
    if verdict.ok:
        result.lines.append(
            f"gate: ok: {verdict.evidence_file} covers {', '.join(verdict.covered)}"
            + (f" (required: {', '.join(required)})" if required else "")
            + "".join(
                f"; PENDING, accepted by --allow-pending: {tag} ({verdict.pending[tag]})"
                for tag in verdict.allowed_pending
                if tag not in verdict.covered
            )
            + (f", signed by {verdict.signed_by}" if verdict.signed_by else "")
        )
    return result
