"""What a run must have tested for the gate: the fork head apply(series, base) built from upstream's
base (and, given its package tree from an upstream clone, exactly that tree), with upstream's own tests
of the touched modules no worse on it than on the base; and how a pending environment is said."""

from __future__ import annotations

from forkctl.git.sha import TreeSha
from forkctl.gpu.evidence import RERUN_HINT, Run, UpstreamRegression, ep_size, validate_command
from forkctl.gpu.findings import Finding
from forkctl.manifest import Manifest
from forkctl.manifest.validation import version_matches
from forkctl.series import Series


def pending_finding(tag: str, why: str, covered: bool, accepted: bool, rel: str) -> Finding:
    """A pending tag is never counted as covered: unless the caller accepted it by name it fails the gate,
    with the manifest's reason; say too when the pending entry is obsolete."""
    if covered:
        return Finding(
            f"environment {tag} is listed in validation.pending but the evidence now covers it",
            f"remove {tag} from validation.pending in manifest.yaml (and any `--allow-pending {tag}`) so "
            "the gate requires it again",
            rel,
        )
    record = f"run `{validate_command(tag)}` on a {tag} host, commit the evidence, and remove {tag} from validation.pending"
    if accepted:
        return Finding(
            f"environment {tag} is required but PENDING, accepted by --allow-pending {tag}: not recorded "
            f"for this series ({why}); no older evidence counts for it",
            record,
            rel,
        )
    return Finding(
        f"environment {tag} is required but PENDING: not recorded for this series ({why}); "
        "no older evidence counts for it",
        f"{record}; or, where the project accepts it unrecorded (its own CI), name it: "
        f"`forkctl gate --allow-pending {tag}`",
        rel,
        env=tag,
    )


def tree_problems(
    manifest: Manifest, series: Series, run: Run, rel: str, fork_head_tree: TreeSha | None
) -> list[Finding]:
    """The run must have tested the fork head, apply(series, base), built from upstream's base, and
    upstream's tests of the touched modules must be no worse on it than on the base."""
    tag, tested = run.environment.tag, run.tested
    hint = (
        f"run `{validate_command(tag)}` with `git archive --format=tar.gz -o base.tgz "
        f"{series.base} megatron tests` made on any upstream clone"
    )
    if tested is None or tested.source != "upstream-base":
        what = (
            "records no tested tree"
            if tested is None
            else f"tested {tested.distribution or 'the installed release'}"
        )
        return [Finding(f"the evidence for {tag} {what}, not the fork head apply(series, base)", hint, rel)]
    if tested.base_commit != series.base:
        return [
            Finding(
                f"the evidence for {tag} tested a fork head built on {tested.base_commit}, not on the base "
                f"{series.base}",
                hint,
                rel,
            )
        ]
    if fork_head_tree is not None and tested.package_tree != fork_head_tree:
        return [
            Finding(
                f"the evidence for {tag} tested the package tree {tested.package_tree}, but the fork head "
                f"apply(series, base) has {fork_head_tree}",
                hint,
                rel,
            )
        ]
    if ep_size(tag) is not None or not manifest.validation.upstream_tests:
        return []
    regression = run.upstream_tests
    if regression is None:
        return [
            Finding(
                f"the evidence for {tag} records no run of upstream's tests (validation.upstream_tests)",
                hint,
                rel,
            )
        ]
    idle = [
        Finding(
            f"the evidence for {tag} ran no upstream test on the {tree} ({', '.join(regression.paths)}: none "
            "collected, or all skipped): nothing was compared",
            f"{hint}, holding upstream's tests (validation.upstream_tests names paths inside it)",
            rel,
        )
        for tree in regression.idle_trees
    ]
    return idle + failing_findings(regression, tag, rel)


def failing_findings(regression: UpstreamRegression, tag: str, rel: str) -> list[Finding]:
    """One finding per test that failed on the fork head: upstream's own that pass on the base, and the
    series' own (only the fork head has them), each with the first line of why it failed."""
    newly = [
        Finding(
            f"upstream test {nodeid} passes on the base and fails on the fork head in the evidence for "
            f"{tag}{regression.why(nodeid)}",
            "fix the patch that breaks it, then " + RERUN_HINT,
            rel,
        )
        for nodeid in regression.newly_failing
    ]
    head_only = [
        Finding(
            f"test {nodeid}, which only the fork head has, failed in the evidence for {tag}{regression.why(nodeid)}",
            "fix the patch that carries it, then " + RERUN_HINT,
            rel,
        )
        for nodeid in regression.head_only_failing
    ]
    return newly + head_only


def library_problems(manifest: Manifest, run: Run, rel: str) -> list[Finding]:
    """The run's recorded library versions against those `validation.environments` pins for its tag:
    evidence from another combination than the one validated does not count for the environment."""
    tag = run.environment.tag
    pins = manifest.validation.environments.get(tag)
    if pins is None:
        return []
    problems = []
    for library, wanted in pins.pinned().items():
        recorded = getattr(run.environment, library)
        if version_matches(wanted, recorded):
            continue
        key = f"validation.environments.{tag}.{library}"
        problems.append(
            Finding(
                f"the evidence for {tag} was recorded with {library} {recorded}, but {key} is {wanted} "
                "(a pin matches that version and those it prefixes at a '.', '+' or '-')",
                f"run `{validate_command(tag)}` on a {tag} host with {library} {wanted} and commit the "
                f'evidence; or, to validate {library} {recorded} instead, set {key}: "{recorded}" in '
                "manifest.yaml in the same reviewed change as that evidence",
                rel,
            )
        )
    return problems


def order_dependent_warnings(regression: UpstreamRegression | None, tag: str, rel: str) -> list[Finding]:
    """Upstream tests that failed on the fork head only after others and passed alone on both trees."""
    return [
        Finding(
            f"upstream test {nodeid} failed on the fork head in the full run of the evidence for {tag} and "
            "passed when re-run alone on the base and on the fork head: order-dependent state in upstream's "
            "suite, not counted as a regression",
            file=rel,
            env=tag,
        )
        for nodeid in (regression.order_dependent if regression is not None else [])
    ]
