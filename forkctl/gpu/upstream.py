"""Upstream's own tests of the modules the series touches, on the base and on the fork head, compared.

Many of them need Transformer Engine or more GPUs than the host has and fail or skip on both trees
alike; what matters is the difference: a test that passes on the base and fails (or errors) on the fork
head is a regression the series brought, and fails the validate run, unless it passes when re-run alone
on both trees (upstream's tests share global state, such as model-parallel groups, that one failing test
can leave behind): such a test is recorded as order-dependent and shown, not counted. Tests only the fork head has (the
series' own, added beside upstream's) must not fail either. Each tree runs in its own folder, so
`tests.unit_tests...` and `megatron` are imported from that tree alone.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import msgspec

from forkctl.gpu.evidence import TestCounts, TestOutcome, UpstreamRegression
from forkctl.gpu.junit import parse_junit, pytest_command, run_pytest

Progress = Callable[[str], None]


def counts(outcomes: list[TestOutcome]) -> TestCounts:
    by_kind = {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
    for outcome in outcomes:
        by_kind[outcome.outcome] += 1
    return TestCounts(
        passed=by_kind["passed"],
        failed=by_kind["failed"],
        errors=by_kind["error"],
        skipped=by_kind["skipped"],
    )


def compare(
    paths: list[str], base: list[TestOutcome], head: list[TestOutcome], exit_codes: tuple[int, int]
) -> UpstreamRegression:
    """The regression record: counts of each tree, and the head's failures the base did not have."""
    base_by_id = {t.nodeid: t.outcome for t in base}
    bad = ("failed", "error")
    newly = sorted(t.nodeid for t in head if t.outcome in bad and base_by_id.get(t.nodeid) == "passed")
    head_only = sorted(t.nodeid for t in head if t.outcome in bad and t.nodeid not in base_by_id)
    failing = set(newly) | set(head_only)
    messages = {t.nodeid: t.message for t in head if t.nodeid in failing and t.message}
    return UpstreamRegression(
        paths=paths,
        base=counts(base),
        head=counts(head),
        newly_failing=newly,
        head_only_failing=head_only,
        base_exit_code=exit_codes[0],
        head_exit_code=exit_codes[1],
        failure_messages=messages,
    )


# Upstream's test utilities rendezvous at MASTER_ADDR:MASTER_PORT (default 29500): the two trees run at
# once, so each gets a port of its own.
RENDEZVOUS_PORTS = (29517, 29518)


def _env(env: dict[str, str], root: Path, site: Path, port: int) -> dict[str, str]:
    """The child environment with this tree first on PYTHONPATH instead of the patched site."""
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p) != site]
    return {
        **env,
        "PYTHONPATH": os.pathsep.join([str(root), *rest]),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
    }


def run_tree(
    python: str, root: Path, paths: list[str], env: dict[str, str], timeout: int, junit: Path
) -> tuple[int, list[TestOutcome], str]:
    """pytest on `paths` of one tree: (exit code, outcomes, output tail). Raises on a crash or timeout."""
    present = [path for path in paths if (root / path).exists()]
    if not present:
        return 0, [], "none of the paths exists in this tree"
    args = pytest_command(python, present, junit, "--continue-on-collection-errors")
    what = f"upstream's tests in {root.name}"
    finished = run_pytest(
        args, junit, timeout, env, root, what, "raise --timeout, or narrow validation.upstream_tests"
    )
    assert finished.returncode is not None  # run_pytest raised on a time-out
    return finished.returncode, parse_junit(junit), finished.tail(3)


def regression(
    python: str,
    paths: list[str],
    roots: tuple[Path, Path],
    env: dict[str, str],
    site: Path,
    timeout: int,
    progress: Progress,
) -> UpstreamRegression:
    """Run upstream's tests on the base and on the fork head (at once: they are independent processes
    and share one GPU easily), and compare them."""
    progress(f"running upstream's tests ({', '.join(paths)}) on the base and on the fork head")
    with ThreadPoolExecutor(max_workers=len(roots)) as pool:
        futures = [
            pool.submit(
                run_tree,
                python,
                root,
                paths,
                _env(env, root, site, port),
                timeout,
                root.parent / f"upstream-{root.name}.xml",
            )
            for root, port in zip(roots, RENDEZVOUS_PORTS, strict=True)
        ]
        (base_code, base, _), (head_code, head, _) = [future.result() for future in futures]
    found = compare(paths, base, head, (base_code, head_code))
    if not found.newly_failing or len(found.newly_failing) > ALONE_AT_MOST:
        return found
    progress(
        f"re-running {len(found.newly_failing)} test(s) that failed on the fork head alone, on both trees"
    )
    alone = [
        _passed_alone(python, root, found.newly_failing, _env(env, root, site, port), timeout)
        for root, port in zip(roots, RENDEZVOUS_PORTS, strict=True)
    ]
    order_dependent = sorted(set(alone[0]) & set(alone[1]))
    newly = [nodeid for nodeid in found.newly_failing if nodeid not in order_dependent]
    return msgspec.structs.replace(found, newly_failing=newly, order_dependent=order_dependent)


# More tests than this failing on the fork head alone is a regression, not upstream's order: not re-run.
ALONE_AT_MOST = 20


def _passed_alone(
    python: str, root: Path, nodeids: list[str], env: dict[str, str], timeout: int
) -> list[str]:
    """The tests of `nodeids` that pass in a pytest of their own on this tree (one process each: apart
    from the rest of the suite and from each other)."""
    passed = []
    for number, nodeid in enumerate(nodeids):
        junit = root.parent / f"alone-{root.name}-{number}.xml"
        args = pytest_command(python, [nodeid], junit)
        finished = run_pytest(
            args, junit, timeout, env, root, f"{nodeid} alone in {root.name}", "raise --timeout"
        )
        if finished.returncode == 0 and [t.outcome for t in parse_junit(junit)] == ["passed"]:
            passed.append(nodeid)
    return passed
