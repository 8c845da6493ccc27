"""forkctl apply --tree: patch a plain directory (no repository), all or nothing, idempotent."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from forkctl.cli import cli
from tests.seriesrepo import SeriesSetup, make_series
from tests.toolkit import flat


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


def test_paths_with_spaces_and_non_ascii_are_patched(tmp_path: Path) -> None:
    changes: list[tuple[str, dict[str, str | None]]] = [
        ("feat: odd names", {"megatron/core/with space.py": "S = 1\n", "megatron/core/café.py": "C = 'é'\n"}),
    ]
    setup = make_series(tmp_path, changes=changes)
    site = _site(setup, tmp_path)
    code, data = _apply(setup, "--tree", str(site))
    assert code == 0, data
    assert data["changed"] == ["0001-feat-odd-names.patch"]
    assert (site / "megatron/core/with space.py").read_text() == "S = 1\n"
    assert (site / "megatron/core/café.py").read_text() == "C = 'é'\n"
    code, data = _apply(setup, "--tree", str(site), "--reverse")
    assert code == 0, data
    assert not (site / "megatron/core/with space.py").exists()


def test_a_symlinked_folder_leading_out_of_the_tree_is_refused(setup: SeriesSetup, tmp_path: Path) -> None:
    site = _site(setup, tmp_path)
    outside = tmp_path / "elsewhere"
    shutil.move(site / "megatron" / "core", outside)
    (site / "megatron" / "core").symlink_to(outside, target_is_directory=True)
    before = _snapshot(outside)
    code, data = _apply(setup, "--tree", str(site))
    assert code == 2, data
    assert "leads out of" in data["error"]
    assert _snapshot(outside) == before


@pytest.mark.slow
def test_sigkill_at_any_point_leaves_old_or_new_after_the_next_run(
    setup: SeriesSetup, tmp_path: Path
) -> None:
    """Real kills at spread-out moments of `apply --tree`: right after, the tree is the old one, the new
    one, or carries a journal; the next run then always ends with exactly the new tree."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from forkctl.ops import patch_dir

    reference = _site(setup, tmp_path / "ref")
    assert _apply(setup, "--tree", str(reference))[0] == 0
    new = _snapshot(reference)
    code = "import sys; from forkctl.cli import main; sys.argv[0] = 'forkctl'; main()"
    args = [sys.executable, "-c", code, "--manifest", str(setup.manifest), "apply", "--tree"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    started = time.perf_counter()
    subprocess.run([*args, str(_site(setup, tmp_path / "timing"))], env=env, check=True, capture_output=True)
    full_run = time.perf_counter() - started
    for trial in range(10):
        site = _site(setup, tmp_path / f"trial{trial}")
        old = _snapshot(site)
        proc = subprocess.Popen([*args, str(site)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(full_run * (0.5 + 0.06 * trial))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        time.sleep(0.2)
        now = _snapshot(site)
        journaled = (site / patch_dir.JOURNAL).is_file()
        # Or killed while staging: staged files, and maybe the journal's own temp file (atomic writer).
        staging = all(
            ".forkctl-new" in p or p.startswith(f".{patch_dir.JOURNAL}.") for p in set(now) - set(old)
        )
        assert journaled or now in (old, new) or staging
        assert _apply(setup, "--tree", str(site))[0] == 0
        assert _snapshot(site) == new
        assert not list(site.rglob("*.forkctl-new"))


def test_a_folder_where_the_series_has_a_file_is_bad_input(setup: SeriesSetup, tmp_path: Path) -> None:
    site = _site(setup, tmp_path)
    (site / "megatron/core/new.py").mkdir()  # patch 2 creates this file
    before = _snapshot(site)
    code, data = _apply(setup, "--tree", str(site))
    assert code == 2, data
    assert "is a folder" in data["error"]
    assert _snapshot(site) == before


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--tree", "TREE", "--base", "HEAD"], "--base has no effect with --tree"),
        (["--tree", "TREE", "--force", "--branch", "x"], "--branch, --force have no effect with --tree"),
        (["--tree", "TREE", "--continue"], "--continue has no effect with --tree"),
        (["--base", "BASE", "--reverse"], "--reverse has no effect without --tree"),
        (["--base", "BASE", "--include", "tests/**"], "--include has no effect without --tree"),
    ],
)
def test_options_of_the_other_mode_are_refused_not_ignored(
    setup: SeriesSetup, tmp_path: Path, args: list[str], named: str
) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "keep.txt").write_text("untouched\n")
    argv = [str(tree) if a == "TREE" else setup.base if a == "BASE" else a for a in args]
    code, data = _apply(setup, *argv)
    assert code == 2 and named in data["error"], data
    assert [p.name for p in tree.iterdir()] == ["keep.txt"]  # nothing was applied


