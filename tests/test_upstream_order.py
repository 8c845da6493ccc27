"""Upstream's own tests, run on the base and on the fork head in one process each, share global state
(model-parallel groups): a test can fail after another one and pass alone, on either tree, from run to
run (on an H100 on 2026-12-06, test_a2a_token_dispatcher's [False-1-1] failed on the fork head in one
validate run and its [True-1-1] on the base in the next). validate re-runs a test that failed on the fork
head only, alone on both trees: passing alone on both, it is recorded as order-dependent (shown by the
gate, not a regression); failing alone on the fork head, it stays a regression."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import msgspec

from forkctl.gpu import upstream
from forkctl.gpu.evidence import TestCounts, UpstreamRegression
from forkctl.gpu.tested import failing_findings, order_dependent_warnings

# One module's global state that a test leaves dirty on the fork head only (as a failed model-parallel
# initialisation leaves its groups) and another test reads.
STATE = "DIRTY = False\n"
FIRST = "from tests import state\n\n\ndef test_first():\n    state.DIRTY = {dirty}\n"
SECOND = "from tests import state\n\n\ndef test_second():\n    assert not state.DIRTY\n"
BROKEN = "def test_broken():\n    assert {ok}\n"
# A test only the fork head has (the series' own), failing with a message of its own.
OWN = (
    "def test_own():\n"
    "    assert 'packed' == 'unpacked', 'the experts were not packed (https://bot:s3cret@example.com/x)'\n"
)


def tree(root: Path, dirty: bool, broken_ok: bool) -> Path:
    tests = root / "tests"
    tests.mkdir(parents=True)
    (tests / "__init__.py").write_text("")
    (tests / "state.py").write_text(STATE)
    (tests / "test_a_first.py").write_text(FIRST.format(dirty=dirty))
    (tests / "test_b_second.py").write_text(SECOND)
    (tests / "test_c_broken.py").write_text(BROKEN.format(ok=broken_ok))
    if not broken_ok:  # the fork head: it also carries the series' own test
        (tests / "test_d_own.py").write_text(OWN)
    return root


def run(tmp_path: Path) -> UpstreamRegression:
    base = tree(tmp_path / "base", dirty=False, broken_ok=True)
    head = tree(tmp_path / "head", dirty=True, broken_ok=False)
    env = {**os.environ, "PYTHONPATH": ""}
    return upstream.regression(
        sys.executable, ["tests"], (base, head), env, tmp_path / "site", 120, lambda message: None
    )


def test_a_test_that_passes_alone_on_both_trees_is_order_dependent_not_a_regression(tmp_path: Path) -> None:
    found = run(tmp_path)
    assert found.order_dependent == ["tests/test_b_second.py::test_second"]
    assert found.newly_failing == ["tests/test_c_broken.py::test_broken"]  # fails alone too: a regression
    assert found.head_only_failing == ["tests/test_d_own.py::test_own"]


def test_the_evidence_says_why_each_failing_test_failed_and_the_gate_repeats_it(tmp_path: Path) -> None:
    """A failed run is read from its evidence alone: on 2026-12-06 one H100 run failed 35 of the series'
    own tests in upstream's run and passed them in the next two; its JUnit was gone with the scratch folder,
    so nobody could say why. The first line pytest gave for each failure is now recorded and shown."""
    found = run(tmp_path)
    messages = found.failure_messages
    # The order-dependent test keeps the message of its failure in the full run too.
    assert sorted(messages) == [
        "tests/test_b_second.py::test_second",
        "tests/test_c_broken.py::test_broken",
        "tests/test_d_own.py::test_own",
    ]
    assert "assert False" in messages["tests/test_c_broken.py::test_broken"]
    assert "the experts were not packed" in messages["tests/test_d_own.py::test_own"]
    # A failure's text is stored in the evidence file: no credentials from a URL in it.
    assert "s3cret" not in messages["tests/test_d_own.py::test_own"]
    assert "https://***@example.com/x" in messages["tests/test_d_own.py::test_own"]
    decoded = msgspec.json.decode(msgspec.json.encode(found), type=UpstreamRegression)
    assert decoded.failure_messages == messages
    # Evidence recorded before the field existed still reads, with no messages.
    older = msgspec.json.decode(msgspec.json.encode(found))
    del older["failure_messages"]
    assert msgspec.json.decode(msgspec.json.encode(older), type=UpstreamRegression).failure_messages == {}
    findings = {f.message: f for f in failing_findings(found, "sm90", "validation/x.json")}
    own = next(m for m in findings if "test_own" in m)
    assert "which only the fork head has" in own and "passes on the base" not in own
    assert "the experts were not packed" in own
    broken = next(m for m in findings if "test_broken" in m)
    assert "passes on the base and fails on the fork head" in broken and "assert False" in broken


def test_the_gate_shows_an_order_dependent_test_and_does_not_fail_for_it() -> None:
    counts = TestCounts(passed=3)
    found = UpstreamRegression(
        paths=["tests"],
        base=counts,
        head=counts,
        newly_failing=[],
        head_only_failing=[],
        base_exit_code=0,
        head_exit_code=1,
        order_dependent=["tests/test_b_second.py::test_second"],
    )
    assert found.ok
    warnings = order_dependent_warnings(found, "sm90", "validation/x.json")
    assert len(warnings) == 1
    assert "tests/test_b_second.py::test_second" in warnings[0].message
    assert "alone" in warnings[0].message
