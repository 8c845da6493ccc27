"""sync ports only onto what upstream's branches or tags hold (issue 37, item 7): a commit that only a
pull request's ref (refs/pull/*) or another non-branch ref reaches is never a target, whichever rule
picked it, and nothing is pushed or opened for it. Through the CLI, on local bare remotes and a
recording stand-in for gh (tests/test_sync.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chain import make_chain, url
from tests.gitrepos import Repo, git
from tests.test_sync import FakeGh, bridge_upstream_pins, sync


def pull_request_commit(chain, ref: str = "refs/pull/7/head") -> str:  # type: ignore[no-untyped-def]
    """A commit on top of upstream's tip pushed only to `ref` of upstream (as GitHub keeps a stranger's
    pull request there): no branch or tag holds it."""
    path = chain.tmp / "pr-work"
    git(chain.tmp, "clone", "-q", url(chain.upstream), str(path))
    work = Repo(path)
    sha = work.commit(
        "upstream PR: not merged", {"megatron/core/sub/pr.py": "PR = 1\n"}, date="2026-01-06T00:00:00+00:00"
    )
    work.git("push", "-q", "origin", f"HEAD:{ref}")
    return sha


@pytest.mark.parametrize("how", ["consumer-upstream", "given"])
def test_a_commit_only_a_pull_request_ref_holds_is_no_sync_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    chain = make_chain(tmp_path)
    gh = FakeGh(tmp_path, monkeypatch)
    unmerged = pull_request_commit(chain)
    before = chain.refs(chain.fork)
    if how == "consumer-upstream":
        bridge_upstream_pins(chain, unmerged)  # the consumer's upstream pins a pull request's commit
        code, out = sync(chain)
    else:
        code, out = sync(chain, "--onto", unmerged)
    assert code == 1, out
    assert out["relation"] == "unlisted", out
    message = out["problems"][0]["message"]
    assert unmerged[:12] in message and "no branch or tag" in message
    assert chain.refs(chain.fork) == before and gh.calls() == []  # nothing pushed, nothing opened


def test_a_commit_a_tag_holds_is_a_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    chain = make_chain(tmp_path)
    FakeGh(tmp_path, monkeypatch)
    tagged = pull_request_commit(chain, "refs/tags/v9.9")
    code, out = sync(chain, "--onto", tagged, "--dry-run")
    assert code == 0, out
    assert (out["target"], out["relation"]) == (tagged, "ahead")
