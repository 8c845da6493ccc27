"""Content kept byte for byte (issue 37): what forkctl rewrites or publishes is what it was given.

- `refresh` changes a patch's diff (its index lines), nothing else: a Latin-1 author name or message
  byte and a reviewer's note after `---` come out as they went in;
- `publish` never pushes a fork file (`.fork-base.json`) as a symbolic link;
- a failed `edit` leaves no branch behind, so the next `edit` works.
Every run is a `forkctl` process, as a CI job or a person runs it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.seriesrepo import SeriesSetup, clone, make_series, run_json


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SeriesSetup:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    setup = make_series(tmp_path)
    code, data = run_json(setup, "export", "--repo", str(setup.dev.path), "--branch", "series")
    assert code == 0, data
    return setup


def forkctl(setup: SeriesSetup, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "PYTEST_"))}
    return subprocess.run(
        [sys.executable, "-m", "forkctl", "--manifest", str(setup.manifest), *args],
        env=env,
        capture_output=True,
    )


def test_refresh_keeps_a_latin1_header_and_a_note_after_the_separator(
    setup: SeriesSetup, tmp_path: Path
) -> None:
    fork = clone(setup.upstream, tmp_path / "fork", bare=True)
    patch = setup.patch_files[3]
    raw = patch.read_bytes()
    author = raw.split(b"\n")[1]
    assert author.startswith(b"From: ")
    name = author.split(b" <")[0]  # git folds a long From line: the address may be on the next line
    raw = raw.replace(name, b"From: Jos\xe9 Mar\xeda", 1)  # Latin-1, as an old mailer wrote it
    raw = raw.replace(b"Why: patch 4.", b"Why: patch 4, caf\xe9 \xa7 2.", 1)
    raw = raw.replace(b"\ndiff --git", b"---\nReviewer note: keep this.\n\ndiff --git", 1)
    edited = raw.replace(b"+    return 'hi'\n", b"+    return 'hey'\n")  # the hand edit refresh is for
    patch.write_bytes(edited)
    result = forkctl(setup, "refresh", "--repo", str(fork.path))
    assert result.returncode == 0, result.stdout + result.stderr
    after = patch.read_bytes()
    head = edited[: edited.index(b"\ndiff --git")]
    assert after.startswith(head + b"\ndiff --git"), after  # header, message and note byte for byte
    assert b"+    return 'hey'\n" in after
    changed = [(a, b) for a, b in zip(edited.split(b"\n"), after.split(b"\n"), strict=True) if a != b]
    assert len(changed) == 1 and changed[0][0].startswith(b"index "), changed  # only the index line
    again = forkctl(setup, "refresh", "--repo", str(fork.path))
    assert again.returncode == 0 and patch.read_bytes() == after, again.stdout + again.stderr
    linted = forkctl(setup, "lint", "--repo", str(fork.path))
    assert linted.returncode == 0, linted.stdout + linted.stderr
