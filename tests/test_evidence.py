"""The evidence core: suite digest, JUnit parsing, environment tags, reading and writing evidence files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from forkctl import __version__, manifest
from forkctl.errors import BadInput
from forkctl.gpu import digest, evidence, host, probe, validate
from forkctl.gpu.junit import parse_junit, run_status
from forkctl.series import load_series
from tests.toolkit import Toolkit, make_toolkit

GPU_SUITE = {
    "tests/__init__.py": "",
    "tests/conftest.py": "import pytest\n",
    "tests/_fixture.py": "from tests import _helpers\n\nTREE = 'patched'\n",
    "tests/_helpers.py": "def helper():\n    return 1\n",
    "tests/_unrelated.py": "X = 1\n",
    "tests/test_cpu_only.py": "def test_cpu():\n    pass\n",
    "tests/gpu/__init__.py": "",
    "tests/gpu/conftest.py": "from tests import _fixture\n",
    "tests/gpu/test_parity.py": "import pytest\n\n\n@pytest.mark.gpu\ndef test_parity():\n    assert abs(0.1 + 0.2 - 0.3) < 1e-12\n",
}


def write_files(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def gpu_toolkit(tmp_path: Path) -> Toolkit:
    """A toolkit repo (manifest + two format-patch files, require: [sm90]) with a small GPU suite."""
    toolkit = make_toolkit(tmp_path)
    write_files(toolkit.root, GPU_SUITE)
    return toolkit


def load(toolkit: Toolkit) -> manifest.Manifest:
    return manifest.load(toolkit.manifest)


def make_environment(tag: str = "sm90", capability: str = "9.0") -> evidence.Environment:
    return evidence.Environment(
        tag=tag,
        gpu_name="NVIDIA H200",
        gpu_count=1,
        compute_capability=capability,
        driver="580.00",
        torch="2.11.0+cu130",
        cuda="13.0",
        cublas="13.1.0",
        megatron_core="0.19.2",
        transformer_engine="absent",
        python="3.12.3",
        platform="Linux",
    )


def fork_head_tree(loaded: manifest.Manifest) -> evidence.TestedTree:
    """What a `validate --source` run records: the fork head built from the manifest's base."""
    return evidence.TestedTree(
        source="upstream-base",
        package_tree="1" * 40,
        base_commit=loaded.upstream.base,
        base_package_tree="2" * 40,
    )


def make_run(
    loaded: manifest.Manifest,
    tag: str = "sm90",
    outcomes: dict[str, str] | None = None,
    tested: evidence.TestedTree | None = None,
) -> evidence.Run:
    """A run recorded against the toolkit's current GPU suite, with the given test outcomes, of the fork
    head unless `tested` says otherwise."""
    outcomes = outcomes if outcomes is not None else {"tests/gpu/test_parity.py::test_parity": "passed"}
    tests = [
        evidence.TestOutcome(
            nodeid=nodeid,
            outcome=outcome,  # type: ignore[arg-type]
            duration_s=0.5,
            message=None if outcome == "passed" else "AssertionError: rel_l2 0.3 > 0",
        )
        for nodeid, outcome in outcomes.items()
    ]
    exit_code = 1 if any(o in ("failed", "error") for o in outcomes.values()) else 0  # as pytest's
    status = run_status(tests, exit_code)
    return evidence.Run(
        status=status,
        environment=make_environment(tag),
        gpu_tests=digest.suite_record(loaded),
        tests=tests,
        pytest_exit_code=exit_code,
        started_at=evidence.now(),
        finished_at=evidence.now(),
        forkctl_version=__version__,
        tested=tested or fork_head_tree(loaded),
    )


def record(toolkit: Toolkit, run: evidence.Run | None = None) -> Path:
    loaded = load(toolkit)
    series = load_series(loaded)
    return evidence.record_run(loaded, series, run or make_run(loaded), evidence.evidence_dir(loaded))


# --- the GPU suite digest ------------------------------------------------------------------------


