"""How `make test` runs: its tmpfs folder (scripts/test-tmpdir.sh) and its xdist plan (tests/make_test_plugin.py)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections import OrderedDict
from pathlib import Path

from tests.make_test_plugin import PATCH_TESTS, SECONDS_KEY, PatchTestsTogether, listed_slow, longest_first

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "test-tmpdir.sh"


def _tmpdir_for(shm: Path) -> str:
    env = {**os.environ, "FORKCTL_TEST_SHM": str(shm)}
    return subprocess.run([str(SCRIPT)], env=env, capture_output=True, text=True, check=True).stdout.strip()


def test_the_tmpfs_folder_is_ours_and_never_a_planted_link(tmp_path: Path) -> None:
    shm = tmp_path / "shm"
    shm.mkdir()
    if shutil.disk_usage(shm).free <= 4 << 30:
        assert _tmpdir_for(shm) == ""  # no room: TMPDIR stays as it is
        return
    chosen = Path(_tmpdir_for(shm))
    assert chosen == shm / f"forkctl-tests-{os.getuid()}" and chosen.is_dir() and not chosen.is_symlink()
    assert oct(chosen.stat().st_mode & 0o777) == "0o700"
    # Someone else's link in the shared folder: the tests keep TMPDIR as it is.
    chosen.rename(tmp_path / "moved")
    elsewhere = tmp_path / "attacker"
    elsewhere.mkdir()
    chosen.symlink_to(elsewhere)
    assert _tmpdir_for(shm) == ""
    assert not any(elsewhere.iterdir())


def test_no_tmpfs_folder_where_the_shared_folder_is_missing(tmp_path: Path) -> None:
    assert _tmpdir_for(tmp_path / "missing") == ""


def test_the_patch_tests_are_one_unit_of_work_and_every_other_test_its_own() -> None:
    plan = PatchTestsTogether.__new__(PatchTestsTogether)  # _split_scope reads no state
    units = {
        plan._split_scope(nodeid)
        for nodeid in (
            "tests/patches/test_bench_moe_layer.py::test_smoke",
            "tests/patches/test_in_patch_units.py::test_units",
        )
    }
    assert units == {PATCH_TESTS}
    assert plan._split_scope("tests/test_apply.py::test_a[1]") == "tests/test_apply.py::test_a[1]"


def test_the_longest_tests_are_handed_out_first_as_the_last_run_measured(tmp_path: Path) -> None:
    """A run records each test's seconds in pytest's cache; the next run hands the longest out first
    (a test nothing measured keeps its place after them, so a first run keeps the slow-first order)."""
    (tmp_path / "test_timed.py").write_text(
        "import time\n\ndef test_quick():\n    pass\n\ndef test_long():\n    time.sleep(0.2)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "tests.make_test_plugin", "test_timed.py"]
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    seconds = json.loads((tmp_path / ".pytest_cache" / "v" / SECONDS_KEY).read_text())
    assert seconds["test_timed.py::test_long"] >= 0.2 > seconds["test_timed.py::test_quick"]
    units = ["test_timed.py::test_quick", "test_unmeasured.py::test_new", "test_timed.py::test_long"]
    queue = OrderedDict((unit, {unit: False}) for unit in units)
    assert list(longest_first(queue, seconds)) == [units[2], units[0], units[1]]


def test_a_first_run_hands_out_the_tests_that_wait_longest_first() -> None:
    """With nothing measured (a fresh checkout, CI): the tests marked slow in their file, those that say
    how long they wait (`slow(seconds=N)`) longest first, then the listed ones, then the rest."""
    files = ["tests/test_lint_status.py", "tests/test_validate_slurm.py", "tests/test_hook.py"]
    argv = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
    done = subprocess.run(
        [*argv, "-p", "tests.make_test_plugin", *files], cwd=ROOT, capture_output=True, text=True
    )
    order = [line.split("[", 1)[0] for line in done.stdout.splitlines() if "::" in line]
    slurm = "tests/test_validate_slurm.py::test_a_job_"
    assert order[:2] == [
        f"{slurm}past_its_time_limit_is_reported_as_timeout",
        f"{slurm}that_loses_its_node_is_reported_as_node_fail",
    ]
    listed = [i for i, test in enumerate(order) if test in listed_slow()]
    marked_in_hook = [
        i for i, test in enumerate(order) if test.startswith("tests/test_hook.py::test_try_repo")
    ]
    unlisted = [i for i, test in enumerate(order) if test.startswith("tests/test_lint_status.py")]
    assert listed and marked_in_hook and unlisted
    assert max(marked_in_hook) < min(listed) and max(listed) < min(unlisted)


def test_the_cpu_profile_counts_what_each_test_and_its_children_spent(tmp_path: Path) -> None:
    """`-p tests.cpu_profile` (docs/test-time.md): a test's CPU includes the children it waited for."""
    (tmp_path / "test_spent.py").write_text(
        "import subprocess, sys\n\ndef test_idle():\n    pass\n\n"
        "def test_child():\n    subprocess.run([sys.executable, '-c', 'sum(range(10**7))'], check=True)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.cpu_profile"]
    done = subprocess.run([*argv, "test_spent.py"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.split("the 25 tests that cost most:\n", 1)[1].splitlines()
    seconds = {line.split()[-1]: float(line.split()[0]) for line in lines[:2]}
    assert seconds["test_spent.py::test_child"] > 0.05 > seconds["test_spent.py::test_idle"], done.stdout


def _recipe(target: str) -> tuple[list[str], list[str]]:
    """(prerequisites, command lines) of a Makefile target."""
    makefile = (ROOT / "Makefile").read_text()
    match = re.search(
        rf"^{re.escape(target)}:([^#\n]*)(?:##[^\n]*)?\n((?:(?:\t|#)[^\n]*\n)*)", makefile, re.M
    )
    assert match is not None, f"no {target} target"
    lines = [line.strip() for line in match.group(2).splitlines() if line.startswith("\t")]
    return match.group(1).split(), lines


def test_make_test_installs_nothing_system_wide() -> None:
    """No root needed: `make test` sets up .venv only; the scripts it and `make setup-mermaid` run never
    install a system package (the browser is unpacked under .tools/), and CI brings the renderer first."""
    prerequisites, _ = _recipe("test")
    assert prerequisites == ["setup", "static"]
    installs = re.compile(r"^\s*(\w+=\S+\s+)*(sudo\b|(apt-get|apt|dpkg)\s+(-\S+\s+)*(install|-i)\b)", re.M)
    for script in ("bootstrap.sh", "mermaid-setup.sh", "slurm-setup.sh", "test-pythons.sh", "test-tmpdir.sh"):
        assert not installs.search((ROOT / "scripts" / script).read_text()), script
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.startswith("make")]
    assert ci == ["make setup-mermaid", "make test"]


def test_make_test_fast_is_the_suite_without_the_slow_tests() -> None:
    prerequisites, lines = _recipe("test-fast")
    assert prerequisites == ["setup"]
    (pytest_line,) = [line for line in lines if "-m pytest" in line]
    assert '-m "not slow"' in pytest_line and "-p tests.make_test_plugin" in pytest_line


def test_every_test_the_slow_list_names_exists() -> None:
    """tests/slow-tests.txt takes tests out of the fast loop by name: a name that no longer names a test
    (renamed, removed) would silently put nothing slow back, so each must be collected."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    collected = {line.split("[", 1)[0] for line in done.stdout.splitlines() if "::" in line}
    assert listed_slow() and not listed_slow() - collected, sorted(listed_slow() - collected)
