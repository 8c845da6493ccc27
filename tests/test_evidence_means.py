"""Evidence means what it says: a run of upstream's tests that ran none is no comparison, and a failed
run is never covered by a `validation.pending` entry (issue 37, item 4). Through `forkctl gate` as CI
runs it, on evidence recorded by forkctl's own writer."""

from __future__ import annotations

from pathlib import Path

import msgspec

from forkctl.gpu import evidence, upstream
from tests.test_evidence import gpu_toolkit, load, make_run, record
from tests.test_fork_head_evidence import with_validation
from tests.test_gate import gate_json, problems

UPSTREAM_PATHS = ["tests/unit_tests/transformer/moe"]


def _regression(base: evidence.TestCounts, head: evidence.TestCounts) -> evidence.UpstreamRegression:
    return evidence.UpstreamRegression(
        paths=UPSTREAM_PATHS,
        base=base,
        head=head,
        newly_failing=[],
        head_only_failing=[],
        base_exit_code=0,
        head_exit_code=0,
    )


def test_zero_upstream_tests_run_on_either_tree_fails_the_gate(tmp_path: Path) -> None:
    toolkit = gpu_toolkit(tmp_path)
    with_validation(toolkit, upstream_tests=UPSTREAM_PATHS)
    run = make_run(load(toolkit))
    none = evidence.TestCounts()
    # An archive without the upstream test paths: nothing ran on either tree, and nothing "got worse".
    record(toolkit, msgspec.structs.replace(run, upstream_tests=_regression(none, none)))
    code, payload = gate_json(toolkit)
    assert code == 1, payload
    assert any("ran no upstream test" in p and "base" in p for p in problems(payload)), problems(payload)
    # All skipped is no run either; one tree running them is not enough.
    skipped = evidence.TestCounts(skipped=4)
    ran = evidence.TestCounts(passed=3)
    record(toolkit, msgspec.structs.replace(run, upstream_tests=_regression(ran, skipped)))
    code, payload = gate_json(toolkit)
    assert code == 1 and any("ran no upstream test" in p and "fork head" in p for p in problems(payload))
    record(toolkit, msgspec.structs.replace(run, upstream_tests=_regression(ran, ran)))
    code, payload = gate_json(toolkit)
    assert code == 0, problems(payload)


def test_a_comparison_that_ran_nothing_is_not_ok() -> None:
    """validate records the run as failed (its status is what `ok` says), not only the gate."""
    none = evidence.TestCounts()
    assert not _regression(none, none).ok
    assert not upstream.compare(UPSTREAM_PATHS, [], [], (5, 5)).ok
    assert _regression(evidence.TestCounts(passed=1), evidence.TestCounts(passed=1)).ok


def test_a_failed_run_of_a_pending_environment_fails_the_gate_even_when_accepted(tmp_path: Path) -> None:
    toolkit = gpu_toolkit(tmp_path)
    with_validation(toolkit, require=["sm90", "sm90-nvl"], pending={"sm90-nvl": "no NVL host"})
    loaded = load(toolkit)
    record(toolkit, make_run(loaded))
    failed = make_run(loaded, tag="sm90-nvl", outcomes={"tests/gpu/test_parity.py::test_parity": "failed"})
    assert failed.status == "failed"
    record(toolkit, failed)
    code, payload = gate_json(toolkit, "--allow-pending", "sm90-nvl")
    assert code == 1, payload
    assert any("test_parity failed in the evidence for sm90-nvl" in p for p in problems(payload))
    # A run with no test that passed is no better.
    record(toolkit, make_run(loaded, tag="sm90-nvl", outcomes={}))
    code, payload = gate_json(toolkit, "--allow-pending", "sm90-nvl")
    assert code == 1 and any("sm90-nvl records no test that ran and passed" in p for p in problems(payload))
