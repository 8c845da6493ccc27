"""Signed GPU evidence: the gate verifies an SSH signature (git's format) by a key the manifest lists,
and refuses unsigned, edited and foreign-signed evidence, saying which. Real keys, real ssh-keygen."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from forkctl.cli import cli
from forkctl.gpu import signing
from tests.test_evidence import gpu_toolkit, load, make_run, record
from tests.toolkit import Toolkit


def keypair(folder: Path, name: str) -> tuple[Path, str]:
    """A fresh ed25519 key without passphrase: (private key path, allowed-signers line)."""
    key = folder / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)], check=True)
    kind, blob = (folder / f"{name}.pub").read_text().split()[:2]
    return key, f"{name}@gpu-runners {kind} {blob}"


def require_signers(toolkit: Toolkit, *lines: str) -> None:
    data = toolkit.manifest_data()
    data.setdefault("validation", {})["allowed_signers"] = list(lines)
    toolkit.write_manifest(data)


def gate(toolkit: Toolkit) -> tuple[int, dict]:
    result = CliRunner().invoke(cli, ["--manifest", str(toolkit.manifest), "gate", "--json"])
    return result.exit_code, json.loads(result.stdout)


def errors(payload: dict) -> list[str]:
    return [p["message"] for p in payload["problems"] if p["level"] == "error"]


@pytest.fixture
def signed(tmp_path: Path) -> tuple[Toolkit, Path, Path]:
    toolkit = gpu_toolkit(tmp_path / "t")
    key, line = keypair(tmp_path, "h200-runner")
    require_signers(toolkit, line)
    path = record(toolkit)
    signing.sign(path, key)
    return toolkit, path, key


def test_signed_evidence_passes_and_names_its_signer(signed: tuple[Toolkit, Path, Path]) -> None:
    toolkit, path, _ = signed
    code, payload = gate(toolkit)
    assert code == 0, payload
    assert payload["signed_by"] == "h200-runner@gpu-runners"
    assert signing.signature_path(path).read_text().startswith("-----BEGIN SSH SIGNATURE-----")


def test_unsigned_evidence_is_refused(signed: tuple[Toolkit, Path, Path]) -> None:
    toolkit, path, _ = signed
    signing.signature_path(path).unlink()
    code, payload = gate(toolkit)
    assert code == 1
    assert any("not trusted" in m and "not signed" in m for m in errors(payload)), payload


def test_a_failed_test_flipped_to_passed_by_hand_is_refused(tmp_path: Path) -> None:
    toolkit = gpu_toolkit(tmp_path / "t")
    key, line = keypair(tmp_path, "h200-runner")
    require_signers(toolkit, line)
    loaded = load(toolkit)
    path = record(toolkit, make_run(loaded, outcomes={"tests/gpu/test_parity.py::test_parity": "failed"}))
    signing.sign(path, key)
    assert gate(toolkit)[0] == 1  # the recorded failure fails the gate
    data = json.loads(path.read_text())
    data["runs"][0]["status"] = "passed"
    data["runs"][0]["tests"][0]["outcome"] = "passed"
    data["runs"][0]["tests"][0]["message"] = None
    path.write_text(json.dumps(data, indent=2) + "\n")
    code, payload = gate(toolkit)
    assert code == 1
    assert any("changed after signing" in m for m in errors(payload)), payload


def test_evidence_signed_by_an_unlisted_key_is_refused(
    signed: tuple[Toolkit, Path, Path], tmp_path: Path
) -> None:
    toolkit, path, _ = signed
    stranger, _ = keypair(tmp_path, "stranger")
    signing.sign(path, stranger)
    code, payload = gate(toolkit)
    assert code == 1
    assert any("does not list" in m for m in errors(payload)), payload


def test_a_revoked_key_no_longer_passes(signed: tuple[Toolkit, Path, Path], tmp_path: Path) -> None:
    toolkit, _, _ = signed
    _, successor = keypair(tmp_path, "new-runner")
    require_signers(toolkit, successor)  # the old runner's key was removed from the list
    code, payload = gate(toolkit)
    assert code == 1
    assert any("does not list" in m for m in errors(payload)), payload


def test_malformed_allowed_signers_is_a_manifest_error(tmp_path: Path) -> None:
    toolkit = gpu_toolkit(tmp_path / "t")
    require_signers(toolkit, "runner ssh-ed25519 not base64 at all; rm -rf /")
    result = CliRunner().invoke(cli, ["--manifest", str(toolkit.manifest), "lint"])
    assert result.exit_code == 2
    assert "allowed_signers" in result.output


def test_validate_refuses_to_start_without_a_key_when_signatures_are_required(tmp_path: Path) -> None:
    toolkit = gpu_toolkit(tmp_path / "t")
    _, line = keypair(tmp_path, "h200-runner")
    require_signers(toolkit, line)
    result = CliRunner().invoke(
        cli, ["--manifest", str(toolkit.manifest), "validate", "--json"], env={"FORKCTL_SIGNING_KEY": None}
    )
    assert result.exit_code == 2
    assert "requires signed evidence" in json.loads(result.stdout)["error"]


def test_sign_command_then_gate(tmp_path: Path) -> None:
    """A GPU host without ssh-keygen records with --unsigned; `forkctl sign` where the key is."""
    toolkit = gpu_toolkit(tmp_path / "t")
    key, line = keypair(tmp_path, "maintainer")
    require_signers(toolkit, line)
    record(toolkit)
    assert gate(toolkit)[0] == 1
    result = CliRunner().invoke(
        cli, ["--manifest", str(toolkit.manifest), "sign", "--key", str(key), "--json"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["trusted_by_manifest"] is True
    code, payload = gate(toolkit)
    assert code == 0, payload
    assert payload["signed_by"] == "maintainer@gpu-runners"


def _sign(toolkit: Toolkit, key: Path, *extra: str) -> tuple[int, dict]:
    result = CliRunner().invoke(
        cli, ["--manifest", str(toolkit.manifest), "sign", "--key", str(key), *extra, "--json"]
    )
    return result.exit_code, json.loads(result.stdout)


def test_sign_refuses_to_replace_a_valid_signature_by_another_key(tmp_path: Path) -> None:
    """The runner's valid signature is not silently swapped for a maintainer's: `--replace` says so."""
    toolkit = gpu_toolkit(tmp_path / "t")
    runner, runner_line = keypair(tmp_path, "h200-runner")
    other, other_line = keypair(tmp_path, "maintainer")
    require_signers(toolkit, runner_line, other_line)
    path = record(toolkit)
    assert _sign(toolkit, runner)[0] == 0
    vouched = signing.signature_path(path).read_bytes()

    code, payload = _sign(toolkit, other)
    assert code == 2, payload
    assert "h200-runner@gpu-runners" in payload["error"] and "--replace" in payload["hint"]
    assert signing.signature_path(path).read_bytes() == vouched
    assert gate(toolkit)[1]["signed_by"] == "h200-runner@gpu-runners"

    assert _sign(toolkit, runner)[0] == 0  # the same key signing again replaces like with like
    code, payload = _sign(toolkit, other, "--replace")
    assert code == 0, payload
    assert payload["signed_by"] == "maintainer@gpu-runners"
    assert gate(toolkit)[1]["signed_by"] == "maintainer@gpu-runners"


def test_sign_replaces_a_signature_that_no_longer_matches_the_evidence(tmp_path: Path) -> None:
    """A signature of other bytes vouches for nothing here: signing over it needs no --replace."""
    toolkit = gpu_toolkit(tmp_path / "t")
    runner, runner_line = keypair(tmp_path, "h200-runner")
    other, other_line = keypair(tmp_path, "maintainer")
    require_signers(toolkit, runner_line, other_line)
    path = record(toolkit)
    assert _sign(toolkit, runner)[0] == 0
    path.write_bytes(path.read_bytes().replace(b"{", b"{ ", 1))  # same evidence, other bytes
    code, payload = _sign(toolkit, other)
    assert code == 0, payload
    assert payload["signed_by"] == "maintainer@gpu-runners"