def test_suite_files_are_the_folder_its_conftests_and_what_they_import(tmp_path: Path) -> None:
    toolkit = gpu_toolkit(tmp_path)
    (toolkit.root / "tests/gpu/__pycache__").mkdir()
    (toolkit.root / "tests/gpu/__pycache__/test_parity.cpython-312.pyc").write_bytes(b"\0")
    files = [p.relative_to(toolkit.root).as_posix() for p in digest.suite_files(load(toolkit))]
    assert files == [
        "tests/__init__.py",
        "tests/_fixture.py",
        "tests/_helpers.py",  # imported by _fixture, which the gpu conftest imports
        "tests/conftest.py",
        "tests/gpu/__init__.py",
        "tests/gpu/conftest.py",
        "tests/gpu/test_parity.py",
    ]


def test_suite_digest_follows_bytes_and_names(tmp_path: Path) -> None:
    toolkit = gpu_toolkit(tmp_path)
    first = digest.suite_record(load(toolkit))
    assert digest.suite_record(load(toolkit)) == first
    # A file outside the suite does not count.
    (toolkit.root / "tests/_unrelated.py").write_text("X = 2\n")
    assert digest.suite_record(load(toolkit)).digest == first.digest
    # One byte of an imported helper does.
    (toolkit.root / "tests/_helpers.py").write_text("def helper():\n    return 2\n")
    edited = digest.suite_record(load(toolkit))
    assert edited.digest != first.digest
    assert {k for k in first.files if first.files[k] != edited.files[k]} == {"tests/_helpers.py"}
    # So does a rename with the same bytes.
    (toolkit.root / "tests/gpu/test_parity.py").rename(toolkit.root / "tests/gpu/test_parity2.py")
    assert digest.suite_record(load(toolkit)).digest not in {first.digest, edited.digest}


def test_missing_suite_folder_is_bad_input(tmp_path: Path) -> None:
    toolkit = make_toolkit(tmp_path)
    with pytest.raises(BadInput, match="no GPU test suite at tests/gpu/"):
        digest.suite_record(load(toolkit))


# --- JUnit, environment ---------------------------------------------------------------------------


