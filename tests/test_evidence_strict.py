"""Evidence JSON that two readers could read differently is refused by `sign` and by `gate` (exit 2,
naming the file): duplicate keys, NaN/Infinity, a lone surrogate escape, a byte-order mark. Real keys,
real ssh-keygen, the real CLI."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from forkctl.cli import cli
from forkctl.errors import BadInput
from forkctl.gpu import signing
from tests.test_evidence import gpu_toolkit, load, make_run, record
from tests.test_signing import keypair, require_signers
from tests.toolkit import Toolkit

TEST_ID = "tests/gpu/test_parity.py::test_parity"


def failed_evidence(tmp_path: Path) -> tuple[Toolkit, Path, Path]:
    """A toolkit whose signed-evidence requirement is set, and evidence that records a failed run."""
    toolkit = gpu_toolkit(tmp_path / "t")
    key, line = keypair(tmp_path, "h200-runner")
    require_signers(toolkit, line)
    path = record(toolkit, make_run(load(toolkit), outcomes={TEST_ID: "failed"}))
    return toolkit, path, key


def with_second_outcome(path: Path) -> None:
    """Rewrite the file so the failed test's outcome key appears twice: first "failed", then "passed"
    (and the run's status likewise). Python's json keeps the last, other readers the first."""
    text = path.read_text()
    assert text.count('"outcome": "failed"') == 1 and text.count('"status": "failed"') == 1
    text = text.replace('"outcome": "failed"', '"outcome": "failed",\n "outcome": "passed"')
    text = text.replace('"status": "failed"', '"status": "failed",\n "status": "passed"')
    path.write_text(text)


def sign_anyway(path: Path, key: Path) -> None:
    """Sign the file's bytes with plain ssh-keygen (as an older forkctl, or a person, would)."""
    done = subprocess.run(
        ["ssh-keygen", "-Y", "sign", "-q", "-f", str(key), "-n", signing.NAMESPACE],
        input=path.read_bytes(),
        capture_output=True,
        check=True,
    )
    signing.signature_path(path).write_bytes(done.stdout)


def run(toolkit: Toolkit, *args: str):
    return CliRunner().invoke(cli, ["--manifest", str(toolkit.manifest), *args])


def test_sign_refuses_evidence_with_a_duplicate_key(tmp_path: Path) -> None:
    toolkit, path, key = failed_evidence(tmp_path)
    with_second_outcome(path)
    result = run(toolkit, "sign", "--key", str(key))
    assert result.exit_code == 2, result.output
    assert path.name in result.output and "twice" in result.output
    assert not signing.signature_path(path).exists()


def test_gate_refuses_signed_evidence_with_a_duplicate_key(tmp_path: Path) -> None:
    toolkit, path, key = failed_evidence(tmp_path)
    assert run(toolkit, "gate").exit_code == 1  # sanity: the recorded failure fails the gate
    with_second_outcome(path)
    sign_anyway(path, key)
    assert signing.verify(path, load(toolkit).validation.allowed_signers).ok
    result = run(toolkit, "gate")
    assert result.exit_code == 2, result.output
    assert path.name in result.output and "twice" in result.output


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda text: text.replace('"duration_s": 0.5', '"duration_s": NaN', 1), "NaN"),
        (lambda text: text.replace('"duration_s": 0.5', '"duration_s": Infinity', 1), "Infinity"),
        (lambda text: text.replace('"duration_s": 0.5', '"duration_s": 1e999', 1), "too large"),
        (lambda text: text.replace('"gpu_name": "', '"gpu_name": "\\ud800', 1), "surrogate"),
        (lambda text: "\ufeff" + text, "byte-order mark"),
    ],
    ids=["nan", "infinity", "overflow", "lone-surrogate", "bom"],
)
def test_sign_and_gate_refuse_json_readers_disagree_on(tmp_path: Path, change, said: str) -> None:
    toolkit, path, key = failed_evidence(tmp_path)
    text = path.read_text()
    changed = change(text)
    assert changed != text
    path.write_text(changed, encoding="utf-8")
    signed = run(toolkit, "sign", "--key", str(key))
    assert signed.exit_code == 2, signed.output
    assert path.name in signed.output and said in signed.output
    sign_anyway(path, key)
    gated = run(toolkit, "gate")
    assert gated.exit_code == 2, gated.output
    assert path.name in gated.output and said in gated.output


def test_well_formed_evidence_still_signs(tmp_path: Path) -> None:
    toolkit, path, key = failed_evidence(tmp_path)
    json.loads(path.read_text())
    result = run(toolkit, "sign", "--key", str(key))
    assert result.exit_code == 0, result.output
    assert signing.signature_path(path).is_file()


def test_the_signer_itself_refuses_ambiguous_bytes(tmp_path: Path) -> None:
    """signing.sign checks the very bytes it signs (validate --sign-key signs through it too)."""
    _, path, key = failed_evidence(tmp_path)
    with_second_outcome(path)
    with pytest.raises(BadInput, match="twice"):
        signing.sign(path, key)
    assert not signing.signature_path(path).exists()
