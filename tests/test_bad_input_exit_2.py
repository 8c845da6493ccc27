"""Every bad input gets exit 2 with a message, never exit 3 (a bug) or a hang (issue 37).

Each case is a `forkctl` process run as a CI job runs it, with a bound on its time: a device or a FIFO
given as a file, an empty option value, a truncated archive, a cache that cannot be used.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.seriesrepo import SeriesSetup, clone, make_series


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SeriesSetup:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    return make_series(tmp_path)


def forkctl(
    setup: SeriesSetup, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "PYTEST_"))} | (env or {})
    return subprocess.run(
        [sys.executable, "-m", "forkctl", "--manifest", str(setup.manifest), *args],
        env=full,
        capture_output=True,
        text=True,
        timeout=60,
    )


def assert_bad_input(result: subprocess.CompletedProcess[str], says: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    assert says in result.stderr, result.stderr
    assert "bug in forkctl" not in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("verb", [["status", "--onto", "main"], ["apply"], ["export"]])
def test_a_repo_that_is_a_device_is_bad_input(setup: SeriesSetup, verb: list[str]) -> None:
    assert_bad_input(forkctl(setup, *verb, "--repo", "/dev/null"), "is not a folder")


def test_an_empty_branch_is_bad_input_not_the_default(setup: SeriesSetup, tmp_path: Path) -> None:
    fork = clone(setup.upstream, tmp_path / "fork", bare=True)
    assert_bad_input(forkctl(setup, "edit", "--branch", "", "--repo", str(fork.path)), "must not be empty")
    assert "forkctl/edit" not in fork.git("branch", "--list")


def test_a_source_that_is_a_device_is_refused_at_once(setup: SeriesSetup) -> None:
    assert_bad_input(forkctl(setup, "validate", "--source", "/dev/zero"), "is not a regular file")


def test_a_truncated_source_archive_is_bad_input_before_any_gpu_is_asked_for(tmp_path: Path) -> None:
    """The likeliest bad archive: an interrupted copy. Refused on a CPU host too (no CUDA check first)."""
    from tests.test_evidence import gpu_toolkit

    toolkit = gpu_toolkit(tmp_path / "t")
    whole = io.BytesIO()
    with tarfile.open(fileobj=whole, mode="w:gz") as tar:
        data = os.urandom(200_000)  # incompressible: the cut lands inside the data
        info = tarfile.TarInfo("megatron/core/blob.bin")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    archive = tmp_path / "base.tgz"
    archive.write_bytes(whole.getvalue()[: len(whole.getvalue()) // 2])
    setup = SeriesSetup(root=toolkit.root, upstream=None, base="", dev_commits=[])  # type: ignore[arg-type]
    assert_bad_input(forkctl(setup, "validate", "--source", str(archive)), "make it again")


@pytest.mark.parametrize(
    "cache",
    ["/proc/forkctl-cache", "/proc/self/forkctl-cache", "file-as-cache-folders"],
    ids=["proc", "proc-self", "files"],
)
def test_a_cache_that_cannot_be_used_is_bad_input(setup: SeriesSetup, tmp_path: Path, cache: str) -> None:
    if cache == "file-as-cache-folders":
        folder = tmp_path / "odd-cache"
        folder.mkdir()
        for name in ("repos", "locks", "parsed-manifests", "listings", "series"):
            (folder / name).write_text("a file where a folder goes\n")
        cache = str(folder)
    fork = clone(setup.upstream, tmp_path / "fork", bare=True)
    result = forkctl(setup, "status", "--onto", "main", env={"FORKCTL_CACHE": cache})
    assert result.returncode in (0, 2), result.stdout + result.stderr  # without the cache, or refused
    if result.returncode == 2:
        assert_bad_input(result, "FORKCTL_CACHE")
    result = forkctl(
        setup, "apply", "--base", setup.base, "--repo", str(fork.path), env={"FORKCTL_CACHE": cache}
    )
    assert result.returncode in (0, 2), result.stdout + result.stderr
    if result.returncode == 2:
        assert_bad_input(result, "FORKCTL_CACHE")
