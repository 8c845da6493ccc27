"""`export --check` of a branch whose files an earlier export (or apply's full check) found byte for byte
equal is answered from the export record: the branch tip, the files' bytes and the record, with a couple
of git processes and no walk, read or format-patch; anything else takes the full render. Processes are
counted through a git shim on PATH."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests import budget
from tests.gitrepos import Repo
from tests.gitshim import GitShim, make_git_shim
from tests.probe import probe
from tests.seriesrepo import SeriesSetup, clone, make_series, run_json

ROOT = Path(__file__).resolve().parent.parent
BRANCH = "farai/main"
MOST_PROCESSES = 3  # find the repository, resolve the base and the branch
RENDERING = {"merge-base", "rev-list", "log", "format-patch", "cat-file", "commit-tree"}
EXPORT_CHECK = (
    "`export --check` of 100 patches: 0.202 s against 0.036 s for its alternative, target a ratio of 2 "
    "(bench/series_bench.py, 2026-12-02T03:00Z; README, CPU benchmarks)"
)


@pytest.fixture
def scene(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[SeriesSetup, Repo, GitShim]:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    setup = make_series(tmp_path)
    repo = clone(setup.upstream, tmp_path / "clone", bare=True)
    # The shim from the start: the export record is kept per git binary, and the shim is one.
    shim = make_git_shim(tmp_path)
    monkeypatch.setenv("PATH", shim.env()["PATH"])
    code, data = run_json(setup, "apply", "--base", setup.base, "--repo", str(repo.path), "--branch", BRANCH)
    assert code == 0, data
    code, data = run_json(setup, "export", "--repo", str(repo.path), "--branch", BRANCH)
    assert code == 0, data
    return setup, repo, shim


def _check(setup: SeriesSetup, repo: Repo, shim: GitShim) -> tuple[int, dict, list[str]]:
    shim.reset()
    code, data = run_json(setup, "export", "--check", "--repo", str(repo.path), "--branch", BRANCH)
    return code, data, shim.calls()


@pytest.mark.budget(EXPORT_CHECK)
def test_check_of_an_exported_branch_takes_a_few_processes(scene) -> None:
    setup, repo, shim = scene
    code, data, calls = _check(setup, repo, shim)
    assert code == 0, data
    budget.at_most("git processes of `export --check` from the record", len(calls), MOST_PROCESSES, calls)
    budget.none_of("git walks, reads or renders of `export --check` from the record", RENDERING & set(calls))
    assert [p["file"] for p in data["patches"]] == [e["file"] for e in setup.manifest_data()["series"]]
    assert all(
        len(p["commit"]) == 40 and [len(sha) for sha in p["provenance"]] == [40] for p in data["patches"]
    )
    assert not data["changed"] and not data["stale"] and not data["manifest_changed"]


def test_a_hand_edited_file_is_found(scene) -> None:
    setup, repo, shim = scene
    patch = sorted((setup.root / "patches").rglob("*.patch"))[1]
    patch.write_bytes(patch.read_bytes().replace(b"Why: patch 2.", b"Why: patch two."))
    code, data, calls = _check(setup, repo, shim)
    assert code == 1, data
    assert data["changed"] == [str(patch.relative_to(setup.root))]
    assert "format-patch" in calls


def test_a_moved_branch_is_found(scene) -> None:
    setup, repo, shim = scene
    repo.git("update-ref", f"refs/heads/{BRANCH}", f"{BRANCH}~1")
    code, data, _calls = _check(setup, repo, shim)
    assert code == 1, data
    assert data["stale"]


def test_a_renamed_file_is_found(scene) -> None:
    setup, repo, shim = scene
    data = setup.manifest_data()
    first = setup.root / data["series"][0]["file"]
    renamed = first.with_name("0001-another-name.patch")
    shutil.move(first, renamed)
    data["series"][0]["file"] = str(renamed.relative_to(setup.root))
    setup.manifest.write_text(__import__("yaml").safe_dump(data, sort_keys=False))
    code, out, _calls = _check(setup, repo, shim)
    assert code == 1, out
    assert out["changed"] and out["stale"] == [data["series"][0]["file"]]


def test_patches_git_wrote_are_not_taken_for_exported_ones(tmp_path: Path, monkeypatch) -> None:
    """Files that apply to exactly the branch but are not export's bytes (here: plain format-patch, with
    a diffstat) are reported on every check: an apply record says nothing about the files' bytes."""
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    setup = make_series(tmp_path)
    repo = clone(setup.upstream, tmp_path / "clone", bare=True)
    code, data = run_json(setup, "apply", "--base", setup.base, "--repo", str(repo.path), "--branch", BRANCH)
    assert code == 0, data
    for _ in range(2):
        code, data = run_json(setup, "export", "--check", "--repo", str(repo.path), "--branch", BRANCH)
        assert code == 1 and len(data["changed"]) == 4, data


def test_another_git_binary_renders_again(scene, tmp_path: Path, monkeypatch) -> None:
    """The record vouches for git's output bytes: under another git build it is not used."""
    setup, repo, shim = scene
    other = make_git_shim(tmp_path / "other")
    monkeypatch.setenv("PATH", other.env()["PATH"])
    code, data, _calls = _check(setup, repo, shim)
    assert code == 0, data
    assert "format-patch" in other.calls()


COUNT_PATCH_OPENS = """
import collections, os
opened = collections.Counter()


def count_patch_opens(event, args):
    if event == "open" and isinstance(args[0], str) and args[0].endswith(".patch"):
        opened[os.path.realpath(args[0])] += 1


sys.addaudithook(count_patch_opens)
"""


def _patch_file_opens(
    setup: SeriesSetup, repo: Repo, tmp_path: Path
) -> tuple[dict[str, int], dict[str, int]]:
    """(how many times an `export --check` opened each patch file, each series file once)."""
    args = ["--manifest", str(setup.manifest), "export", "--check", "--repo", str(repo.path)]
    proc, opened = probe(
        tmp_path, '__import__("json").dumps(opened)', *args, "--branch", BRANCH, before=COUNT_PATCH_OPENS
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    series = [os.path.realpath(setup.root / e["file"]) for e in setup.manifest_data()["series"]]
    return json.loads(opened), dict.fromkeys(series, 1)


def _each_read_once(opened: dict[str, int], once_each: dict[str, int]) -> None:
    assert set(opened) == set(once_each)  # the series' files, each read, and no other patch file
    for path, reads in opened.items():
        budget.at_most(f"reads of {Path(path).name}", reads, once_each[path])


@pytest.mark.budget(EXPORT_CHECK)
def test_a_check_from_the_record_reads_each_patch_file_once(scene, tmp_path: Path) -> None:
    """The record's answer is the files' own bytes: comparing them with the files again is a second read
    of every patch for nothing (Python's audit hook sees each open)."""
    setup, repo, _shim = scene
    _each_read_once(*_patch_file_opens(setup, repo, tmp_path))


@pytest.mark.budget(EXPORT_CHECK)
def test_a_rendered_check_records_what_it_compared_without_reading_the_files_back(
    scene, tmp_path: Path
) -> None:
    """Without a record the branch is rendered and compared with the files (one read each); recording
    the match needs only the rendered bytes, not the files parsed again."""
    setup, repo, _shim = scene
    shutil.rmtree(tmp_path / "cache" / "exported")
    _each_read_once(*_patch_file_opens(setup, repo, tmp_path))
    assert list((tmp_path / "cache" / "exported").glob("*.json"))  # and the record was written
