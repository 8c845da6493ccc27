"""`status --onto --first-break` on a history with merges names a commit of base..target whose parent the
patch still ports on.

Upstream's `main2dev/*` branches are the shape: a dev line forked before the base (its first parents never
reach the base) takes main in with a merge. Walking base..target by first parent then crosses only dev's
own commits, none of them a descendant of the base; the bisection used to blame the first of them (a
commit that only added a CODEOWNERS file). The path bisected is the ancestry path from the base to the
target, by first parent where that stays on it: here it leaves dev at the merge and follows main, where a
side branch that breaks the patch came in with a merge.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import onpath
from tests.gitrepos import Repo
from tests.onpath import forkctl_env
from tests.seriesrepo import SeriesSetup, clone, make_series, run_json


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))


def _merge(repo: Repo, branch: str, message: str) -> str:
    repo.git("merge", "-q", "--no-ff", "-m", message, branch)
    return repo.head()


def _main2dev(upstream: Repo, initial: str) -> dict[str, str]:
    """main: base, m1, (side: s1 breaks b.py, s2) merged as M1, m3; dev forked at `initial` (before the
    base): d1 adds CODEOWNERS, d2; then main merged into dev, and one more dev commit: the target."""
    names = {"m1": upstream.commit("main: m1", {"megatron/core/m1.py": "M = 1\n"})}
    upstream.git("checkout", "-q", "-b", "side")
    names["s1"] = upstream.commit("side: b returns 222", {"megatron/core/b.py": "def b():\n    return 222\n"})
    names["s2"] = upstream.commit("side: s2", {"megatron/core/s2.py": "S = 2\n"})
    upstream.git("checkout", "-q", "main")
    names["m2"] = upstream.commit("main: m2", {"megatron/core/m2.py": "M = 2\n"})
    names["M1"] = _merge(upstream, "side", "Merge branch 'side' into main")
    names["m3"] = upstream.commit("main: m3", {"megatron/core/m3.py": "M = 3\n"})
    upstream.git("checkout", "-q", "-b", "dev", initial)
    names["d1"] = upstream.commit("Add CODEOWNERS", {"CODEOWNERS": "* @someone\n"})
    names["d2"] = upstream.commit("dev: d2", {"megatron/core/d2.py": "D = 2\n"})
    upstream.git("checkout", "-q", "-b", "main2dev/13_08_2026")
    names["T"] = _merge(upstream, "main", "Merge remote-tracking branch 'origin/main' into main2dev")
    names["post"] = upstream.commit("fix: post-CI corrections", {"megatron/core/post.py": "P = 1\n"})
    upstream.git("checkout", "-q", "main")
    return names


def test_first_break_on_a_merge_topology_names_a_descendant_of_the_base_whose_parent_still_ports(
    tmp_path: Path,
) -> None:
    setup = make_series(
        tmp_path, changes=[("feat: b returns 23", {"megatron/core/b.py": "def b():\n    return 23\n"})]
    )
    upstream = setup.upstream
    initial = upstream.git("rev-parse", f"{setup.base}^")
    names = _main2dev(upstream, initial)
    fork = clone(upstream, tmp_path / "fork.git", bare=True)
    code, data = run_json(setup, "apply", "--base", setup.base, "--repo", str(fork.path))
    assert code == 0, data

    code, data = run_json(setup, "status", "--onto", names["post"], "--repo", str(fork.path), "--first-break")
    assert code == 1, data
    (patch,) = data["patches"]
    assert patch["result"] == "conflicts", patch
    found = patch["first_break"]
    named = {sha: name for name, sha in names.items()}.get(found["commit"], found["commit"])
    # Not d1 (CODEOWNERS, no descendant of the base), not T (whose first parent d2 lacks the base too):
    # the merge that brought the breaking side branch into main, its main-side parent m2 still porting.
    assert named == "M1", found
    assert found["parent"] == names["m2"] and found["merged"] == [names["s2"]], found
    assert found["files"] == ["megatron/core/b.py", "megatron/core/s2.py"], found
    assert upstream.git("merge-base", "--is-ancestor", setup.base, found["commit"]) == ""
    code, on_parent = run_json(setup, "status", "--onto", found["parent"], "--repo", str(fork.path))
    assert code == 0 and on_parent["patches"][0]["result"] == "applies", on_parent

    # Onto main itself (first parents all the way): the same merge.
    code, data = run_json(setup, "status", "--onto", names["m3"], "--repo", str(fork.path), "--first-break")
    assert code == 1 and data["patches"][0]["first_break"]["commit"] == names["M1"], data


def test_first_break_of_a_backport_starts_at_the_merge_base_and_names_nothing_that_breaks_there(
    tmp_path: Path,
) -> None:
    """A target that does not descend from the base (a release branch forked before it): the line starts
    at their merge base, judged first. A patch that already conflicts there has no first break in the
    range (it used to be blamed on the release branch's first commit); one that ports there gets the
    release commit that breaks it."""
    helper = "def a():\n    return 1\n\n\ndef helper():\n    return '{}'\n"
    setup = make_series(
        tmp_path,
        changes=[
            ("feat: b returns 23", {"megatron/core/b.py": "def b():\n    return 23\n"}),
            ("feat: helper says hi", {"megatron/core/a.py": helper.format("hi")}),
        ],
    )
    upstream = setup.upstream
    fork_point = upstream.git("rev-parse", f"{setup.base}^")  # b.py says 2 there; the base made it 22
    upstream.git("checkout", "-q", "-b", "release", fork_point)
    upstream.commit("release: r1", {"megatron/core/r1.py": "R = 1\n"})
    breaking = upstream.commit("release: helper says hello", {"megatron/core/a.py": helper.format("hello")})
    release = upstream.commit("release: r3", {"megatron/core/r3.py": "R = 3\n"})
    upstream.git("checkout", "-q", "main")
    fork = clone(upstream, tmp_path / "fork.git", bare=True)
    code, data = run_json(setup, "apply", "--base", setup.base, "--repo", str(fork.path))
    assert code == 0, data

    code, data = run_json(setup, "status", "--onto", release, "--repo", str(fork.path), "--first-break")
    assert code == 1, data
    assert [p["result"] for p in data["patches"]] == ["conflicts", "conflicts"], data
    first, second = data["patches"]
    assert first["first_break"] is None and fork_point in first["first_break_note"], first
    assert second["first_break"]["commit"] == breaking, second
    assert second["first_break"]["parent"] == upstream.git("rev-parse", f"{breaking}^")


def test_first_break_tells_each_commit_it_judges_once_it_takes_longer_than_the_threshold(
    tmp_path: Path,
) -> None:
    """A bisection that runs past a second tells each commit it judges on stderr (FORKCTL_PROGRESS_AFTER:
    the seconds before it starts telling, 0 here so that a fast test sees it); one that ends sooner adds
    no line to the phases status prints anyway."""
    setup = make_series(
        tmp_path, changes=[("feat: b returns 23", {"megatron/core/b.py": "def b():\n    return 23\n"})]
    )
    upstream = setup.upstream
    names = _main2dev(upstream, upstream.git("rev-parse", f"{setup.base}^"))
    fork = clone(upstream, tmp_path / "fork.git", bare=True)
    assert run_json(setup, "apply", "--base", setup.base, "--repo", str(fork.path))[0] == 0
    args = ("status", "--onto", names["post"], "--first-break", "--repo", str(fork.path))
    env = forkctl_env(tmp_path / "bin")
    code, data, told = run_split(setup, env | {"FORKCTL_PROGRESS_AFTER": "0"}, *args)
    assert code == 1 and data["patches"][0]["first_break"]["commit"] == names["M1"], data
    judged = [line for line in told if "judged" in line]
    assert len(judged) == data["patches"][0]["first_break"]["commits_tested"], told
    assert any(names["M1"][:12] in line for line in judged), told
    code, data, told = run_split(setup, env | {"FORKCTL_PROGRESS_AFTER": "60"}, *args)
    assert code == 1 and not [line for line in told if "judged" in line], told


def run_split(setup: SeriesSetup, env: dict[str, str], *args: str) -> tuple[int, dict, list[str]]:
    """`forkctl --manifest M <args> --json` as its own process: (exit code, stdout's document, stderr's lines)."""
    return onpath.run_split(setup.manifest, env, *args)
