"""Reproducible bumps (issue 22): a bump commit is a pure function of its inputs (parent, gitlink,
`.gitmodules` change, an identity and date taken from them), so a rerun on any machine or cache makes
the same commit and finds the branch it pushed before "already there".

Real repositories (tests/chain.py), the real CLI in process, a private cache per test.
"""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from forkctl.cli import cli
from tests.chain import BRIDGE_GITLINK, forkctl_json, make_chain, use_private_cache
from tests.gitrepos import git


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_private_cache(tmp_path, monkeypatch)


run = forkctl_json


def _date(repo: Path, sha: str) -> datetime:
    return datetime.fromisoformat(git(repo, "show", "-s", "--format=%cI", sha))


@pytest.mark.slow
def test_a_rerun_from_a_fresh_cache_makes_the_same_commits_and_its_push_is_already_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chain = make_chain(tmp_path)
    code, first = run(chain, "bump-bridge", "--no-gate", "--through", "nemo-rl", "--push")
    assert code == 0, first["problems"]
    pushed = chain.refs(chain.bridge), chain.refs(chain.nemo)
    time.sleep(1.1)  # a clock-dated commit would differ now
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "another-machine" / "cache"))
    monkeypatch.setenv("GIT_COMMITTER_NAME", "Someone Else")  # the hermetic runner must not take it
    code, again = run(chain, "bump-bridge", "--no-gate", "--through", "nemo-rl", "--push")
    assert code == 0, again
    assert [s["commit"] for s in again["steps"]] == [s["commit"] for s in first["steps"]]
    assert [s["push"] for s in again["steps"]] == ["already there", "already there"]
    assert [s["push"] for s in first["steps"]] == ["pushed", "pushed"]
    assert (chain.refs(chain.bridge), chain.refs(chain.nemo)) == pushed
    # The rule: author = committer = forkctl's bump identity, dated the later of the parent's and the
    # new pin's committer dates.
    bridge = first["steps"][0]
    expected = max(_date(chain.bridge, bridge["parent"]), _date(chain.fork, chain.head))
    assert _date(chain.bridge, bridge["commit"]) == expected
    who = git(chain.bridge, "show", "-s", "--format=%an <%ae>|%cn <%ce>|%aI", bridge["commit"])
    author, committer, author_date = who.split("|")
    assert author == committer and "forkctl" in author
    assert datetime.fromisoformat(author_date) == expected
    text = CliRunner().invoke(
        cli, ["--manifest", str(chain.manifest), "bump-bridge", "--no-gate", "--through", "nemo-rl", "--push"]
    )
    assert text.exit_code == 0, text.output
    assert "already there" in text.output


def test_bump_commit_is_the_same_for_the_same_inputs_in_two_caches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without pushing: two dry runs a second apart, in two caches, plan the identical commits."""
    chain = make_chain(tmp_path)
    code, first = run(chain, "bump-bridge", "--no-gate", "--through", "nemo-rl", "--dry-run")
    assert code == 0, first["problems"]
    time.sleep(1.1)
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "second-cache"))
    code, second = run(chain, "bump-bridge", "--no-gate", "--through", "nemo-rl", "--dry-run")
    assert code == 0, second["problems"]
    assert [s["commit"] for s in second["steps"]] == [s["commit"] for s in first["steps"]]
    assert first["steps"][0]["gitlink"] == BRIDGE_GITLINK
