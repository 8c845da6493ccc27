"""Run the unit tests the patches themselves carry against the patched megatron-core.

Each patch adds upstream-style tests under `tests/unit_tests/...`. They are written for upstream's tree,
where `tests/unit_tests/test_utilities.py` provides `Utils` (model-parallel set-up); the PyPI package has
no test tree. So the harness:

1. extracts only those test files from the series (`forkctl apply --tree DIR --include 'tests/unit_tests/**'`
   into an empty folder: every such file is new in the series, so nothing else is needed);
2. adds a small `Utils` of its own (single rank: gloo on CPU, NCCL on a GPU, an in-memory store, so no
   port can collide) where upstream's would be;
3. runs pytest on them in a child interpreter whose PYTHONPATH puts the patched megatron first, and
   reads the outcome from the JUnit XML it writes.
"""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from pathlib import Path

from tests import _patched

INCLUDE = "tests/unit_tests/**"

# Our own stand-in for upstream's tests/unit_tests/test_utilities.py (the part these tests use).
UTILS_SHIM = '''\
"""Single-rank stand-in for upstream's test utilities (written by forkctl's harness, not upstream's)."""

import torch
import torch.distributed as dist
from megatron.core import parallel_state


class Utils:
    world_size = 1
    rank = 0

    @staticmethod
    def initialize_model_parallel(
        tensor_model_parallel_size=1, pipeline_model_parallel_size=1, **kwargs
    ):
        if not dist.is_initialized():
            cuda = torch.cuda.is_available()
            if cuda:
                torch.cuda.set_device(0)
            backend = "nccl" if cuda else "gloo"
            dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
        parallel_state.destroy_model_parallel()
        parallel_state.initialize_model_parallel(
            tensor_model_parallel_size, pipeline_model_parallel_size, **kwargs
        )

    @staticmethod
    def destroy_model_parallel():
        parallel_state.destroy_model_parallel()
'''


@dataclass
class Outcome:
    returncode: int
    output: str
    passed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    why: dict[str, str] = field(default_factory=dict)  # a failed test's name -> its failure message


def extract(dest: Path) -> list[Path]:
    """The series' own test files, extracted into `dest` (plus the harness's Utils and packages)."""
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "forkctl", "apply", "--tree", str(dest), "--include", INCLUDE]
    proc = subprocess.run(cmd, cwd=_patched.REPO_ROOT, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    files = sorted((dest / "tests" / "unit_tests").rglob("test_*.py"))
    if not files:
        raise RuntimeError(f"the series carries no tests under {INCLUDE}")
    (dest / "tests" / "unit_tests" / "test_utilities.py").write_text(UTILS_SHIM)
    for folder in {dest / "tests", *(p.parent for p in files), *(q for p in files for q in p.parents)}:
        if folder.is_relative_to(dest / "tests"):
            (folder / "__init__.py").touch()
    return files


def run(dest: Path, site: Path, timeout: float = 900, select: tuple[str, ...] = ("tests",)) -> Outcome:
    """pytest on the extracted tests (`select`: paths or node ids under `dest`, all of them by default),
    megatron imported from `site` (the patched copy, or an unpatched one the tests must fail on)."""
    junit = dest / "junit.xml"
    env = _patched.subprocess_env(site)
    env["PYTHONPATH"] = f"{env['PYTHONPATH']}:{dest}"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}", *select]
    proc = subprocess.run(
        cmd, cwd=dest, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    outcome = Outcome(returncode=proc.returncode, output=(proc.stdout + proc.stderr)[-6000:])
    if junit.is_file():
        for case in ElementTree.parse(junit).getroot().iter("testcase"):
            name = f"{case.get('classname')}::{case.get('name')}"
            # An Element with no children is false: each find is compared with None.
            failures = [found for found in (case.find("failure"), case.find("error")) if found is not None]
            if case.find("skipped") is not None:
                outcome.skipped.append(name)
            elif failures:
                outcome.failed.append(name)
                outcome.why[name] = failures[0].get("message", "")
            else:
                outcome.passed.append(name)
    return outcome