def test_a_journal_half_written_by_a_killed_run_is_cleaned_up(setup: SeriesSetup, tmp_path: Path) -> None:
    """Killed while writing the journal (temp file + rename): staged files and the journal's temp file
    are left; the next run removes both and ends with the patched tree."""
    from forkctl.ops import patch_dir

    reference = _site(setup, tmp_path / "ref")
    assert _apply(setup, "--tree", str(reference))[0] == 0
    site = _site(setup, tmp_path / "site")
    (site / f".{patch_dir.JOURNAL}.abcd1234.tmp").write_text('{"swaps": [')
    (site / "megatron/core/.a.py.forkctl-new").write_text("half\n")
    result = CliRunner().invoke(cli, ["--manifest", str(setup.manifest), "apply", "--tree", str(site)])
    assert result.exit_code == 0, result.output
    assert _snapshot(site) == _snapshot(reference)
    # Said, so that a person who saw those files knows where they went.
    assert f"removed 2 file(s) an earlier apply --tree, interrupted, had staged in {site}" in flat(
        result.stdout
    )


def test_the_manifest_names_what_a_tree_takes_and_every_path_by_default(
    setup: SeriesSetup, tmp_path: Path
) -> None:
    # The fixture's manifest says fork.tree_include: megatron/** (as this repository's does): the
    # readme-only patch is left out. Without the key, a tree takes every path of the series.
    data = yaml.safe_load(setup.manifest.read_text())
    assert data["fork"].pop("tree_include") == "megatron/**"
    setup.manifest.write_text(yaml.safe_dump(data, sort_keys=False))
    site = _site(setup, tmp_path)
    (site / "README.md").write_bytes((setup.upstream.path / "README.md").read_bytes())
    code, result = _apply(setup, "--tree", str(site))
    assert code == 0, result
    statuses = {p["file"]: p["status"] for p in result["patches"]}
    assert statuses["0003-docs-readme-only.patch"] != "no-matching-paths"
    assert (site / "README.md").read_bytes() != (setup.upstream.path / "README.md").read_bytes()


@pytest.mark.parametrize("reverse", [False, True], ids=["apply", "reverse"])
def test_a_folder_holding_none_of_the_package_is_bad_input(
    setup: SeriesSetup, tmp_path: Path, reverse: bool
) -> None:
    """An empty folder, or one level too deep (megatron/ itself), holds nothing to patch: not a tree
    that "carries part of the series"."""
    empty = tmp_path / "empty"
    empty.mkdir()
    too_deep = _site(setup, tmp_path) / "megatron"
    for tree in (empty, too_deep):
        before = _snapshot(tree)
        code, data = _apply(setup, "--tree", str(tree), *(["--reverse"] if reverse else []))
        assert code == 2, data
        assert "holds none of the files the series patches" in data["error"], data
        assert "carries part" not in data["error"] and "applied: none" not in data["error"]
        assert "DIR/megatron/" in data["hint"]
        assert _snapshot(tree) == before