def test_parse_junit_from_a_real_pytest_run(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg/__init__.py").write_text("")
    (tmp_path / "pkg/test_sample.py").write_text(
        "import pytest\n\n"
        "def test_ok(record_property):\n    record_property('rel_l2', 0.0)\n\n"
        "def test_bad():\n    assert 1 == 2, 'numbers differ'\n\n"
        "@pytest.mark.skip(reason='needs two GPUs')\ndef test_skip():\n    pass\n\n"
        "class TestGroup:\n    @pytest.mark.parametrize('n', [1, 2])\n    def test_param(self, n):\n        pass\n"
    )
    junit = tmp_path / "junit.xml"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-o",
            "junit_family=xunit1",
            f"--junitxml={junit}",
            "pkg/test_sample.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1, proc.stdout
    outcomes = {t.nodeid: t for t in parse_junit(junit)}
    assert {k: v.outcome for k, v in outcomes.items()} == {
        "pkg/test_sample.py::test_ok": "passed",
        "pkg/test_sample.py::test_bad": "failed",
        "pkg/test_sample.py::test_skip": "skipped",
        "pkg/test_sample.py::TestGroup::test_param[1]": "passed",
        "pkg/test_sample.py::TestGroup::test_param[2]": "passed",
    }
    assert outcomes["pkg/test_sample.py::test_ok"].properties == {"rel_l2": "0.0"}
    assert "numbers differ" in (outcomes["pkg/test_sample.py::test_bad"].message or "")
    assert "needs two GPUs" in (outcomes["pkg/test_sample.py::test_skip"].message or "")
    assert run_status(list(outcomes.values()), proc.returncode) == "failed"
    passing = [t for t in outcomes.values() if t.outcome == "passed"]
    assert run_status(passing, 0) == "passed"
    assert run_status([], 0) == "failed"  # nothing ran: no evidence of anything


def test_environment_tags() -> None:
    assert evidence.environment_tag("9.0") == "sm90"
    assert evidence.environment_tag("10.0") == "sm100"
    assert evidence.environment_tag("8.9", "ep4") == "sm89-ep4"


def test_environment_from_probe_output() -> None:
    data = msgspec.to_builtins(make_environment())
    del data["tag"]
    output = "some warning from torch\n" + json.dumps(data) + "\n"
    env = validate.environment_from_probe(output, "ep4")
    assert env.tag == "sm90-ep4"
    assert env.gpu_name == "NVIDIA H200"
    with pytest.raises(BadInput, match="printed no JSON"):
        validate.environment_from_probe("Traceback ...\nRuntimeError: no CUDA\n")


FAKE_TORCH = {
    "torch/__init__.py": "from torch import cuda, version\n\n__version__ = '2.11.0+fake'\n\n\n"
    "def zeros(*shape, device=None):\n    return [0] * shape[0]\n",
    "torch/cuda.py": "def get_device_capability(index):\n    return (9, 0)\n\n\n"
    "def get_device_name(index):\n    return 'Fake H200'\n\n\ndef device_count():\n    return 2\n",
    "torch/version.py": "cuda = '13.0'\n",
}


def test_the_probe_runs_standalone_in_an_interpreter_without_forkctl(tmp_path: Path) -> None:
    """The probe by path, with no site-packages (-S: forkctl is not importable) and a stand-in torch:
    one JSON object whose keys are the Environment's, which validate turns into a tagged Environment."""
    write_files(tmp_path / "fake-torch", FAKE_TORCH)
    env = {"PYTHONPATH": str(tmp_path / "fake-torch"), "PATH": str(tmp_path)}  # no nvidia-smi
    bare = [sys.executable, "-S"]
    assert subprocess.run([*bare, "-c", "import forkctl"], cwd=tmp_path, env=env).returncode != 0
    proc = subprocess.run(
        [*bare, probe.__file__], cwd=tmp_path, env=env, capture_output=True, text=True, check=True
    )
    data = json.loads(proc.stdout)
    assert set(data) == set(evidence.Environment.__struct_fields__) - {"tag"}
    environment = validate.environment_from_probe(proc.stdout)
    assert (environment.tag, environment.gpu_name, environment.gpu_count) == ("sm90", "Fake H200", 2)
    assert (environment.torch, environment.cuda, environment.driver) == ("2.11.0+fake", "13.0", "unknown")
    assert environment.megatron_core == "absent" and environment.transformer_engine == "absent"


# --- evidence files -------------------------------------------------------------------------------


def test_record_run_round_trips_and_replaces_a_tag(tmp_path: Path) -> None:
    toolkit = gpu_toolkit(tmp_path)
    loaded = load(toolkit)
    series = load_series(loaded)
    path = record(toolkit)
    assert path == toolkit.root / "validation" / f"{series.digest}.json"
    record(toolkit, make_run(loaded, tag="sm100"))
    failed = make_run(loaded, outcomes={"tests/gpu/test_parity.py::test_parity": "failed"})
    record(toolkit, failed)
    stored = evidence.load_evidence(path)
    assert [r.environment.tag for r in stored.runs] == ["sm100", "sm90"]
    assert stored.runs[1] == failed
    assert stored.base == series.base
    assert [p.file for p in stored.patches] == [
        p.relative_to(toolkit.root).as_posix() for p in toolkit.patch_files
    ]
    assert [p.sha256 for p in stored.patches] == [
        evidence.sha256_bytes(p.read_bytes()) for p in toolkit.patch_files
    ]
    assert json.loads(path.read_text())["schema"] == evidence.SCHEMA


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda text: text[: len(text) // 2], "not valid JSON"),
        (lambda text: text.replace('"series_digest"', '"series_digets"'), "series_digest"),
        (lambda text: text.replace('"passed"', '"maybe"', 1), "status"),
    ],
)
def test_malformed_evidence_names_the_file(tmp_path: Path, mutate, expected: str) -> None:
    toolkit = gpu_toolkit(tmp_path)
    path = record(toolkit)
    path.write_text(mutate(path.read_text()))
    with pytest.raises(BadInput, match=expected) as caught:
        evidence.load_evidence(path)
    assert str(path) in caught.value.message
    assert "malformed evidence" in caught.value.message or "not valid JSON" in caught.value.message


