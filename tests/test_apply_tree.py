"""forkctl apply --tree: patch a plain directory (no repository), all or nothing, idempotent."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from forkctl.cli import cli
from tests.seriesrepo import SeriesSetup, make_series


@pytest.fixture
def setup(tmp_path: Path) -> SeriesSetup:
    return make_series(tmp_path)


def _site(setup: SeriesSetup, tmp_path: Path) -> Path:
    """A site-packages-like folder holding a copy of upstream's megatron/ at the base (no .git)."""
    site = tmp_path / "site"
    shutil.copytree(setup.upstream.path / "megatron", site / "megatron")
    return site


def _snapshot(tree: Path) -> dict[str, bytes]:
    return {str(p.relative_to(tree)): p.read_bytes() for p in sorted(tree.rglob("*")) if p.is_file()}


def _apply(setup: SeriesSetup, *args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(cli, ["--manifest", str(setup.manifest), "apply", *args, "--json"])
    return result.exit_code, json.loads(result.output)


def test_applies_series_to_tree_and_is_idempotent(setup: SeriesSetup, tmp_path: Path) -> None:
    site = _site(setup, tmp_path)
    code, data = _apply(setup, "--tree", str(site))
    assert code == 0, data
    assert data["state"] == "unapplied"
    # The readme-only patch touches nothing under megatron/: trivially applied, not run.
    statuses = {p["file"]: p["status"] for p in data["patches"]}
    assert statuses["0003-docs-readme-only.patch"] == "no-matching-paths"
    assert len(data["changed"]) == 3
    assert "return 10" in (site / "megatron/core/a.py").read_text()
    assert "'hi'" in (site / "megatron/core/a.py").read_text()
    assert (site / "megatron/core/new.py").read_text() == "NEW = True\n"
    # Paths outside --include are never created.
    assert not (site / "tests").exists()
    patched = _snapshot(site)

    code, data = _apply(setup, "--tree", str(site))
    assert code == 0
    assert data["state"] == "applied"
    assert data["changed"] == []
    assert _snapshot(site) == patched


def test_reverse_takes_series_out(setup: SeriesSetup, tmp_path: Path) -> None:
    site = _site(setup, tmp_path)
    pristine = _snapshot(site)
    assert _apply(setup, "--tree", str(site))[0] == 0
    code, data = _apply(setup, "--tree", str(site), "--reverse")
    assert code == 0, data
    assert data["direction"] == "reverse"
    assert len(data["changed"]) == 3
    assert _snapshot(site) == pristine
    # Taking out a series that is not there changes nothing and succeeds.
    code, data = _apply(setup, "--tree", str(site), "--reverse")
    assert code == 0 and data["changed"] == []
    assert _snapshot(site) == pristine


def test_partial_tree_refused_without_changes(setup: SeriesSetup, tmp_path: Path) -> None:
    site = _site(setup, tmp_path)
    # Carry only the first patch: a.py returns 10, but no new.py and no helper change.
    (site / "megatron/core/a.py").write_text("def a():\n    return 10\n\n\ndef helper():\n    return 'h'\n")
    before = _snapshot(site)
    code, data = _apply(setup, "--tree", str(site))
    assert code == 1
    assert data["state"] == "partial"
    statuses = {p["file"]: p["status"] for p in data["patches"]}
    assert statuses["0001-feat-core-a-returns-10.patch"] == "applied"
    assert statuses["0002-feat-core-add-new-module-and-its-test.patch"] == "not-applied"
    assert "applied: 0001" in data["problems"][0]["message"]
    assert _snapshot(site) == before


def test_conflicting_edit_changes_no_file(setup: SeriesSetup, tmp_path: Path) -> None:
    site = _site(setup, tmp_path)
    # The last patch cannot apply (helper edited locally), though the first two could: nothing changes.
    (site / "megatron/core/a.py").write_text(
        "def a():\n    return 1\n\n\ndef helper():\n    return 'local'\n"
    )
    before = _snapshot(site)
    code, data = _apply(setup, "--tree", str(site))
    assert code == 1
    assert _snapshot(site) == before
    statuses = {p["file"]: p["status"] for p in data["patches"]}
    assert statuses["0004-fix-core-helper-says-hi.patch"] == "conflict"


def test_include_glob_limits_paths(setup: SeriesSetup, tmp_path: Path) -> None:
    site = _site(setup, tmp_path)
    code, data = _apply(setup, "--tree", str(site), "--include", "megatron/core/new.py")
    assert code == 0, data
    assert data["changed"] == ["0002-feat-core-add-new-module-and-its-test.patch"]
    assert (site / "megatron/core/new.py").exists()
    assert "return 1\n" in (site / "megatron/core/a.py").read_text()


def test_tree_must_exist(setup: SeriesSetup, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["--manifest", str(setup.manifest), "apply", "--tree", str(tmp_path / "nope")]
    )
    assert result.exit_code == 2
