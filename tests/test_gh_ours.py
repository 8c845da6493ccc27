"""Our pull requests and issues are ours (issue 37, item 2): `sync` and `bump-bridge --open-pr` adopt
a pull request only when its head repository (owner and name) is the one forkctl pushed to AND the
identity gh acts as opened it, and the dashboard only when it carries the marker AND we opened it. A
stranger's look-alike (same branch name from another fork, our branch but someone else's pull request,
a copied marker) is reported as a warning and never edited or closed. Through the CLI, with the recording
stand-in for gh of tests/test_sync.py (it answers `gh api user` with $FAKE_GH_LOGIN)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from forkctl.cli import cli
from tests.chain import make_chain
from tests.test_sync import HELPER_HELLO, FakeGh, bridge_upstream_pins, sync, upstream_commit

FORK = "AlignmentResearch/Megatron-LM"
STRANGER_BODY = "please merge my thing"


def warnings(report: dict) -> list[str]:
    return [p["message"] for p in report["problems"] if p["level"] == "warning"]


@pytest.mark.parametrize(
    "head_repo, author",
    [("mallory/Megatron-LM", "mallory"), (FORK, "mallory"), ("mallory/Megatron-LM", "forkctl-bot")],
)
def test_sync_never_adopts_a_strangers_pull_request_on_its_branch_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, head_repo: str, author: str
) -> None:
    chain = make_chain(tmp_path)
    gh = FakeGh(tmp_path, monkeypatch)
    bridge_upstream_pins(chain, chain.upstream_tip)
    code, plan = sync(chain, "--dry-run")
    assert code == 0, plan
    branch = plan["sync_branch"]
    theirs = gh.add(
        "pr",
        repo=FORK,
        head=branch,
        base="farai/main",
        body=STRANGER_BODY,
        author=author,
        head_repo=head_repo,
    )
    code, done = sync(chain)
    assert code == 0, done
    prs = gh.items("pr")
    stranger = next(p for p in prs if p["number"] == theirs["number"])
    assert stranger["body"] == STRANGER_BODY and stranger["open"]  # never edited, never closed
    (ours,) = [p for p in prs if p["number"] != theirs["number"]]
    assert (ours["author"], ours["head"], ours["repo"]) == ("forkctl-bot", branch, FORK)
    assert done["pull_request"]["action"] == "created" and done["pull_request"]["number"] == ours["number"]
    assert any(f"#{theirs['number']} by {author}" in w and "not ours" in w for w in warnings(done))
    assert not [
        c for c in gh.calls() if c["argv"][1] in ("edit", "close") and c["argv"][2] == str(theirs["number"])
    ]


def test_sync_closes_only_its_own_superseded_pull_requests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chain = make_chain(tmp_path)
    gh = FakeGh(tmp_path, monkeypatch)
    bridge_upstream_pins(chain, chain.upstream_tip)
    theirs = gh.add(
        "pr",
        repo=FORK,
        head="sync/upstream-2020-01-01-000000000000",
        base="farai/main",
        body=STRANGER_BODY,
        author="mallory",
        head_repo="mallory/Megatron-LM",
    )
    code, done = sync(chain)
    assert code == 0, done
    assert done["pull_request"]["closed_superseded"] == []
    assert next(p for p in gh.items("pr") if p["number"] == theirs["number"])["open"]


def test_the_dashboard_is_the_issue_we_opened_not_a_copy_of_its_marker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chain = make_chain(tmp_path)
    gh = FakeGh(tmp_path, monkeypatch)
    upstream_commit(chain, "refactor: helper shouts (#42)", {"megatron/core/a.py": HELPER_HELLO})
    target = upstream_commit(chain, "upstream: unrelated 2", {"megatron/core/sub/f.py": "F = 1\n"})
    bridge_upstream_pins(chain, target)
    marker = f"<!-- forkctl-sync-dashboard {FORK} farai/main -->"
    theirs = gh.add(
        "issue",
        repo=FORK,
        title="forkctl sync dashboard",
        body=f"{marker}\nI am the dashboard now",
        author="mallory",
    )
    code, done = sync(chain)
    assert code == 1, done  # the conflict
    issues = gh.items("issue")
    assert next(i for i in issues if i["number"] == theirs["number"])["body"].endswith(
        "I am the dashboard now"
    )
    (ours,) = [i for i in issues if i["number"] != theirs["number"]]
    assert ours["author"] == "forkctl-bot" and ours["body"].startswith(marker)
    assert done["dashboard"]["action"] == "created" and done["dashboard"]["number"] == ours["number"]
    assert any(f"#{theirs['number']} by mallory" in w for w in warnings(done))
    # The next run finds ours again (and leaves theirs alone again).
    code, again = sync(chain)
    assert again["dashboard"]["number"] == ours["number"] and again["dashboard"]["action"] == "unchanged"


def test_bump_open_pr_never_adopts_a_strangers_pull_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chain = make_chain(tmp_path)
    gh = FakeGh(tmp_path, monkeypatch)
    branch = f"forkctl/bump-{chain.head[:12]}"
    bridge = "AlignmentResearch/megatron-bridge-contrib"
    theirs = gh.add(
        "pr",
        repo=bridge,
        head=branch,
        base="farai/main",
        body=STRANGER_BODY,
        author="mallory",
        head_repo="mallory/megatron-bridge-contrib",
    )
    result = CliRunner().invoke(
        cli, ["--manifest", str(chain.manifest), "bump-bridge", "--no-gate", "--open-pr", "--json"]
    )
    assert result.exit_code == 0, result.stdout
    report = json.loads(result.stdout)
    prs = gh.items("pr")
    assert next(p for p in prs if p["number"] == theirs["number"])["body"] == STRANGER_BODY
    (ours,) = [p for p in prs if p["number"] != theirs["number"]]
    assert ours["head_repo"] == bridge and ours["author"] == "forkctl-bot" and chain.head in ours["body"]
    assert [s["pull_request"]["action"] for s in report["steps"]] == ["created"]
    assert any(f"#{theirs['number']} by mallory" in w for w in warnings(report))