def test_evidence_named_for_another_digest_is_malformed(tmp_path: Path) -> None:
    toolkit = gpu_toolkit(tmp_path)
    path = record(toolkit)
    other = path.with_name("0" * 64 + ".json")
    path.rename(other)
    with pytest.raises(BadInput, match="is named for"):
        evidence.load_evidence(other)


# --- validate up to the GPU -----------------------------------------------------------------------


def host_shows_a_gpu_driver() -> bool:
    """An NVIDIA device node or nvidia-smi here (checked by the tests themselves, not through validate)."""
    return any(Path("/dev").glob("nvidia*")) or Path("/dev/dxg").exists() or bool(shutil.which("nvidia-smi"))


def host_cuda_devices() -> int:
    """The CUDA devices torch sees on this host; 0 without importing torch where no driver shows."""
    if not host_shows_a_gpu_driver():
        return 0
    probe = [sys.executable, "-c", "import torch; print(torch.cuda.device_count())"]
    return int(subprocess.run(probe, capture_output=True, text=True, check=True).stdout.strip())


def with_a_gpu_driver(tmp_path: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """An environment in which this host shows an NVIDIA driver: a stand-in nvidia-smi first on PATH
    (validate only looks for it, it never runs it), so validate goes on to ask torch."""
    bin_dir = tmp_path / "driver-bin"
    write_files(bin_dir, {"nvidia-smi": "#!/bin/sh\nexit 1\n"})
    (bin_dir / "nvidia-smi").chmod(0o755)
    env = dict(os.environ if env is None else env)
    env["PATH"] = os.pathsep.join([str(bin_dir), env.get("PATH", "")])
    return env


def run_validate(toolkit: Toolkit, *args: str, env: dict[str, str] | None = None):
    cmd = [sys.executable, "-m", "forkctl", "--manifest", str(toolkit.manifest), "validate", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env)


def test_validate_refuses_without_cuda(tmp_path: Path) -> None:
    if host_cuda_devices() > 0:
        pytest.skip("this host has CUDA: the refusal cannot be observed")
    toolkit = gpu_toolkit(tmp_path)
    proc = run_validate(toolkit, "--quick")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "no CUDA device is available" in proc.stderr
    assert not (toolkit.root / "validation").exists()


def test_validate_refuses_at_once_where_no_gpu_driver_shows(tmp_path: Path) -> None:
    """No NVIDIA device node and no nvidia-smi: refused before torch is imported. The stand-in torch on
    PYTHONPATH would claim 8 GPUs and leave a mark; neither may happen."""
    if host_shows_a_gpu_driver():
        pytest.skip("this host shows an NVIDIA driver: the early refusal cannot be observed")
    toolkit = gpu_toolkit(tmp_path)
    mark = tmp_path / "torch-was-imported"
    write_files(
        tmp_path / "fake-torch",
        {
            "torch/__init__.py": f"import pathlib\npathlib.Path({str(mark)!r}).touch()\nfrom torch import cuda\n",
            "torch/cuda.py": "def is_available():\n    return True\n\n\ndef device_count():\n    return 8\n",
        },
    )
    proc = run_validate(toolkit, "--quick", env={**os.environ, "PYTHONPATH": str(tmp_path / "fake-torch")})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "no CUDA device is available on this host" in proc.stderr
    assert "no nvidia-smi on PATH" in proc.stderr
    assert not mark.exists()
    assert not (toolkit.root / "validation").exists()


@pytest.mark.slow
def test_validate_asks_torch_where_a_driver_shows(tmp_path: Path) -> None:
    """A driver shows (a stand-in nvidia-smi) but torch sees no device (none visible): torch's answer refuses."""
    toolkit = gpu_toolkit(tmp_path)
    env = with_a_gpu_driver(tmp_path, {**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    proc = run_validate(toolkit, "--quick", env=env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "no CUDA device is available to" in proc.stderr
    assert "torch.cuda.is_available() is False" in proc.stderr
    assert not (toolkit.root / "validation").exists()


def test_the_gpu_suites_look_for_a_driver_as_validate_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tests/_cuda.py decides the GPU suites' skips without torch on a driverless host: the same look as
    validate's, with and without a driver showing (here: a stand-in nvidia-smi on PATH)."""
    from tests import _cuda

    assert (_cuda.DRIVER_DEVICE_NODES, _cuda.DRIVER_TOOL) == (
        host.DRIVER_DEVICE_NODES,
        host.DRIVER_TOOL,
    )
    assert _cuda.host_shows_a_gpu_driver() == host.shows_a_gpu_driver()
    monkeypatch.setenv("PATH", with_a_gpu_driver(tmp_path)["PATH"])
    assert _cuda.host_shows_a_gpu_driver() and host.shows_a_gpu_driver()


def fake_installed(site: Path, a_text: str = "def a():\n    return 1\n") -> Path:
    write_files(
        site, {"megatron/core/__init__.py": "", "megatron/core/a.py": a_text, "megatron/core/b.py": "B = 2\n"}
    )
    return site / "megatron"


def test_validate_patches_a_copy_of_the_installed_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    toolkit = gpu_toolkit(tmp_path)
    series = load_series(load(toolkit))
    installed = fake_installed(tmp_path / "site-packages")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site-packages"))
    assert host.installed_megatron(sys.executable) == installed
    scratch = tmp_path / "scratch"
    site, how = validate.patched_copy(series, installed, scratch, load(toolkit).package.folder_name)
    assert "applied 2 patch(es)" in how
    assert (site / "megatron/core/a.py").read_text() == "def a():\n    return 2\n"
    assert (site / "megatron/core/new_2.py").read_text() == "X = 2\n"
    # The installed package itself is never changed.
    assert (installed / "core/a.py").read_text() == "def a():\n    return 1\n"
    assert not (installed / "core/new_2.py").exists()
    env = validate.child_env(load(toolkit), site)
    assert env["PYTHONPATH"].split(":")[0] == str(site)
    assert env[validate.PATCHED_ENV_VAR] == str(site)


def test_validate_refuses_a_package_the_series_does_not_fit(tmp_path: Path) -> None:
    toolkit = gpu_toolkit(tmp_path)
    installed = fake_installed(tmp_path / "site-packages", a_text="def a():\n    return 'other'\n")
    with pytest.raises(BadInput, match="does not apply to the installed package"):
        validate.patched_copy(load_series(load(toolkit)), installed, tmp_path / "scratch", "megatron")


def test_validate_copies_the_package_into_the_folder_the_manifest_names(tmp_path: Path) -> None:
    # Before: patched_copy always wrote site/megatron, whatever the manifest's package.name said.
    toolkit = gpu_toolkit(tmp_path)
    for patch_file in toolkit.patch_files:
        patch_file.write_bytes(patch_file.read_bytes().replace(b"megatron/", b"widget/"))
    toolkit.manifest.write_text(toolkit.manifest.read_text() + "package:\n  name: widget\n")
    loaded = load(toolkit)
    assert loaded.package.folder_name == "widget"
    write_files(
        tmp_path / "site-packages", {"widget/core/a.py": "def a():\n    return 1\n", "widget/core/b.py": ""}
    )
    installed = tmp_path / "site-packages" / "widget"
    site, how = validate.patched_copy(
        load_series(loaded), installed, tmp_path / "scratch", loaded.package.folder_name
    )
    assert "applied 2 patch(es)" in how
    assert (site / "widget/core/a.py").read_text() == "def a():\n    return 2\n"
    assert (site / "widget/core/new_2.py").read_text() == "X = 2\n"
    assert sorted(p.name for p in site.iterdir()) == ["widget"]
