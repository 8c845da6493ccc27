"""The gate's judgement: may this series merge? Evidence for exactly this series and test suite, signed
where the manifest asks for signatures, every recorded test passed, every required environment covered.

Each finding says what is wrong and how to fix it; where no evidence exists for the series, the nearest
evidence file is found and what changed since is named (a patch edited, moved, renamed, added, dropped;
the base moved; the GPU tests changed).
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path, PurePosixPath

import msgspec

from forkctl.errors import BadInput
from forkctl.git.sha import TreeSha
from forkctl.gpu import signing, tested
from forkctl.gpu.digest import CurrentSuites, suite_changes
from forkctl.gpu.evidence import (
    RERUN_HINT,
    Evidence,
    Run,
    evidence_dir,
    evidence_path,
    load_evidence,
    patch_records,
    repo_relative,
    suite_root,
    validate_command,
)
from forkctl.gpu.findings import Finding
from forkctl.manifest import Manifest
from forkctl.series import Series

SIGN_HINT = (
    "run `forkctl validate --sign-key KEY` on a GPU host whose public key is in validation.allowed_signers, "
    "and commit the evidence file and its .sig; never edit evidence by hand"
)


class GateVerdict(msgspec.Struct):
    series_digest: str
    suite_digest: str
    evidence_file: str | None
    required: list[str]
    covered: list[str] = msgspec.field(default_factory=list)
    problems: list[Finding] = msgspec.field(default_factory=list)
    warnings: list[Finding] = msgspec.field(default_factory=list)
    signed_by: str | None = None  # the allowed signer whose signature verified, when signatures are required
    pending: dict[str, str] = msgspec.field(default_factory=dict)  # required tags not recorded yet, and why
    # What each current run's benchmark measured the feature against (Transformer Engine or the loop).
    baselines: dict[str, str] = msgspec.field(default_factory=dict)
    # The pending tags the caller accepted by name (`gate --allow-pending`): reported, never covered. Any
    # other pending tag fails the gate like a missing one, with its reason.
    allowed_pending: list[str] = msgspec.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def check(
    manifest: Manifest,
    series: Series,
    required: list[str],
    folder: Path | None = None,
    pending: dict[str, str] | None = None,
    fork_head_tree: TreeSha | None = None,
    allow_pending: Collection[str] = (),
) -> GateVerdict:
    """May this series merge? Evidence for exactly this series and test suite, all passing, every
    required environment covered. A tag `pending` lists (default: the manifest's validation.pending) is
    never covered by older evidence and fails the gate with its reason, unless `allow_pending` names it:
    then it is reported as accepted (a project's own CI may accept it; a move never should silently).
    With `fork_head_tree` (the package tree of apply(series, base), read from an upstream clone), each
    run's tested tree must be exactly it. Malformed evidence for this series, or an `allow_pending` tag
    that is not a required pending one, raises BadInput."""
    folder = evidence_dir(manifest, folder)
    pending = dict(manifest.validation.pending if pending is None else pending)
    suites = CurrentSuites(manifest)
    suite = suites.get(manifest.validation.gpu_tests)
    path = evidence_path(folder, series.digest)
    verdict = GateVerdict(
        series_digest=series.digest,
        suite_digest=suite.digest,
        evidence_file=repo_relative(path, manifest.root) if path.exists() else None,
        required=required,
        pending={tag: why for tag, why in pending.items() if tag in required},
    )
    verdict.allowed_pending = _accepted(list(dict.fromkeys(allow_pending)), verdict)
    if not path.exists():
        _explain_missing(manifest, series, suites, folder, verdict)
        return verdict
    evidence = load_evidence(path)
    rel = repo_relative(path, manifest.root)
    if manifest.validation.allowed_signers:
        signed = signing.verify(path, manifest.validation.allowed_signers)
        verdict.signed_by = signed.principal if signed.ok else None
        if not signed.ok:
            verdict.problems.append(Finding(f"the evidence is not trusted: {signed.detail}", SIGN_HINT, rel))
    if evidence.base != series.base or [p.sha256 for p in evidence.patches] != [
        p.sha256 for p in patch_records(manifest, series)
    ]:
        verdict.problems.append(
            Finding(
                "the evidence file's base or patch hashes do not match the series it is named for",
                RERUN_HINT,
                rel,
            )
        )
    _judge_runs(manifest, series, evidence.runs, suites, rel, verdict, fork_head_tree)
    if not evidence.runs:
        verdict.problems.append(Finding("the evidence file records no run", RERUN_HINT, rel))
    return verdict


def _accepted(allow_pending: list[str], verdict: GateVerdict) -> list[str]:
    """Only a required tag the manifest lists as pending (with its reason) can be accepted unrecorded:
    naming any other is a mistake to say at once, not an acceptance that silently means nothing."""
    for tag in allow_pending:
        if tag not in verdict.pending:
            what = "is not required" if tag not in verdict.required else "is required and not pending"
            raise BadInput(
                f"--allow-pending {tag}: {tag} {what} (validation.pending lists: "
                f"{', '.join(verdict.pending) or 'none'})",
                hint="name only an environment validation.pending lists, or drop the option; "
                "one named by --require is not pending",
            )
    return allow_pending


def _judge_runs(
    manifest: Manifest,
    series: Series,
    runs: list[Run],
    suites: CurrentSuites,
    rel: str,
    verdict: GateVerdict,
    fork_head_tree: TreeSha | None = None,
) -> None:
    """Sort the runs into misplaced (wrong suite for the tag), stale (the suite changed since) and
    current ones, record what each contributes, then name every required tag nothing explains."""
    misplaced = [run for run in runs if run.gpu_tests.root != suite_root(manifest, run.environment.tag)]
    verdict.problems.extend(_misplaced_problem(manifest, run, rel) for run in misplaced)
    placed = [run for run in runs if run not in misplaced]
    current = [run for run in placed if suites.is_current(run)]
    stale = [run for run in placed if not suites.is_current(run)]
    verdict.covered = sorted(run.environment.tag for run in current)
    for run in current:
        verdict.baselines[run.environment.tag] = baseline_of(run)
        failed = _run_problems(run, rel)
        problems = [
            *failed,
            *tested.tree_problems(manifest, series, run, rel, fork_head_tree),
            *tested.library_problems(manifest, run, rel),
        ]
        if run.environment.tag in verdict.pending and problems:
            # A pending tag's run that would not pass is no evidence for it: it stays pending. But a failed
            # run is never covered by the pending entry: its failures are the gate's, accepted or not.
            verdict.covered.remove(run.environment.tag)
            problems = failed
        for problem in problems:
            problem.env = run.environment.tag
        verdict.problems.extend(problems)
        verdict.warnings.extend(tested.order_dependent_warnings(run.upstream_tests, run.environment.tag, rel))
        # A skip is not a failure (a test may need hardware this host lacks), but say so.
        verdict.warnings.extend(
            Finding(
                f"test {t.nodeid} was skipped in the evidence for {run.environment.tag}: {t.message}",
                file=rel,
            )
            for t in run.tests
            if t.outcome == "skipped"
        )
    _judge_stale(manifest, stale, current, suites, rel, verdict)
    explained = {run.environment.tag for run in [*stale, *misplaced]}
    for tag in verdict.required:
        if tag in verdict.pending:
            covered, accepted = tag in verdict.covered, tag in verdict.allowed_pending
            finding = tested.pending_finding(tag, verdict.pending[tag], covered, accepted, rel)
            (verdict.warnings if covered or accepted else verdict.problems).append(finding)
        elif tag not in verdict.covered and tag not in explained:
            verdict.problems.append(
                Finding(
                    f"no evidence for environment {tag} (the evidence covers: "
                    f"{', '.join(verdict.covered) or 'none'})",
                    f"run `{validate_command(tag)}` on a {tag} host and commit the updated evidence",
                    rel,
                    env=tag,
                )
            )


def baseline_of(run: Run) -> str:
    """What the run's benchmark quoted its speedup against, with the layer speedup at its largest size:
    Transformer Engine's grouped linears where TE was installed, else the per-expert loop (evidence
    recorded before the benchmark named its baseline measured only the loop)."""
    bench = run.benchmark or {}
    sizes = bench.get("sizes") or []
    if bench.get("status") != "ok" or not sizes:
        return "none measured (no benchmark in this run)"
    baseline = bench.get("baseline") or {"name": "per_expert"}
    largest = max(sizes, key=lambda size: size.get("routed_rows", 0))
    grouped = largest.get("arms", {}).get("torch_grouped", {})
    if baseline.get("name") == "transformer_engine":
        label, speedup = f"Transformer Engine {baseline.get('version', '?')}", grouped.get("speedup_vs_te")
    else:
        label, speedup = "per-expert loop", grouped.get("speedup_vs_per_expert")
    if not isinstance(speedup, (int, float)):
        return label
    return f"{label} (torch_grouped {speedup:.2f}x at {largest.get('routed_rows', 0):,} rows)"


def _judge_stale(
    manifest: Manifest,
    stale: list[Run],
    current: list[Run],
    suites: CurrentSuites,
    rel: str,
    verdict: GateVerdict,
) -> None:
    """One finding per suite folder: the single-GPU suite and the multi-GPU one change independently.
    A problem where the stale runs were needed, else a warning."""
    for root in sorted({run.gpu_tests.root for run in stale}):
        group = [run for run in stale if run.gpu_tests.root == root]
        newest = max(group, key=lambda run: run.finished_at)
        tags = ", ".join(sorted(run.environment.tag for run in group))
        changes = "; ".join(suite_changes(newest.gpu_tests, suites.get(root)))
        what = "the GPU tests" if root == manifest.validation.gpu_tests else f"the GPU tests in {root}/"
        finding = Finding(
            f"{what} changed since the evidence for {tags} was recorded ({changes})",
            RERUN_HINT,
            rel,
            env=group[0].environment.tag if len(group) == 1 else None,
        )
        only_pending = all(run.environment.tag in verdict.pending for run in group)
        needed = (not current and not only_pending) or _stale_needed(
            group, current, verdict.required, verdict.pending
        )
        (verdict.problems if needed else verdict.warnings).append(finding)


def _misplaced_problem(manifest: Manifest, run: Run, rel: str) -> Finding:
    tag = run.environment.tag
    return Finding(
        f"the evidence for {tag} was recorded from {run.gpu_tests.root}/, but {tag} needs a run of "
        f"{suite_root(manifest, tag)}/",
        f"run `{validate_command(tag)}` on a {tag} host and commit the updated evidence",
        rel,
        env=tag,
    )


def _stale_needed(stale: list[Run], current: list[Run], required: list[str], pending: dict[str, str]) -> bool:
    """A stale run matters when its tag is required (and not pending) and no current run covers it."""
    covered = {run.environment.tag for run in current}
    return any(
        run.environment.tag in required and run.environment.tag not in covered | set(pending) for run in stale
    )


def _run_problems(run: Run, rel: str) -> list[Finding]:
    tag = run.environment.tag
    problems = []
    for test in run.tests:
        if test.outcome in ("failed", "error"):
            reason = f": {test.message}" if test.message else ""
            verb = "failed" if test.outcome == "failed" else "errored"
            problems.append(
                Finding(
                    f"test {test.nodeid} {verb} in the evidence for {tag}{reason}",
                    "fix the patch or the test, then " + RERUN_HINT,
                    rel,
                )
            )
    if not problems and not any(test.outcome == "passed" for test in run.tests):
        problems.append(
            Finding(f"the evidence for {tag} records no test that ran and passed", RERUN_HINT, rel)
        )
    if run.status != "passed" and not problems:
        problems.append(
            Finding(
                f"the run for {tag} ended with status {run.status} (pytest exit code {run.pytest_exit_code})",
                RERUN_HINT,
                rel,
            )
        )
    return problems


def _series_changes(recorded: Evidence, manifest: Manifest, series: Series) -> list[str]:
    """What differs between the series the evidence was recorded for and the current one."""
    changes = []
    if recorded.base != series.base:
        changes.append(f"the upstream base moved from {recorded.base[:12]} to {series.base[:12]}")
    current = patch_records(manifest, series)
    old_by_file = {p.file: p for p in recorded.patches}
    old_by_hash = {p.sha256: p for p in recorded.patches}
    matched: set[str] = set()
    for position, patch in enumerate(current):
        name = PurePosixPath(patch.file).name
        if patch.file in old_by_file:
            matched.add(patch.file)
            old = old_by_file[patch.file]
            if old.sha256 != patch.sha256:
                changes.append(f"patch {name} changed since the evidence was recorded")
            elif recorded.patches.index(old) != position:
                changes.append(f"patch {name} moved in the series order")
        elif patch.sha256 in old_by_hash:
            old = old_by_hash[patch.sha256]
            matched.add(old.file)
            changes.append(f"patch {name} was renamed from {PurePosixPath(old.file).name}")
        else:
            changes.append(f"patch {name} is new since the evidence was recorded")
    for old in recorded.patches:
        if old.file not in matched:
            changes.append(
                f"patch {PurePosixPath(old.file).name} was in the evidence but is no longer in the series"
            )
    return changes


def _readable_evidence(manifest: Manifest, folder: Path, verdict: GateVerdict) -> list[tuple[Path, Evidence]]:
    """Every evidence file in `folder` that parses; the others become warnings."""
    candidates: list[tuple[Path, Evidence]] = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            candidates.append((path, load_evidence(path)))
        except BadInput as exc:
            verdict.warnings.append(
                Finding(
                    f"skipped while looking for the nearest evidence: {exc.message}",
                    file=repo_relative(path, manifest.root),
                )
            )
    return candidates


def _explain_missing(
    manifest: Manifest, series: Series, suites: CurrentSuites, folder: Path, verdict: GateVerdict
) -> None:
    """No evidence for this digest: find the nearest evidence and say what changed since."""
    candidates = _readable_evidence(manifest, folder, verdict)
    digest = series.digest[:12]
    if not candidates:
        verdict.problems.append(
            Finding(
                f"no GPU evidence for series {digest} (nothing in {repo_relative(folder, manifest.root)}/)",
                RERUN_HINT,
            )
        )
        return

    def distance(item: tuple[Path, Evidence]) -> tuple[int, float]:
        newest = max((run.finished_at.timestamp() for run in item[1].runs), default=0.0)
        return len(_series_changes(item[1], manifest, series)), -newest

    path, nearest = min(candidates, key=distance)
    rel = repo_relative(path, manifest.root)
    for change in _series_changes(nearest, manifest, series):
        verdict.problems.append(Finding(f"{change} (nearest evidence: {rel})", RERUN_HINT, rel))
    if nearest.runs and not any(suites.is_current(run) for run in nearest.runs):
        newest = max(nearest.runs, key=lambda run: run.finished_at)
        changes = "; ".join(suite_changes(newest.gpu_tests, suites.get(newest.gpu_tests.root)))
        verdict.problems.append(Finding(f"the GPU tests changed too: {changes}", RERUN_HINT, rel))
    if not verdict.problems:
        verdict.problems.append(Finding(f"no GPU evidence for series {digest}", RERUN_HINT))


class GateSummary(msgspec.Struct):
    """The gate's verdict on the current series and the evidence file it read, for a pull-request body;
    `error` when the gate could not judge (no GPU test folder, malformed evidence)."""

    verdict: GateVerdict | None
    evidence: Evidence | None = None
    error: str | None = None


def summarise(manifest: Manifest) -> GateSummary:
    """`check` on the current series with the manifest's required environments, never raising on input."""
    from forkctl.series import load_series

    try:
        verdict = check(
            manifest, load_series(manifest), list(manifest.validation.require)
        )  # pending: the manifest's
        found = evidence_path(evidence_dir(manifest), verdict.series_digest)
        return GateSummary(verdict, load_evidence(found) if verdict.evidence_file else None)
    except BadInput as exc:
        return GateSummary(None, error=exc.message + (f" (fix: {exc.hint})" if exc.hint else ""))
