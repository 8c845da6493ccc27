"""status --first-break does each piece of work once per commit, whatever the number of steps and patches.

Bisecting base..target for each conflicting patch asks, on each candidate commit, whether the series up
to that patch still ports. That answer is the series' merges on the candidate: the patch-ids of
base..candidate (evidence for a verdict, never the verdict) are not needed for it, and a candidate that
one patch's bisection already merged is not merged again for the next patch. Counted on a real run
through a `git` on PATH that records every process (tests/gitshim.py); nothing is timed. And the
patch-ids that name upstream commits are computed only for the commits touching the series' files.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests import budget
from tests.chain import url
from tests.gitrepos import git
from tests.gitshim import make_git_shim
from tests.seriesrepo import clone, make_series, run_json

LINES = [f"line {n}" for n in range(1, 21)]
FIRST_BREAK = (
    "`status --first-break` on real history (196 upstream commits, 2 conflicting patches): 1.22 s a patch "
    "against 3.55 s for `git bisect run`, --first-break adding 0.14 s a patch "
    "(bench/first_break_bench.py, 2026-12-02; bench/results-first-break-megatron.json)"
)


def edited(**changes: str) -> str:
    lines = list(LINES)
    for key, value in changes.items():
        lines[int(key[1:]) - 1] = value
    return "\n".join(lines) + "\n"


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))


def _merges(log: Path) -> list[str]:
    """Each recorded `git merge-tree` call's arguments (its stand-in for the head and the commit picked)."""
    calls = [line.split("\x1f") for line in log.read_text().splitlines()] if log.exists() else []
    return ["\x1f".join(words[words.index("merge-tree") :]) for words in calls if "merge-tree" in words]


@pytest.mark.budget(FIRST_BREAK)
def test_first_break_merges_each_patch_once_per_commit_and_computes_no_more_patch_ids(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup = make_series(
        tmp_path,
        changes=[
            ("feat: line 10", {"megatron/core/long.py": edited(l10="TEN")}),
            ("feat: other", {"megatron/core/other.py": "X = 5\n"}),
            ("feat: line 3", {"megatron/core/long.py": edited(l10="TEN", l3="THREE")}),
        ],
        extra_upstream_files={"megatron/core/long.py": edited(), "megatron/core/other.py": "X = 1\n"},
    )
    upstream = setup.upstream
    culprits = {}
    for number in range(24):
        if number == 6:
            culprits[1] = upstream.commit("upstream: rewrite other.py", {"megatron/core/other.py": "X = 9\n"})
        elif number == 17:
            # Line 3 of long.py, as upstream has it by then (patch 1's line 10 is the fork's only).
            culprits[2] = upstream.commit("upstream: line 3", {"megatron/core/long.py": edited(l3="3")})
        else:
            upstream.commit(f"upstream: unrelated {number}", {f"megatron/core/u{number}.py": "U = 1\n"})
    target = upstream.head()
    fork = clone(upstream, tmp_path / "fork.git", bare=True)
    code, data = run_json(setup, "apply", "--base", setup.base, "--repo", str(fork.path))
    assert code == 0, data

    shim = make_git_shim(tmp_path)
    monkeypatch.setenv("PATH", shim.env()["PATH"])
    code, plain = run_json(setup, "status", "--onto", target, "--repo", str(fork.path))
    assert code == 1 and [p["result"] for p in plain["patches"]] == ["applies", "conflicts", "conflicts"]
    patch_ids_without = shim.calls().count("patch-id")
    shim.reset()
    code, data = run_json(setup, "status", "--onto", target, "--repo", str(fork.path), "--first-break")
    assert code == 1, data
    found = {i: p["first_break"] for i, p in enumerate(data["patches"]) if "first_break" in p}
    assert {i: f["commit"] for i, f in found.items()} == culprits
    assert all(f["commits_tested"] > 1 for f in found.values()), found
    tested = max(f["commits_tested"] for f in found.values())
    budget.at_most("commits one bisection of 24 tests", tested, 6, found)

    merges = _merges(shim.log)
    repeated = {m for m in merges if merges.count(m) > 1}
    budget.none_of(f"merges repeated (of {len(merges)})", {m.replace("\x1f", " ") for m in repeated})
    # The patch-ids of base..target are asked once, for the verdicts' evidence, as without --first-break.
    patch_ids = shim.calls().count("patch-id")
    budget.at_most("`git patch-id` runs with --first-break", patch_ids, patch_ids_without)
    assert patch_ids == patch_ids_without
    walks = [c for c in shim.calls() if re.fullmatch("log|rev-list", c)]
    budget.at_most("`git log` / `rev-list` runs of --first-break", len(walks), 12, shim.calls())


def test_status_onto_diffs_only_the_upstream_commits_that_touch_the_series(tmp_path: Path) -> None:
    """In a partial clone whose server is gone (as the real snapshots lack their 4 MiB+ blobs), an
    upstream commit that touches none of the series' files is never diffed: its blobs are not needed
    for a patch-id that cannot match, so `status --onto` gives its verdicts instead of failing."""
    setup = make_series(
        tmp_path,
        changes=[("feat: other", {"megatron/core/other.py": "X = 5\n"})],
        extra_upstream_files={"megatron/core/other.py": "X = 1\n"},
    )
    upstream = setup.upstream
    upstream.commit("upstream: an asset", {"docs/asset.txt": "".join(f"row {n}\n" for n in range(4000))})
    culprit = upstream.commit("upstream: rewrite other.py", {"megatron/core/other.py": "X = 9\n"})
    target = upstream.commit("upstream: unrelated", {"megatron/core/u.py": "U = 1\n"})
    upstream.git("config", "uploadpack.allowFilter", "true")
    fork = tmp_path / "partial.git"
    git(tmp_path, "clone", "-q", "--bare", "--filter=blob:limit=4k", url(upstream.path), str(fork))
    code, data = run_json(setup, "apply", "--base", setup.base, "--repo", str(fork))
    assert code == 0, data
    git(fork, "config", "remote.origin.url", str(tmp_path / "gone.git"))  # the server is gone
    asset = git(fork, "rev-parse", f"{culprit}~1:docs/asset.txt")
    missing = git(fork, "rev-list", "--objects", "--missing=print", target).split()
    assert f"?{asset}" in missing  # the asset's blob is not in the clone

    code, data = run_json(setup, "status", "--onto", target, "--repo", str(fork), "--first-break")
    assert code == 1, data
    assert [p["result"] for p in data["patches"]] == ["conflicts"]
    assert data["patches"][0]["first_break"]["commit"] == culprit
