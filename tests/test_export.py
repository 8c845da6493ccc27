"""forkctl export: byte-stable files with provenance, the manifest list, --check, round trip with apply."""

from __future__ import annotations

from pathlib import Path

import pytest

from forkctl.series import parse_patch
from tests.seriesrepo import SeriesSetup, clone, make_series, run_json


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SeriesSetup:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    return make_series(tmp_path)


def series_bytes(setup: SeriesSetup) -> dict[str, bytes]:
    folder = setup.root / "patches"
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_export_tags_provenance_and_is_byte_stable(setup: SeriesSetup, tmp_path: Path) -> None:
    dev = setup.dev
    code, data = run_json(setup, "export", "--repo", str(dev.path), "--from", "series")
    assert code == 0, data
    series_commits = dev.git("rev-list", "--reverse", f"{setup.base}..series").split()
    assert [p["commit"] for p in data["patches"]] == series_commits
    manifest = setup.manifest_data()
    assert [e["provenance"] for e in manifest["series"]] == setup.dev_commits
    assert setup.manifest.read_text().startswith("# test manifest\n")  # comments survive
    for entry, dev_commit, series_commit in zip(
        manifest["series"], setup.dev_commits, series_commits, strict=True
    ):
        patch = parse_patch(setup.root / entry["file"])
        # The maintainer's cherry-pick line stays, the only one: it names the patch's origin.
        assert patch.provenance == [dev_commit]
        assert series_commit not in patch.message
    exported = series_bytes(setup)
    manifest_text = setup.manifest.read_text()
    code, data = run_json(setup, "export", "--repo", str(dev.path), "--from", "series")
    assert code == 0 and data["changed"] == [] and not data["manifest_changed"]
    assert series_bytes(setup) == exported
    assert setup.manifest.read_text() == manifest_text
    code, data = run_json(setup, "export", "--repo", str(dev.path), "--from", "series", "--check")
    assert code == 0, data


def test_round_trip_through_apply(setup: SeriesSetup, tmp_path: Path) -> None:
    dev = setup.dev
    assert run_json(setup, "export", "--repo", str(dev.path), "--from", "series")[0] == 0
    exported = series_bytes(setup)
    manifest_text = setup.manifest.read_text()
    fork = clone(setup.upstream, tmp_path / "fork", bare=True)
    code, data = run_json(setup, "apply", "--base", setup.base, "--repo", str(fork.path))
    assert code == 0, data
    code, data = run_json(setup, "export", "--repo", str(fork.path), "--check")
    assert code == 0, data
    code, data = run_json(setup, "export", "--repo", str(fork.path))
    assert code == 0 and data["changed"] == []
    assert series_bytes(setup) == exported
    assert setup.manifest.read_text() == manifest_text


def test_check_lists_edited_file(setup: SeriesSetup, tmp_path: Path) -> None:
    dev = setup.dev
    assert run_json(setup, "export", "--repo", str(dev.path), "--from", "series")[0] == 0
    first = setup.root / setup.manifest_data()["series"][0]["file"]
    first.write_bytes(first.read_bytes().replace(b"Why: patch 1.", b"Why: edited."))
    code, data = run_json(setup, "export", "--repo", str(dev.path), "--from", "series", "--check")
    assert code == 1
    assert data["changed"] == [setup.manifest_data()["series"][0]["file"]]
    assert b"Why: edited." in first.read_bytes()  # --check writes nothing


def test_amended_commit_keeps_its_origin_as_its_one_provenance(setup: SeriesSetup, tmp_path: Path) -> None:
    fork = clone(setup.upstream, tmp_path / "fork")
    assert run_json(setup, "apply", "--base", setup.base, "--repo", str(fork.path))[0] == 0
    # A maintainer amends the last applied commit: the file changes, where it came from does not.
    fork.git("checkout", "-q", "farai/main")
    fork.write({"megatron/core/a.py": "def a():\n    return 10\n\n\ndef helper():\n    return 'hello'\n"})
    fork.git("commit", "-q", "-a", "--amend", "--no-edit", "--date", "2026-03-01T00:00:00+00:00")
    amended = fork.head()
    fork.git("checkout", "-q", "main")
    code, data = run_json(setup, "export", "--repo", str(fork.path))
    assert code == 0, data
    last = data["patches"][-1]
    assert last["commit"] == amended and last["provenance"] == [setup.dev_commits[-1]]
    patch = parse_patch(setup.root / last["file"])
    assert patch.provenance == [setup.dev_commits[-1]]
    assert "'hello'" in patch.diff.decode()
    assert [p["changed"] for p in data["patches"]][:3] == [
        True,
        True,
        True,
    ]  # fixture names differ (numbered)


