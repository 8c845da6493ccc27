"""A plain `pytest` (no plugin, no Makefile) cannot write into the user's home or forkctl cache.

tests/conftest.py gives every test its own HOME, XDG_CACHE_HOME and FORKCTL_CACHE, and fails a test
that changed the user's. Shown here on a session of its own: a small pytest run with this conftest, in
which "the user's home" is a folder of this test, so a failure here cannot touch the real one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

INNER_TESTS = """
import os
from pathlib import Path

from forkctl import contentcache


def test_a_forkctl_cache_write_lands_in_the_tests_own_cache():
    contentcache.write("probe", contentcache.key_of("probe", b"x"), b"payload")


def test_a_write_into_the_users_home_fails(tmp_path):
    Path({home!r}, "left-by-a-test").write_text("x")
"""


@pytest.fixture(scope="module")
def inner_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """A pytest session under tests/conftest.py whose HOME is `home` and whose FORKCTL_CACHE is unset."""
    where = tmp_path_factory.mktemp("inner")
    home = where / "users-home"
    home.mkdir()
    (where / "suite").mkdir()
    shutil.copy(ROOT / "tests" / "conftest.py", where / "suite" / "conftest.py")
    (where / "suite" / "test_inner.py").write_text(INNER_TESTS.format(home=str(home)))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FORKCTL_", "PYTEST_", "XDG_"))}
    env |= {"HOME": str(home), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-p", "no:xdist", "suite"],
        cwd=where,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return home, done


def test_forkctl_writes_nothing_into_the_users_cache(inner_run) -> None:
    home, done = inner_run
    assert "test_inner.py::test_a_forkctl_cache_write_lands_in_the_tests_own_cache PASSED" in done.stdout
    assert not (home / ".cache").exists(), sorted(p.name for p in home.rglob("*"))


def test_a_test_that_writes_into_the_users_home_fails(inner_run) -> None:
    _, done = inner_run
    assert done.returncode == 1, done.stdout
    assert "test_a_write_into_the_users_home_fails ERROR" in done.stdout
    assert "the test wrote into the user's home or caches" in done.stdout
    assert "users-home/left-by-a-test" in done.stdout


def test_this_test_has_a_home_and_caches_of_its_own(tmp_path: Path) -> None:
    for name in ("HOME", "XDG_CACHE_HOME", "FORKCTL_CACHE"):
        value = Path(os.environ[name])
        assert value.is_relative_to(tmp_path.parent), (name, value)
    assert os.path.expanduser("~") == os.environ["HOME"] != os.environ["FORKCTL_TESTS_REAL_HOME"]
