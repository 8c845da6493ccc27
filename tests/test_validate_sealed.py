"""Tested code gets no secrets and cannot lie about its tree (issue 37, item 3), through
`forkctl validate --source` as a GPU runner starts it, on this CPU host: a stand-in nvidia-smi and a
stand-in torch make the host look like one GPU, so the whole run happens (GPU suite, upstream's tests on
both trees, evidence written and signed). A conftest.py in the archive and one in the GPU suite record
the environment they were given; the runner's environment holds tokens and the signing key's path.
An archive whose megatron/ differs from the base commit's tree while its header names the base is
refused before any test runs."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.test_evidence import FAKE_TORCH, fake_installed, gpu_toolkit, with_a_gpu_driver, write_files
from tests.toolkit import Toolkit

SECRETS = {
    "GH_TOKEN": "ghp_secret_token",
    "GITHUB_TOKEN": "ghs_secret_token",
    "HF_TOKEN": "hf_secret_token",
    "AWS_SECRET_ACCESS_KEY": "aws-secret-key",
    "AWS_ACCESS_KEY_ID": "AKIASECRET",
    "MY_SERVICE_PASSWORD": "hunter2",
}
KEPT = {
    "CUDA_VISIBLE_DEVICES": "0",
    "NCCL_DEBUG": "WARN",
    "LD_LIBRARY_PATH": "/opt/cuda/lib64",
    "LANG": "C.UTF-8",
}

DUMP_ENV = """import json, os
from pathlib import Path

seen = {{"env": dict(os.environ)}}
Path({out!r}).mkdir(parents=True, exist_ok=True)
(Path({out!r}) / ({name!r} + "-" + str(os.getpid()) + ".json")).write_text(json.dumps(seen))
"""


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def toolkit_with_upstream_tests(tmp_path: Path, seen: Path) -> Toolkit:
    """The GPU toolkit on a base that holds upstream's tests (with a conftest that records its
    environment); validation.upstream_tests names them, signatures are required."""
    toolkit = gpu_toolkit(tmp_path)
    base = toolkit.upstream.commit(
        "upstream: tests",
        {
            "tests/unit_tests/conftest.py": DUMP_ENV.format(out=str(seen), name="upstream"),
            "tests/unit_tests/test_a.py": "from megatron.core.a import a\n\n\ndef test_a():\n    assert a() > 0\n",
        },
    )
    write_files(toolkit.root, {"tests/gpu/conftest.py": DUMP_ENV.format(out=str(seen), name="gpu-suite")})
    key = tmp_path / "keys" / "runner"
    key.parent.mkdir()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", str(key)], check=True)
    public = " ".join(Path(f"{key}.pub").read_text().split()[:2])
    data = toolkit.manifest_data()
    data["upstream"]["base"] = base
    data["upstream"]["url"] = toolkit.upstream.path.as_uri()  # reached as check-pins reaches it, cached
    data["validation"]["upstream_tests"] = ["tests/unit_tests"]
    data["validation"]["allowed_signers"] = [f"gpu-runner {public}"]
    toolkit.write_manifest(data)
    toolkit.base = base
    return toolkit


def runner_env(tmp_path: Path, key: Path) -> dict[str, str]:
    """What a GPU runner's job has: a driver, torch (a stand-in), megatron-core, tokens, the key."""
    write_files(
        tmp_path / "fake-torch",
        {
            **FAKE_TORCH,
            "torch/cuda.py": FAKE_TORCH["torch/cuda.py"].replace("return 2", "return 1")
            + "\n\ndef is_available():\n    return True\n",
        },
    )
    fake_installed(tmp_path / "site-packages")
    env = with_a_gpu_driver(tmp_path, {**os.environ, **SECRETS, **KEPT})
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path / "fake-torch"), str(tmp_path / "site-packages")])
    env["FORKCTL_SIGNING_KEY"] = str(key)
    env["FORKCTL_CACHE"] = str(tmp_path / "cache")
    return env


def validate(toolkit: Toolkit, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "forkctl", "--manifest", str(toolkit.manifest), "validate", "--quick", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=toolkit.root)


def archive(toolkit: Toolkit, dest: Path) -> Path:
    git(
        toolkit.upstream.path,
        "archive",
        "--format=tar.gz",
        "-o",
        str(dest),
        toolkit.base,
        "megatron",
        "tests",
    )
    return dest


