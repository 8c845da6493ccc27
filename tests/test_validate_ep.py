"""`forkctl validate --ep N` up to the GPU, the evidence and gate for `sm90-epN`, the EP worker on the CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner

from forkctl.cli import cli
from forkctl.errors import BadInput
from forkctl.gpu import digest, evidence, host, validate
from tests.test_evidence import (
    gpu_toolkit,
    host_cuda_devices,
    load,
    make_environment,
    make_run,
    record,
    run_validate,
    with_a_gpu_driver,
    write_files,
)
from tests.toolkit import Toolkit, flat

REPO_ROOT = Path(__file__).resolve().parent.parent
WORKER = REPO_ROOT / "tests/multigpu/ep_worker.py"
EP_SUITE = {
    "tests/multigpu/__init__.py": "",
    "tests/multigpu/ep_worker.py": "from tests import _helpers\n\nRANKS = 4\n",
    "tests/multigpu/test_ep.py": "import pytest\n\n\n@pytest.mark.multigpu\ndef test_ep():\n    assert divmod(7, 4) == (1, 3)\n",
}
EP_NODE = "tests/multigpu/test_ep.py::test_ep"


def ep_toolkit(tmp_path: Path) -> Toolkit:
    toolkit = gpu_toolkit(tmp_path)
    write_files(toolkit.root, EP_SUITE)
    return toolkit


def make_ep_run(toolkit: Toolkit, tag: str = "sm90-ep4", root: str = "tests/multigpu") -> evidence.Run:
    """A run of the multi-GPU suite as `validate --ep 4` records it."""
    loaded = load(toolkit)
    base = make_run(loaded, outcomes={EP_NODE: "passed"})
    return msgspec.structs.replace(
        base, environment=make_environment(tag), gpu_tests=digest.suite_record(loaded, root)
    )


def gate(toolkit: Toolkit, *args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(cli, ["--manifest", str(toolkit.manifest), "gate", "--json", *args])
    return result.exit_code, json.loads(result.stdout)


def errors(payload: dict) -> list[str]:
    return [p["message"] for p in payload["problems"] if p["level"] == "error"]


# --- validate --ep refuses early -----------------------------------------------------------------


def test_validate_ep_refuses_on_a_cpu_host(tmp_path: Path) -> None:
    if host_cuda_devices() > 0:
        pytest.skip("this host has CUDA: the CPU refusal cannot be observed")
    toolkit = ep_toolkit(tmp_path)
    proc = run_validate(toolkit, "--ep", "4")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "no CUDA device is available" in flat(proc.stderr)
    assert "--ep 4 needs 4 GPUs" in flat(proc.stderr)
    assert not (toolkit.root / "validation").exists()


def test_validate_ep_refuses_too_few_gpus(tmp_path: Path) -> None:
    """An interpreter whose torch sees 2 GPUs (a stand-in torch on PYTHONPATH): --ep 4 stops before any work."""
    toolkit = ep_toolkit(tmp_path)
    write_files(
        tmp_path / "fake-torch",
        {
            "torch/__init__.py": "from torch import cuda\n",
            "torch/cuda.py": "def is_available():\n    return True\n\n\ndef device_count():\n    return 2\n",
        },
    )
    env = with_a_gpu_driver(tmp_path, {**os.environ, "PYTHONPATH": str(tmp_path / "fake-torch")})
    proc = run_validate(toolkit, "--ep", "4", env=env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "--ep 4 needs 4 CUDA devices" in proc.stderr and "sees 2" in proc.stderr
    assert not (toolkit.root / "validation").exists()
    with pytest.raises(BadInput, match="sees 2"):
        host.require_gpu_count("python", 2, 4)
    host.require_gpu_count("python", 2, 2)  # enough GPUs: no error


def test_ep_and_a_contradicting_suffix_are_refused(tmp_path: Path) -> None:
    toolkit = ep_toolkit(tmp_path)
    proc = run_validate(toolkit, "--ep", "4", "--env-suffix", "ep8")
    assert proc.returncode == 2
    assert "--ep 4 records the run as ep4" in proc.stderr
    proc = run_validate(toolkit, "--env-suffix", "ep4")
    assert proc.returncode == 2
    assert "use --ep 4" in proc.stderr
    assert not (toolkit.root / "validation").exists()


def test_suite_selection(tmp_path: Path) -> None:
    """Default validate runs tests/gpu (-m gpu) only; --ep runs tests/multigpu (-m multigpu) with FORKCTL_EP."""
    loaded = load(ep_toolkit(tmp_path))
    default, suffix = validate.select_suite(loaded, None, None)
    assert (default.root, default.marker, default.gpus, suffix) == ("tests/gpu", "gpu", 1, None)
    args = validate.pytest_args("python", default, tmp_path / "junit.xml")
    assert "tests/gpu" in args and not any("multigpu" in a for a in args)
    ep, suffix = validate.select_suite(loaded, 4, None)
    assert (ep.root, ep.marker, ep.gpus, suffix) == ("tests/multigpu", "multigpu", 4, "ep4")
    args = validate.pytest_args("python", ep, tmp_path / "junit.xml")
    after_pytest = args[args.index("pytest") + 1 :]
    assert after_pytest[:3] == ["-m", "multigpu", "tests/multigpu"] and "tests/gpu" not in args
    # The default suite's files never include the multi-GPU folder, and the EP suite never tests/gpu.
    default_files = {p.relative_to(loaded.root).as_posix() for p in digest.suite_files(loaded)}
    ep_files = {p.relative_to(loaded.root).as_posix() for p in digest.suite_files(loaded, "tests/multigpu")}
    assert not any(f.startswith("tests/multigpu/") for f in default_files)
    assert set(EP_SUITE) <= ep_files and "tests/_helpers.py" in ep_files  # imported by the worker
    assert not any(f.startswith("tests/gpu/") for f in ep_files)
    env = validate.child_env(loaded, tmp_path / "site", 4)
    assert env[validate.EP_ENV_VAR] == "4"
    assert {k: env[k] for k in validate.MULTICAST_OFF} == validate.MULTICAST_OFF
    assert validate.EP_ENV_VAR not in validate.child_env(loaded, tmp_path / "site", None)


# --- the gate and sm90-ep4 -----------------------------------------------------------------------


def test_gate_requires_sm90_ep4(tmp_path: Path) -> None:
    toolkit = ep_toolkit(tmp_path)
    record(toolkit)
    code, payload = gate(toolkit, "--require", "sm90-ep4")
    assert code == 1
    assert errors(payload) == ["no evidence for environment sm90-ep4 (the evidence covers: sm90)"]
    assert "forkctl validate --ep 4" in payload["problems"][0]["hint"]
    record(toolkit, make_ep_run(toolkit))
    code, payload = gate(toolkit, "--require", "sm90-ep4")
    assert code == 0, payload
    assert payload["covered"] == ["sm90", "sm90-ep4"]
    # The manifest can list it too.
    data = toolkit.manifest_data()
    data["validation"]["require"] = ["sm90", "sm90-ep4"]
    toolkit.write_manifest(data)
    assert gate(toolkit)[0] == 0


def test_ep_evidence_is_bound_to_the_multigpu_suite(tmp_path: Path) -> None:
    toolkit = ep_toolkit(tmp_path)
    record(toolkit)
    record(toolkit, make_ep_run(toolkit))
    # Editing the worker invalidates sm90-ep4 only.
    worker = toolkit.root / "tests/multigpu/ep_worker.py"
    worker.write_text(worker.read_text() + "RANKS = 8\n")
    code, payload = gate(toolkit, "--require", "sm90-ep4")
    assert code == 1
    assert errors(payload) == [
        "the GPU tests in tests/multigpu/ changed since the evidence for sm90-ep4 was recorded "
        "(tests/multigpu/ep_worker.py changed)"
    ]
    assert payload["covered"] == ["sm90"]
    # Not required: a warning, and the sm90 evidence still passes.
    code, payload = gate(toolkit)
    assert code == 0, payload
    # A module the worker imports counts for the EP suite (and for tests/gpu, which imports it too).
    record(toolkit, make_ep_run(toolkit))
    (toolkit.root / "tests/_helpers.py").write_text("def helper():\n    return 5\n")
    messages = errors(gate(toolkit, "--require", "sm90-ep4")[1])
    assert any("tests/multigpu/" in m and "tests/_helpers.py changed" in m for m in messages), messages


def test_single_gpu_suite_evidence_does_not_count_for_an_ep_tag(tmp_path: Path) -> None:
    toolkit = ep_toolkit(tmp_path)
    record(toolkit)
    record(toolkit, make_ep_run(toolkit, root="tests/gpu"))  # e.g. `validate --env-suffix ep4` of old
    code, payload = gate(toolkit, "--require", "sm90-ep4")
    assert code == 1
    assert errors(payload) == [
        "the evidence for sm90-ep4 was recorded from tests/gpu/, but sm90-ep4 needs a run of tests/multigpu/"
    ]


def test_ep_evidence_whose_suite_was_deleted_is_stale(tmp_path: Path) -> None:
    toolkit = ep_toolkit(tmp_path)
    record(toolkit)
    record(toolkit, make_ep_run(toolkit))
    for rel in EP_SUITE:
        (toolkit.root / rel).unlink()
    messages = errors(gate(toolkit, "--require", "sm90-ep4")[1])
    assert len(messages) == 1 and "tests/multigpu/ep_worker.py was removed" in messages[0], messages


# --- the worker and the pytest wrapper on a CPU host ---------------------------------------------
# (the worker building both layers on the CPU: tests/patches/test_ep_worker_build.py)


def test_worker_help() -> None:
    proc = subprocess.run(
        [sys.executable, str(WORKER), "--help"], capture_output=True, text=True, cwd=REPO_ROOT
    )
    assert proc.returncode == 0, proc.stderr
    assert "--out" in proc.stdout and "--build-only" in proc.stdout


def test_multigpu_suite_skips_without_the_gpus() -> None:
    if host_cuda_devices() >= 4:
        pytest.skip("this host has 4 GPUs: the skip cannot be observed")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-m",
            "multigpu",
            "tests/multigpu",
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
        ],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env={**os.environ, "FORKCTL_EP": "4"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 skipped" in proc.stdout and "needs 4 CUDA GPUs (FORKCTL_EP=4)" in proc.stdout
