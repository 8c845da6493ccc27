"""Answers a cache repository gave about objects that cannot change (a commit's tree entries, a
`.gitmodules` blob's sections, an ancestry yes, the counts of base...commit in a commit graph) are
recorded in its git dir for the next run: a warm check asks git only what may have changed. A damaged
or tampered record is a miss (the same report, and the file rewritten); a user's clone gets none."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from forkctl.git.facts import FILE
from tests import budget
from tests.chain import use_private_cache
from tests.gitrepos import git
from tests.gitshim import Trace2
from tests.test_pins_once import ROOT, real_shaped


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_private_cache(tmp_path, monkeypatch)


def check(tmp_path: Path, manifest: Path, *extra: str) -> tuple[str, int]:
    """(the JSON report, git processes started) of one check-pins in a process of its own."""
    trace = Trace2(tmp_path, str(len(list(tmp_path.glob("trace2-*")))))
    env = {**os.environ, **trace.env, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "forkctl", "--manifest", str(manifest), "check-pins", "--json", *extra]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 1, done.stderr  # the Bridge pins plain upstream
    return done.stdout, len(trace.argvs())


@pytest.mark.budget(
    "check-pins on the real chain, warm cache: 0.24 s against 5.04 s for blobless clones, target a ratio of "
    "0.1 (bench/check_pins_real.py, 2026-11-30; README, CPU benchmarks)"
)
@pytest.mark.slow
def test_a_warm_check_reads_recorded_answers_and_a_damaged_record_is_a_miss(tmp_path: Path) -> None:
    chain, _ = real_shaped(tmp_path)
    cold, _ = check(tmp_path, chain.manifest)
    warm, processes = check(tmp_path, chain.manifest)
    assert warm == cold
    records = sorted((tmp_path / "cache").rglob(FILE))
    assert len(records) >= 3, records  # the two consumers' caches and the commit graphs
    # Before: 22 (every tree entry, .gitmodules section and history answer asked again).
    budget.at_most("git processes of a warm check-pins", processes, 11)
    for record in records:
        header, _, payload = record.read_bytes().partition(b"\n\n")
        facts = json.loads(payload)
        key = next(iter(facts))
        facts[key] = [["160000", "commit", "0" * 40, "x"]] if key.startswith("tree") else False
        record.write_bytes(header + b"\n\n" + json.dumps(facts).encode())  # tampered, under the old digest
    records[0].write_text("{not json")
    again, redone = check(tmp_path, chain.manifest)
    assert again == cold
    assert redone > processes  # asked git again
    # What the next run needs is rewritten sound (a record no later question reads stays a miss).
    assert check(tmp_path, chain.manifest) == (cold, processes)


def test_a_local_clone_is_read_and_never_given_a_record(tmp_path: Path) -> None:
    chain, _ = real_shaped(tmp_path)
    clone = tmp_path / "bridge-clone"
    git(tmp_path, "clone", "-q", "--bare", str(chain.bridge), str(clone))
    check(tmp_path, chain.manifest, "--consumer", str(clone))
    assert not list(clone.rglob(FILE))
    assert list((tmp_path / "cache").rglob(FILE))
