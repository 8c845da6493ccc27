"""Pending is not passed: the default gate fails while a required environment lacks evidence for the
current series, `validation.pending` or not; only `--allow-pending ENV` accepts a named pending one, and
the verdict says so with the manifest's reason."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from forkctl.gpu import gate as gate_core
from forkctl.series import load_series
from tests.test_evidence import gpu_toolkit, load, make_run, record
from tests.test_fork_head_evidence import with_validation
from tests.test_gate import _env_rows, gate, gate_json, problems
from tests.toolkit import Toolkit, flat

WHY = "no 2-GPU host was lent"


def pending_toolkit(tmp_path: Path) -> Toolkit:
    """sm90 recorded and passing; sm90-ep2 required, listed as pending with a reason, never recorded."""
    toolkit = gpu_toolkit(tmp_path)
    with_validation(toolkit, require=["sm90", "sm90-ep2"], pending={"sm90-ep2": WHY})
    record(toolkit, make_run(load(toolkit)))
    return toolkit


def test_the_default_gate_fails_while_a_required_environment_is_pending(tmp_path: Path) -> None:
    toolkit = pending_toolkit(tmp_path)
    code, payload = gate_json(toolkit)
    assert code == 1, payload
    assert payload["ok"] is False
    errors = problems(payload)
    assert any("sm90-ep2" in m and "PENDING" in m and WHY in m for m in errors), errors
    hints = [p["hint"] or "" for p in payload["problems"] if "sm90-ep2" in p["message"]]
    assert any("--allow-pending sm90-ep2" in h for h in hints), hints
    assert payload["allowed_pending"] == []
    assert _env_rows(toolkit)["sm90-ep2"].startswith("PENDING"), _env_rows(toolkit)


def test_allow_pending_accepts_exactly_the_named_environment_and_says_so(tmp_path: Path) -> None:
    toolkit = pending_toolkit(tmp_path)
    code, payload = gate_json(toolkit, "--allow-pending", "sm90-ep2")
    assert code == 0, problems(payload)
    assert payload["allowed_pending"] == ["sm90-ep2"]
    assert payload["pending"] == {"sm90-ep2": WHY}
    assert payload["covered"] == ["sm90"]  # accepted, never counted as covered
    text = flat(gate(toolkit, "--allow-pending", "sm90-ep2").output)
    assert "accepted by --allow-pending: sm90-ep2" in text and WHY in text, text
    assert "accepted by --allow-pending" in _env_rows(toolkit, "--allow-pending", "sm90-ep2")["sm90-ep2"]


def test_allow_pending_accepts_no_other_environment(tmp_path: Path) -> None:
    """Two pending environments: naming one leaves the other failing the gate."""
    toolkit = gpu_toolkit(tmp_path)
    with_validation(
        toolkit,
        require=["sm90", "sm90-ep2", "sm90-ep4"],
        pending={"sm90-ep2": WHY, "sm90-ep4": "no 4-GPU host"},
    )
    record(toolkit, make_run(load(toolkit)))
    code, payload = gate_json(toolkit, "--allow-pending", "sm90-ep2")
    assert code == 1
    assert any("sm90-ep4" in m and "no 4-GPU host" in m for m in problems(payload)), problems(payload)
    assert not any("sm90-ep2" in m for m in problems(payload)), problems(payload)
    assert gate_json(toolkit, "--allow-pending", "sm90-ep2", "--allow-pending", "sm90-ep4")[0] == 0


def test_allow_pending_of_an_environment_that_is_not_pending_is_a_usage_error(tmp_path: Path) -> None:
    toolkit = pending_toolkit(tmp_path)
    for tag in ("sm90", "sm90ep2"):  # required but not pending; a typo no requirement names
        code, payload = gate_json(toolkit, "--allow-pending", tag)
        assert code == 2, payload
        assert tag in payload["error"] and "validation.pending" in payload["error"], payload
    # --require insists on a pending tag: accepting it in the same breath contradicts that.
    code, payload = gate_json(toolkit, "--require", "sm90-ep2", "--allow-pending", "sm90-ep2")
    assert code == 2, payload


def test_the_core_check_refuses_pending_unless_the_caller_accepts_it(tmp_path: Path) -> None:
    """What publish, bump-bridge and sync call: strict by default, like the command."""
    toolkit = pending_toolkit(tmp_path)
    loaded = load(toolkit)
    series = load_series(loaded)
    required = list(loaded.validation.require)
    assert not gate_core.check(loaded, series, required).ok
    accepted = gate_core.check(loaded, series, required, allow_pending=["sm90-ep2"])
    assert accepted.ok, accepted.problems
    assert accepted.allowed_pending == ["sm90-ep2"]


def test_the_real_gate_passes_only_with_the_pending_environment_named(repo_root: Path) -> None:
    """The committed evidence: `make test`'s `forkctl gate --allow-pending sm90-ep2` passes, the bare gate
    does not while the manifest lists sm90-ep2 as pending."""
    forkctl = [sys.executable, "-m", "forkctl", "--manifest", str(repo_root / "manifest.yaml"), "gate"]
    strict = subprocess.run(forkctl, capture_output=True, text=True, check=False)
    assert strict.returncode == 1, strict.stdout + strict.stderr
    assert "sm90-ep2" in strict.stdout
    allowed = subprocess.run(
        [*forkctl, "--allow-pending", "sm90-ep2"], capture_output=True, text=True, check=False
    )
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    makefile = (repo_root / "Makefile").read_text()
    assert "$(FORKCTL) gate --allow-pending sm90-ep2\n" in makefile