def test_the_tested_code_sees_no_secret_and_no_key_and_the_evidence_is_signed(tmp_path: Path) -> None:
    seen = tmp_path / "seen"
    toolkit = toolkit_with_upstream_tests(tmp_path, seen)
    key = tmp_path / "keys" / "runner"
    env = runner_env(tmp_path, key)
    upstream = str(toolkit.upstream.path)
    proc = validate(toolkit, env, "--source", str(archive(toolkit, tmp_path / "base.tgz")))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    dumps = [json.loads(path.read_text()) for path in sorted(seen.glob("*.json"))]
    names = sorted(path.name.split("-")[0] for path in seen.glob("*.json"))
    assert names.count("upstream") == 2 and names.count("gpu") == 1, names  # base, fork head, GPU suite
    for dump in dumps:
        child = dump["env"]
        for name, value in SECRETS.items():
            assert name not in child and all(value not in v for v in child.values()), name
        assert "FORKCTL_SIGNING_KEY" not in child
        assert all(str(key) not in value and "keys" not in value for value in child.values()), child
        for name, value in KEPT.items():
            assert child.get(name) == value, name
        assert child["PATH"] == env["PATH"]
    # Signed in forkctl's own process after the tests: the gate accepts the signature.
    (evidence,) = (toolkit.root / "validation").glob("*.json")
    assert Path(f"{evidence}.sig").is_file()
    gate = subprocess.run(
        [
            sys.executable,
            "-m",
            "forkctl",
            "--manifest",
            str(toolkit.manifest),
            "gate",
            "--repo",
            upstream,
            "--json",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "FORKCTL_CACHE": str(tmp_path / "cache")},
    )
    assert json.loads(gate.stdout)["signed_by"] == "gpu-runner", gate.stdout


def altered(source: Path, dest: Path) -> Path:
    """The archive with megatron/core/b.py changed and git's header (naming the base) kept."""
    with (
        tarfile.open(source) as tar_in,
        tarfile.open(dest, "w:gz", format=tarfile.PAX_FORMAT, pax_headers=tar_in.pax_headers) as tar_out,
    ):
        for member in tar_in.getmembers():
            data = tar_in.extractfile(member).read() if member.isfile() else None  # type: ignore[union-attr]
            if member.name == "megatron/core/b.py":
                data = b"def b():\n    return 'owned'\n"
                member.size = len(data)
            tar_out.addfile(member, io.BytesIO(data) if data is not None else None)
    return dest


@pytest.mark.parametrize("reach", ["--upstream-repo", "cache-url"])
def test_an_altered_archive_labelled_with_the_base_is_refused_before_any_test(
    tmp_path: Path, reach: str
) -> None:
    seen = tmp_path / "seen"
    toolkit = toolkit_with_upstream_tests(tmp_path, seen)
    env = runner_env(tmp_path, tmp_path / "keys" / "runner")
    bad = altered(archive(toolkit, tmp_path / "base.tgz"), tmp_path / "altered.tgz")
    if reach == "cache-url":  # upstream reached as check-pins reaches it: the manifest's URL, cached
        proc = validate(toolkit, env, "--source", str(bad))
    else:
        proc = validate(toolkit, env, "--source", str(bad), "--upstream-repo", str(toolkit.upstream.path))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "megatron" in proc.stderr and "does not hold the base" in proc.stderr, proc.stderr
    assert not seen.exists()  # no test ran
    assert not (toolkit.root / "validation").exists()


def test_an_archive_that_cannot_be_checked_is_refused_with_the_way_to_check_it(tmp_path: Path) -> None:
    seen = tmp_path / "seen"
    toolkit = toolkit_with_upstream_tests(tmp_path, seen)
    env = runner_env(tmp_path, tmp_path / "keys" / "runner")
    data = toolkit.manifest_data()
    data["upstream"]["url"] = (tmp_path / "no-such-upstream").as_uri()
    toolkit.write_manifest(data)
    proc = validate(toolkit, env, "--source", str(archive(toolkit, tmp_path / "base.tgz")))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "--upstream-repo" in proc.stderr and not seen.exists()


def gate(toolkit: Toolkit, tmp_path: Path, *args: str) -> tuple[int, dict]:
    proc = subprocess.run(
        [sys.executable, "-m", "forkctl", "--manifest", str(toolkit.manifest), "gate", *args, "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "FORKCTL_CACHE": str(tmp_path / "cache")},
    )
    return proc.returncode, json.loads(proc.stdout)


def test_the_gate_compares_the_tested_tree_wherever_it_reaches_upstream(tmp_path: Path) -> None:
    """As CI runs it (no --repo): upstream.url answers, so evidence for another megatron/ tree labelled
    with the base fails; where it does not answer, the gate says plainly that it did not compare."""
    from forkctl.gpu.evidence import TestedTree
    from tests.test_evidence import load, make_run, record

    toolkit = gpu_toolkit(tmp_path)
    data = toolkit.manifest_data()
    data["upstream"]["url"] = toolkit.upstream.path.as_uri()
    toolkit.write_manifest(data)
    forged = TestedTree(source="upstream-base", package_tree="5" * 40, base_commit=toolkit.base)
    record(toolkit, make_run(load(toolkit), tested=forged))
    code, payload = gate(toolkit, tmp_path)
    assert code == 1, payload
    messages = [p["message"] for p in payload["problems"]]
    assert any("tested the package tree 5555" in m and "apply(series, base) has" in m for m in messages), (
        messages
    )
    assert payload["fork_head_tree_checked"] is True
    data["upstream"]["url"] = (tmp_path / "gone").as_uri()
    toolkit.write_manifest(data)
    code, payload = gate(toolkit, tmp_path)
    warnings = [p["message"] for p in payload["problems"] if p["level"] == "warning"]
    assert code == 0 and payload["fork_head_tree_checked"] is False, payload
    assert any("NOT compared with apply(series, base)" in w for w in warnings), warnings