def test_several_provenance_lines_are_kept_as_git_wrote_them(setup: SeriesSetup, tmp_path: Path) -> None:
    """git's -x of a commit that already has a line adds another: export keeps both (it rewrites no
    message), lint accepts them, and the files round-trip through apply."""
    dev = setup.dev
    dev.git("checkout", "-q", "-b", "twice", "series")
    dev.git("checkout", "-q", "-b", "again", setup.base)
    for sha in dev.git("rev-list", "--reverse", f"{setup.base}..twice").split():
        dev.git("cherry-pick", "-x", sha)
    again = dev.git("rev-list", "--reverse", f"{setup.base}..again").split()
    series = dev.git("rev-list", "--reverse", f"{setup.base}..series").split()
    code, data = run_json(setup, "export", "--repo", str(dev.path), "--from", "again")
    assert code == 0, data
    files = [setup.root / e["file"] for e in setup.manifest_data()["series"]]
    kept = [parse_patch(f) for f in files]
    assert [p.provenance for p in kept] == [
        list(pair) for pair in zip(setup.dev_commits, series, strict=True)
    ]
    assert [e["provenance"] for e in setup.manifest_data()["series"]] == [p.provenance for p in kept]
    assert all(commit not in p.raw.decode() for commit, p in zip(again, kept, strict=True))
    code, lint = run_json(setup, "lint")
    assert code == 0 and lint["problems"] == [], lint
    code, check = run_json(setup, "export", "--repo", str(dev.path), "--from", "again", "--check")
    assert code == 0, check
    # The files apply back to commits that export as they are.
    fork = clone(setup.upstream, tmp_path / "fork", bare=True)
    assert run_json(setup, "apply", "--base", setup.base, "--repo", str(fork.path))[0] == 0
    before = [f.read_bytes() for f in files]
    code, data = run_json(setup, "export", "--repo", str(fork.path))
    assert code == 0 and data["changed"] == [], data
    assert [f.read_bytes() for f in files] == before


def test_removes_only_stale_series_files(setup: SeriesSetup, tmp_path: Path) -> None:
    dev = setup.dev
    assert run_json(setup, "export", "--repo", str(dev.path), "--from", "series")[0] == 0
    unrelated = setup.root / "patches" / "megatron-lm" / "notes.txt"
    unrelated.write_text("keep me\n")
    old = [e["file"] for e in setup.manifest_data()["series"]]
    code, data = run_json(setup, "export", "--repo", str(dev.path), "--from", "series~1")
    assert code == 0, data
    assert data["stale"] == [old[-1]]
    assert not (setup.root / old[-1]).exists()
    assert unrelated.read_text() == "keep me\n"
    assert [e["file"] for e in setup.manifest_data()["series"]] == old[:-1]


def test_a_subject_only_own_commit_is_exported_as_it_is(setup: SeriesSetup, tmp_path: Path) -> None:
    """A subject like "fix: typo" reads as a trailer; export adds nothing to it."""
    dev = setup.dev
    dev.git("checkout", "-q", "-b", "subject-only", setup.base)
    sha = dev.commit("fix: typo", {"README.md": "upstream, fixed\n"})
    code, data = run_json(setup, "export", "--repo", str(dev.path), "--from", "subject-only")
    assert code == 0, data
    patch = parse_patch(setup.root / setup.manifest_data()["series"][0]["file"])
    assert patch.message == "fix: typo\n" and patch.provenance == []
    assert sha not in patch.raw.decode()
    code, lint = run_json(setup, "lint")
    assert code == 0, lint


def test_export_refuses_a_commit_that_changes_nothing(setup: SeriesSetup, tmp_path: Path) -> None:
    dev = setup.dev
    dev.git("checkout", "-q", "-b", "with-empty", "series")
    empty = dev.commit("chore: nothing")  # --allow-empty
    before = series_bytes(setup)
    code, data = run_json(setup, "export", "--repo", str(dev.path), "--from", "with-empty")
    assert code == 2, data
    assert empty[:12] in data["error"] and "changes nothing" in data["error"]
    assert series_bytes(setup) == before
