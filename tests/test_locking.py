"""Concurrent runs on one toolkit or repository wait for each other (real processes, real locks)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.seriesrepo import SeriesSetup, clone, make_series

CLI = "import sys; from forkctl.cli import main; sys.argv[0] = 'forkctl'; main()"


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SeriesSetup:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parent.parent))
    return make_series(tmp_path)


def start(setup: SeriesSetup, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CLI, "--manifest", str(setup.manifest), *args, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )


@pytest.mark.slow
def test_two_exports_at_once_lose_nothing(setup: SeriesSetup, tmp_path: Path) -> None:
    """Two maintainers export two different branches at the same moment: the later one wins whole,
    the manifest matches its files, and no file of either is half written."""
    dev = setup.dev
    dev.git("checkout", "-q", "-b", "shorter", "series~1")
    runs = [
        start(setup, "export", "--repo", str(dev.path), "--from", branch) for branch in ("series", "shorter")
    ]
    results = [(proc.wait(timeout=120), proc.stdout.read() if proc.stdout else "") for proc in runs]
    assert [code for code, _ in results] == [0, 0], results
    listed = [entry["file"] for entry in yaml.safe_load(setup.manifest.read_text())["series"]]
    on_disk = sorted(str(p.relative_to(setup.root)) for p in (setup.root / "patches").rglob("*.patch"))
    assert sorted(listed) == on_disk  # the manifest and the files agree: one export's whole result
    assert len(listed) in (3, 4)
    code = subprocess.run(
        [sys.executable, "-c", CLI, "--manifest", str(setup.manifest), "lint", "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert code.returncode == 0, code.stdout


def test_a_second_apply_on_the_same_repository_waits_then_reports_clearly(
    setup: SeriesSetup, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from forkctl import locking

    repo = clone(setup.upstream, tmp_path / "r", bare=True)
    monkeypatch.setenv("FORKCTL_LOCK_TIMEOUT", "1")
    with locking.repository(repo.path):  # another forkctl holds the repository
        proc = start(setup, "apply", "--base", setup.base, "--repo", str(repo.path))
        out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 2, out
    data = json.loads(out)
    assert "another forkctl (pid " in data["error"] and "is working on the repository" in data["error"]
    assert repo.git("for-each-ref", "refs/heads/farai/main") == ""
    proc = start(setup, "apply", "--base", setup.base, "--repo", str(repo.path))
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
