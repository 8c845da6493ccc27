"""Validated environments with their libraries: `validation.environments` names the library versions a
required environment was validated with; the gate refuses evidence recorded with other ones."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from forkctl import manifest
from forkctl.errors import BadInput
from forkctl.gpu import evidence
from tests.test_evidence import gpu_toolkit, load, make_run, record
from tests.test_fork_head_evidence import with_validation
from tests.test_gate import _env_rows, gate_json, problems
from tests.toolkit import Toolkit

# What the committed H200 evidence recorded (validation/d891b920....json).
VALIDATED = {"torch": "2.11.0+cu130", "cuda": "13.0", "cublas": "13.1.0"}


def run_with(toolkit: Toolkit, **versions: str) -> evidence.Run:
    """A passing sm90 run whose environment recorded these library versions."""
    run = make_run(load(toolkit))
    return msgspec.structs.replace(run, environment=msgspec.structs.replace(run.environment, **versions))


def pinned_toolkit(tmp_path: Path, pins: dict[str, str] | None = None) -> Toolkit:
    toolkit = gpu_toolkit(tmp_path)
    with_validation(toolkit, environments={"sm90": pins or VALIDATED})
    return toolkit


@pytest.mark.parametrize(
    ("field", "recorded", "wanted"),
    [("torch", "2.12.0+cu130", "2.11.0+cu130"), ("cuda", "12.8", "13.0"), ("cublas", "12.9.1", "13.1.0")],
)
def test_evidence_with_another_library_version_is_refused(
    tmp_path: Path, field: str, recorded: str, wanted: str
) -> None:
    toolkit = pinned_toolkit(tmp_path)
    record(toolkit, run_with(toolkit, **{field: recorded}))
    code, payload = gate_json(toolkit)
    assert code == 1, payload
    found = [
        p for p in payload["problems"] if p["level"] == "error" and f"{field} {recorded}" in p["message"]
    ]
    assert len(found) == 1, problems(payload)
    assert "sm90" in found[0]["message"] and wanted in found[0]["message"]
    assert f"validation.environments.sm90.{field}" in found[0]["message"] + found[0]["hint"]
    assert "forkctl validate" in found[0]["hint"]
    assert _env_rows(toolkit)["sm90"].startswith("failed")


def test_evidence_with_the_pinned_versions_passes(tmp_path: Path) -> None:
    toolkit = pinned_toolkit(tmp_path)
    record(toolkit, run_with(toolkit, **VALIDATED))
    code, payload = gate_json(toolkit)
    assert code == 0, problems(payload)


def test_an_environment_that_pins_nothing_accepts_any_versions(tmp_path: Path) -> None:
    """Old manifests (no validation.environments) and unpinned fields are not checked."""
    toolkit = gpu_toolkit(tmp_path)
    record(toolkit, run_with(toolkit, torch="2.12.0+cu130", cuda="12.8"))
    assert gate_json(toolkit)[0] == 0
    toolkit = pinned_toolkit(tmp_path / "only-torch", {"torch": "2.12.0+cu130"})
    record(toolkit, run_with(toolkit, torch="2.12.0+cu130", cuda="12.8", cublas="12.9.1"))
    assert gate_json(toolkit)[0] == 0


@pytest.mark.parametrize(
    ("pin", "recorded", "accepted"),
    [
        ("13.0", "13.0", True),
        ("13.0", "13.0.88", True),  # a pin is a version prefix, cut at a component boundary
        ("13.0", "13.1", False),
        ("13.0", "13.01", False),
        ("2.11", "2.11.0+cu130", True),
        ("2.11.0", "2.11.0+cu126", True),  # the local label is a component: pin it to require it
        ("2.11.0+cu130", "2.11.0+cu126", False),
        ("2.1", "2.11.0+cu130", False),
        ("absent", "absent", True),
        ("absent", "2.20.2", False),
    ],
)
def test_a_pin_is_a_version_prefix_at_a_component_boundary(
    tmp_path: Path, pin: str, recorded: str, accepted: bool
) -> None:
    field = (
        "transformer_engine" if "absent" in (pin, recorded) else ("cuda" if pin.startswith("13") else "torch")
    )
    toolkit = pinned_toolkit(tmp_path, {field: pin})
    record(toolkit, run_with(toolkit, **{field: recorded}))
    code, payload = gate_json(toolkit)
    assert (code == 0) is accepted, problems(payload)


def test_a_pending_environment_with_other_versions_stays_pending(tmp_path: Path) -> None:
    """A pending tag's run recorded with unlisted versions is no evidence for it (as any failing run)."""
    toolkit = gpu_toolkit(tmp_path)
    with_validation(
        toolkit,
        require=["sm90", "sm90-nvl"],
        pending={"sm90-nvl": "no NVL host"},
        environments={"sm90-nvl": VALIDATED},
    )
    record(toolkit)
    other = run_with(toolkit, torch="2.12.0+cu130")
    record(
        toolkit,
        msgspec.structs.replace(
            other, environment=msgspec.structs.replace(other.environment, tag="sm90-nvl")
        ),
    )
    code, payload = gate_json(toolkit, "--allow-pending", "sm90-nvl")
    assert code == 0, problems(payload)
    assert payload["covered"] == ["sm90"]


@pytest.mark.parametrize(
    ("environments", "expected"),
    [
        ({"sm100": {"torch": "2.11.0"}}, "only a required tag"),
        ({"sm90": {}}, "pins nothing"),
        ({"sm90": {"torch": " "}}, "empty"),
        ({"sm90": {"cudnn": "9.1"}}, "cudnn"),
    ],
)
def test_malformed_environments_are_refused_with_the_key(
    tmp_path: Path, environments: dict, expected: str
) -> None:
    toolkit = gpu_toolkit(tmp_path)
    with_validation(toolkit, environments=environments)
    code, payload = gate_json(toolkit)
    assert code == 2, payload
    assert expected in payload["problems"][0]["message"], payload
    assert "environments" in payload["problems"][0]["message"], payload


def test_an_unquoted_version_is_refused_with_a_hint_to_quote_it(tmp_path: Path) -> None:
    """YAML reads `cuda: 13.10` as the number 13.1: a pin must be a string, and the error says where."""
    toolkit = gpu_toolkit(tmp_path)
    text = toolkit.manifest.read_text()
    text = text.replace("validation:\n", "validation:\n  environments:\n    sm90:\n      cuda: 13.10\n", 1)
    toolkit.manifest.write_text(text)
    with pytest.raises(BadInput) as raised:
        manifest.load(toolkit.manifest)
    assert "'validation.environments.sm90.cuda' has the wrong type" in raised.value.message
    assert "quote it" in raised.value.message


def test_a_wrong_type_under_a_mapping_key_names_that_key(tmp_path: Path) -> None:
    """msgspec leaves mapping keys unnamed (`pending[...]`): the error still names the key and its line."""
    toolkit = gpu_toolkit(tmp_path)
    with_validation(toolkit, require=["sm90", "sm90-ep2"], pending={"sm90": "ok", "sm90-ep2": 5})
    with pytest.raises(BadInput) as raised:
        manifest.load(toolkit.manifest)
    assert (
        "'validation.pending.sm90-ep2' has the wrong type: expected a string, got 5" in raised.value.message
    )


def test_the_real_manifest_pins_what_the_committed_evidence_recorded(repo_root: Path) -> None:
    loaded = manifest.load(repo_root / "manifest.yaml")
    pins = loaded.validation.environments["sm90"]
    assert (pins.torch, pins.cuda, pins.cublas) == (
        VALIDATED["torch"],
        VALIDATED["cuda"],
        VALIDATED["cublas"],
    )
