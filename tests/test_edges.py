"""Bad input at the edges ends in exit 2 with a message saying what to fix, never exit 3 ("a bug in
forkctl"). Real toolkits, real forkctl processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.seriesrepo import clone, make_series, run_json
from tests.toolkit import flat, make_toolkit, many_consumers

ROOT = Path(__file__).resolve().parent.parent


def forkctl(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "forkctl", *args],
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("below", [False, True], ids=["the-file", "below-a-file"])
def test_forkctl_cache_naming_a_file_is_bad_input(tmp_path: Path, below: bool) -> None:
    toolkit = make_toolkit(tmp_path)
    plain = tmp_path / "not-a-folder"
    plain.write_text("x")
    cache = plain / "cache" if below else plain
    done = forkctl("--manifest", str(toolkit.manifest), "export", env={"FORKCTL_CACHE": str(cache)})
    assert done.returncode == 2, done.stderr
    assert f"{plain} is not a folder" in flat(done.stderr) and "FORKCTL_CACHE" in done.stderr
    assert plain.read_text() == "x"


def test_a_deeply_nested_state_file_is_unreadable_not_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    setup = make_series(tmp_path)
    repo = clone(setup.upstream, tmp_path / "r", bare=True)
    state = repo.path / "forkctl" / "build-state.json"
    state.parent.mkdir()
    state.write_text('{"operation": "port", "extra": {"a": ' + "[" * 100_000 + "]" * 100_000 + "}}")
    code, data = run_json(setup, "port", "--continue", "--repo", str(repo.path))
    assert code == 2 and "unreadable" in data["error"], data
    code, data = run_json(setup, "port", "--abort", "--repo", str(repo.path))
    assert code == 0 and data["aborted"] is True, data
    assert not state.exists()


def test_a_600_consumer_chain_is_refused_by_the_manifest_check(tmp_path: Path) -> None:
    toolkit = make_toolkit(tmp_path)
    data = toolkit.manifest_data()
    data["consumers"] = many_consumers(600)
    toolkit.write_manifest(data)
    for verb in ("lint", "check-pins"):
        done = forkctl("--manifest", str(toolkit.manifest), verb, env={"FORKCTL_CACHE": str(tmp_path / "c")})
        assert done.returncode == 2, (verb, done.stdout, done.stderr)
        assert "600 consumers is more than forkctl follows (at most 64)" in done.stdout + done.stderr
