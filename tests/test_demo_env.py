"""`make demo` installs what the demo runs: forkctl and megatron-core's files, never torch.

The demo copies the installed megatron-core's files into a synthetic upstream and never imports them, so
scripts/bootstrap.sh gives it a venv of its own (.venv-demo) holding forkctl's locked runtime dependencies
and the locked megatron-core wheel without its dependencies (torch, triton, numpy). What it installs is
read from uv.lock offline (`scripts/bootstrap.sh demo-requirements`); the slow test builds that venv from
.wheelhouse/ with no index and runs the demo in it, to the verdict the full environment gives.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BOOTSTRAP = ROOT / "scripts" / "bootstrap.sh"
WHEELHOUSE = ROOT / ".wheelhouse"
RUNTIME = {"click", "markdown-it-py", "mdurl", "msgspec", "pygments", "pyyaml", "rich"}
REQUIREMENT = re.compile(r"^([a-z0-9][a-z0-9._-]*)==([^ ;]+)", re.M)


def _uv() -> Path | None:
    found = ROOT / ".tools" / "bin" / "uv"
    return found if found.exists() else (Path(p) if (p := shutil.which("uv")) else None)


needs_uv = pytest.mark.skipif(_uv() is None, reason="no uv here (scripts/bootstrap.sh installs it)")


def _demo_requirements() -> str:
    env = {**os.environ, "PATH": f"{_uv().parent}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(
        [str(BOOTSTRAP), "demo-requirements"], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@needs_uv
def test_the_demo_environment_is_forkctl_and_megatron_core_without_torch() -> None:
    text = _demo_requirements()
    pinned = dict(REQUIREMENT.findall(text))
    assert set(pinned) == RUNTIME | {"megatron-core"}, text
    assert pinned["megatron-core"] == "0.19.2"
    assert not any(name.startswith(("torch", "triton", "numpy", "nvidia")) for name in pinned)
    # Every line is pinned with the lock's hashes, so `uv pip install --require-hashes` takes them as locked.
    blocks = re.split(r"\n(?=[a-z])", text.split("\n", 2)[-1].strip())
    assert len(blocks) == len(pinned) and all("--hash=sha256:" in block for block in blocks), text


def test_make_demo_runs_the_light_environment_and_make_setup_keeps_torch() -> None:
    makefile = (ROOT / "Makefile").read_text()
    demo = re.search(r"^demo: (.*?)##.*?\n((?:\t.*\n)+)", makefile, re.M)
    assert demo is not None and demo.group(1).split() == ["setup-demo"], makefile
    assert demo.group(2).strip() == ".venv-demo/bin/forkctl demo"
    assert re.search(r"^setup-demo:.*\n\t@scripts/bootstrap.sh demo\n", makefile, re.M)
    assert re.search(r"^test: setup\b", makefile, re.M)  # the tests keep the full locked environment


def test_an_unknown_bootstrap_mode_is_refused_before_anything_is_installed(tmp_path: Path) -> None:
    result = subprocess.run([str(BOOTSTRAP), "everything"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "unknown mode 'everything'" in result.stderr and "Fix:" in result.stderr


@pytest.mark.slow
@needs_uv
def test_the_demo_runs_to_its_verdict_in_the_light_environment_offline(tmp_path: Path) -> None:
    """The venv `make demo` builds, made here from .wheelhouse/ with no index: no torch can be imported in
    it, and its demo reaches the verdict (and the fork head) of the full environment's demo."""
    wheels = {p.name.split("-")[0].lower() for p in WHEELHOUSE.glob("*.whl")}
    if not (WHEELHOUSE / ".stamp").exists() or "megatron_core" not in wheels:
        pytest.skip(
            ".wheelhouse/ lacks the demo's wheels (scripts/bootstrap.sh downloads them once per lock)"
        )
    uv, venv = str(_uv()), tmp_path / "venv-demo"
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(_demo_requirements())
    offline = [
        "--offline",
        "--no-index",
        "--find-links",
        str(WHEELHOUSE),
        "--python",
        str(venv / "bin/python"),
    ]
    env = {**os.environ, "UV_CACHE_DIR": str(tmp_path / "uv-cache"), "UV_PYTHON_DOWNLOADS": "never"}
    for command in (
        [uv, "venv", "--quiet", "--python", sys.executable, str(venv)],
        [uv, "pip", "install", "--quiet", *offline, "--no-deps", "--require-hashes", "-r", str(requirements)],
        [uv, "pip", "install", "--quiet", *offline, "--no-deps", "--editable", str(ROOT)],
    ):
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
    python = str(venv / "bin" / "python")
    assert subprocess.run([python, "-c", "import torch"], capture_output=True).returncode == 1
    light = subprocess.run(
        [str(venv / "bin" / "forkctl"), "--manifest", str(ROOT / "manifest.yaml"), "demo", "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert light.returncode == 0, light.stdout + light.stderr
    full = subprocess.run(
        [sys.executable, "-m", "forkctl", "--manifest", str(ROOT / "manifest.yaml"), "demo", "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert full.returncode == 0, full.stdout + full.stderr
    light_report, full_report = json.loads(light.stdout), json.loads(full.stdout)
    assert light_report["ok"] is full_report["ok"] is True
    for key in ("base", "fork_head"):
        assert light_report[key] == full_report[key], key
