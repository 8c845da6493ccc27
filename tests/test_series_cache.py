"""What git says about a series' patch text (the paths each diff names, its patch-id) is kept by the
content of the diffs, so a second `lint` or `status` of the same series spawns no git process; an
entry is data, never trusted: a corrupted or misplaced one is ignored and git is asked again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import budget
from tests.gitshim import GitShim, make_git_shim
from tests.toolkit import Toolkit, make_toolkit

ROOT = Path(__file__).resolve().parent.parent


def _forkctl(shim: GitShim, cache: Path, *args: str) -> tuple[int, str]:
    env = shim.env({**os.environ, "PYTHONPATH": str(ROOT), "FORKCTL_CACHE": str(cache)})
    proc = subprocess.run(
        [sys.executable, "-m", "forkctl", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        check=False,
    )
    return proc.returncode, proc.stdout + proc.stderr


def _facts(cache: Path) -> list[Path]:
    return sorted((cache / "patch-facts").glob("*.json")) if cache.exists() else []


@pytest.fixture
def toolkit(tmp_path: Path) -> Toolkit:
    return make_toolkit(tmp_path, patches=3)


def _status(shim: GitShim, cache: Path, toolkit: Toolkit) -> list[dict]:
    code, out = _forkctl(shim, cache, "--manifest", str(toolkit.manifest), "status", "--json")
    assert code == 0, out
    return [{k: p[k] for k in ("paths", "patch_id")} for p in json.loads(out)["patches"]]


@pytest.mark.budget(
    "a second `lint` / `status` of the same series (0.145 / 0.147 s, target 0.25 s; bench/startup_bench.py, "
    "2026-12-02) reads git's answers about the diffs from the cache: no git process"
)
def test_a_second_lint_or_status_spawns_no_git(tmp_path: Path, toolkit: Toolkit) -> None:
    shim, cache = make_git_shim(tmp_path), tmp_path / "cache"
    first = _status(shim, cache, toolkit)
    assert shim.calls()  # the first run asks git (the shim sees it)
    shim.reset()
    assert _status(shim, cache, toolkit) == first
    code, out = _forkctl(shim, cache, "--manifest", str(toolkit.manifest), "lint")
    assert code == 0, out
    budget.none_of("git processes of a second status and lint", shim.calls())


def test_an_edited_patch_is_asked_about_again(tmp_path: Path, toolkit: Toolkit) -> None:
    shim, cache = make_git_shim(tmp_path), tmp_path / "cache"
    first = _status(shim, cache, toolkit)
    patch = toolkit.patch_files[2]
    patch.write_bytes(patch.read_bytes().replace(b"new_3.py", b"renamed_3.py"))
    shim.reset()
    now = _status(shim, cache, toolkit)
    assert shim.calls()
    assert now[2]["paths"] == ["megatron/core/renamed_3.py"] and now[:2] == first[:2]


@pytest.mark.parametrize(
    "damage",
    [
        lambda raw: b"",
        lambda raw: raw[:-7],
        lambda raw: raw.replace(b"megatron/core/a.py", b"megatron/core/z.py"),
    ],
    ids=["empty", "truncated", "edited-value"],
)
def test_a_corrupted_entry_is_ignored(tmp_path: Path, toolkit: Toolkit, damage) -> None:
    shim, cache = make_git_shim(tmp_path), tmp_path / "cache"
    first = _status(shim, cache, toolkit)
    [entry] = _facts(cache)
    entry.write_bytes(damage(entry.read_bytes()))
    shim.reset()
    assert _status(shim, cache, toolkit) == first
    assert shim.calls()


def test_another_series_entry_under_this_name_is_ignored(tmp_path: Path, toolkit: Toolkit) -> None:
    shim, cache = make_git_shim(tmp_path), tmp_path / "cache"
    first = _status(shim, cache, toolkit)
    [original] = _facts(cache)
    data = toolkit.manifest_data()
    data["series"] = data["series"][:2]
    toolkit.patch_files[2].unlink()
    toolkit.write_manifest(data)
    _status(shim, cache, toolkit)
    [shorter] = [entry for entry in _facts(cache) if entry != original]
    shorter.write_bytes(original.read_bytes())  # three patches' facts under the two-patch series' name
    shim.reset()
    assert _status(shim, cache, toolkit) == first[:2]
    assert shim.calls()
