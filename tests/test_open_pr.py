"""forkctl describe (the pull-request body) and bump-bridge --open-pr (gh opens or updates the PRs).

`gh` is an external CLI: the tests put a fake one on PATH that logs its argv and the body file it was
handed and answers like gh. git, the chain and forkctl are real (tests/chain.py, local bare remotes).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from forkctl.cli import cli
from forkctl.series import parse_patch
from tests.chain import Chain, make_chain, url
from tests.test_evidence import gpu_toolkit, record


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)


def path_without_gh(tmp_path: Path) -> str:
    """A PATH with git and nothing named gh."""
    bin_dir = tmp_path / "bin-git-only"
    bin_dir.mkdir(exist_ok=True)
    git = shutil.which("git")
    assert git is not None
    if not (bin_dir / "git").exists():
        (bin_dir / "git").symlink_to(git)
    return str(bin_dir)


def install_fake_gh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin-gh"
    bin_dir.mkdir()
    script = bin_dir / "gh"
    from tests.test_sync import FAKE_GH  # the one stand-in for gh: pull requests, issues, who gh acts as

    script.write_text(FAKE_GH.format(python=sys.executable))
    script.chmod(0o755)
    log = tmp_path / "gh.log"
    monkeypatch.setenv("FAKE_GH_LOG", str(log))
    monkeypatch.setenv("FAKE_GH_STATE", str(tmp_path / "gh-state.json"))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{path_without_gh(tmp_path)}")
    return log


def gh_calls(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def flag(argv: list[str], name: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg.startswith(name + "="):
            return arg.partition("=")[2]
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
    return None


def invoke(manifest: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--manifest", str(manifest), *args])
    return result.exit_code, result.stdout


def invoke_json(manifest: Path, *args: str) -> tuple[int, dict]:
    code, out = invoke(manifest, *args, "--json")
    return code, json.loads(out)


# --- describe ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_describe_prints_series_provenance_mermaid_and_the_gate(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    code, body = invoke(chain.manifest, "describe", "--through", "nemo-rl")
    assert code == 0, body
    patches = [parse_patch(p) for p in chain.patches]
    assert chain.head in body and chain.base in body
    assert "upstream: second" in body  # the base's subject, read from the commit
    assert "| # | file | subject | provenance |" in body
    for patch in patches:
        assert patch.path.name in body and patch.subject in body
        assert patch.provenance and patch.provenance[-1] in body
    assert "```mermaid" in body and "graph LR" in body and "nemo-rl" in body
    assert "## GPU evidence" in body
    assert "## What the gate still needs" in body
    # The Bridge pins the plain base: there is no previous fork head to range-diff against.
    assert "range-diff" in body and "no previous fork head" in body
    code, payload = invoke_json(chain.manifest, "describe")
    assert code == 0, payload
    assert payload["body"].startswith("## ")
    assert payload["parts"]["fork_head"] == chain.head
    assert [row["provenance"] for row in payload["parts"]["series"]] == [p.provenance[-1] for p in patches]
    assert "```mermaid" in payload["parts"]["mermaid"]


def test_describe_range_diffs_against_the_previously_pinned_fork_head(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    old_head = chain.am_branch("old-series", chain.base, chain.patches[:2])
    chain.pin_bridge(old_head)
    code, payload = invoke_json(chain.manifest, "describe")
    assert code == 0, payload
    parts = payload["parts"]
    assert parts["previous_fork_head"] == old_head
    assert parts["range_diff"] and "feat(core): a returns 10" in parts["range_diff"]
    assert "```\n" in payload["body"] and old_head[:12] in payload["body"]


def test_describe_states_the_base_the_chain_wants(tmp_path: Path) -> None:
    """The Bridge already builds on upstream commits the manifest base lacks: the body says the chain
    wants that commit, and the port that moves the fork there; on the plain base it wants the base."""
    chain = make_chain(tmp_path)
    code, payload = invoke_json(chain.manifest, "describe")
    assert code == 0, payload
    assert payload["parts"]["wanted_base"] == chain.base
    # Why it is wanted is forkctl's sentence around data: in code, as all data in a body.
    assert f"**The base the chain wants:** `{chain.base}`, `the manifest base" in payload["body"]
    chain.pin_bridge(chain.upstream_tip, url(chain.fork))
    code, payload = invoke_json(chain.manifest, "describe")
    assert code == 0, payload
    parts, body = payload["parts"], payload["body"]
    assert parts["wanted_base"] == chain.upstream_tip
    assert (
        f"**The base the chain wants:** `{chain.upstream_tip}`, ``megatron-bridge already builds on it"
        in body
    )
    assert f"`forkctl port --onto {chain.upstream_tip}`" in body and "2 upstream commits" in body


def test_describe_works_offline_from_the_manifest_and_says_what_is_missing(tmp_path: Path) -> None:
    toolkit = gpu_toolkit(tmp_path)
    record(toolkit)
    data = toolkit.manifest_data()
    nowhere = (tmp_path / "nowhere").as_uri()
    data["upstream"]["url"] = f"{nowhere}/upstream.git"
    data["fork"]["url"] = f"{nowhere}/fork.git"
    data["consumers"][0]["url"] = f"{nowhere}/bridge.git"
    data["dropped"] = [
        {"subject": "fix: absorbed upstream", "reason": "patch-id", "base": toolkit.base, "file": "x.patch"}
    ]
    toolkit.manifest.write_text(yaml.safe_dump(data, sort_keys=False))
    code, body = invoke(toolkit.manifest, "describe")
    assert code == 0, body
    for patch in toolkit.patch_files:
        assert patch.name in body
    assert "fix: absorbed upstream" in body
    assert "not available" in body  # the fork head and the chain could not be reached, and it says so
    assert "```mermaid" in body
    assert "| `sm90` |" in body and "NVIDIA H200" in body  # the evidence's environment, in code
    code, payload = invoke_json(toolkit.manifest, "describe")
    assert code == 0 and payload["parts"]["fork_head"] is None
    assert payload["parts"]["missing"]


def test_describe_refuses_an_unknown_through(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    code, payload = invoke_json(chain.manifest, "describe", "--through", "nope")
    assert code == 2 and "--through" in payload["error"]


# --- bump-bridge --open-pr ------------------------------------------------------------------------------


def _bump(chain: Chain) -> tuple[int, dict]:
    return invoke_json(
        chain.manifest, "bump-bridge", "--no-gate", "--through", "nemo-rl", "--push", "--open-pr"
    )


@pytest.mark.slow
def test_open_pr_creates_then_updates_the_pull_requests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chain = make_chain(tmp_path)
    log = install_fake_gh(tmp_path, monkeypatch)
    code, report = _bump(chain)
    assert code == 0, report
    branch = f"forkctl/bump-{chain.head[:12]}"
    creates = [c for c in gh_calls(log) if c["argv"][:2] == ["pr", "create"]]
    assert [
        (flag(c["argv"], "--repo"), flag(c["argv"], "--base"), flag(c["argv"], "--head")) for c in creates
    ] == [
        ("AlignmentResearch/megatron-bridge-contrib", "farai/main", branch),
        ("AlignmentResearch/nemo-rl", "farai/main", branch),
    ]
    bridge_body = creates[0]["body"]
    assert (
        chain.head in bridge_body
        and "```mermaid" in bridge_body
        and "feat(core): a returns 10" in bridge_body
    )
    assert "3rdparty/Megatron-LM" in bridge_body
    assert [s["pull_request"]["action"] for s in report["steps"]] == ["created", "created"]
    assert report["steps"][0]["pull_request"]["url"].endswith("/pull/1")
    # The branches were pushed before gh was asked.
    assert chain.refs(chain.bridge)[f"refs/heads/{branch}"] == report["steps"][0]["commit"]

    log.unlink()
    code, again = _bump(chain)
    assert code == 0, again
    calls = gh_calls(log)
    assert not [c for c in calls if c["argv"][:2] == ["pr", "create"]]
    edits = [c for c in calls if c["argv"][:2] == ["pr", "edit"]]
    assert [c["argv"][2] for c in edits] == ["1", "2"]
    assert flag(edits[0]["argv"], "--repo") == "AlignmentResearch/megatron-bridge-contrib"
    assert chain.head in edits[0]["body"]
    assert [s["pull_request"]["action"] for s in again["steps"]] == ["updated", "updated"]


def test_open_pr_without_gh_prints_the_body_and_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chain = make_chain(tmp_path)
    monkeypatch.setenv("PATH", path_without_gh(tmp_path))
    code, out = invoke(chain.manifest, "bump-bridge", "--no-gate", "--open-pr")
    # No pull request was opened: a CI step must not read that as done (exit 1), and the way to open
    # it by hand is on screen.
    assert code == 1, out
    branch = f"forkctl/bump-{chain.head[:12]}"
    assert "error: gh is not on PATH: no pull request was opened" in out
    assert (
        f"gh pr create --repo=AlignmentResearch/megatron-bridge-contrib --base=farai/main --head={branch}"
        in out
    )
    assert "```mermaid" in out and chain.head in out  # the body itself
    # --open-pr implies --push: the branch is on the remote, ready for the pull request.
    assert f"refs/heads/{branch}" in chain.refs(chain.bridge)
    body_file = next(line for line in out.splitlines() if "--body-file=" in line).split("--body-file=")[1]
    assert chain.head in Path(body_file.strip().strip("'")).read_text()


def test_open_pr_reports_a_gh_failure_with_the_retry_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chain = make_chain(tmp_path)
    install_fake_gh(tmp_path, monkeypatch)
    monkeypatch.setenv("FAKE_GH_FAIL", "1")
    code, report = invoke_json(chain.manifest, "bump-bridge", "--no-gate", "--open-pr")
    assert code == 1, report
    (problem,) = [p for p in report["problems"] if p["level"] == "error"]
    assert "Resource not accessible" in problem["message"]
    assert "gh pr " in problem["hint"]
    assert [s["pull_request"]["action"] for s in report["steps"]] == ["failed"]
    # In text, the body is printed too: with the retry command, the way to open it by hand.
    code, out = invoke(chain.manifest, "bump-bridge", "--no-gate", "--open-pr")
    assert code == 1, out
    assert "--- pull request body for megatron-bridge ---" in out
    assert "```mermaid" in out and chain.head in out
    assert "gh pr list --repo=AlignmentResearch/megatron-bridge-contrib" in out


def test_open_pr_and_dry_run_contradict(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    code, payload = invoke_json(chain.manifest, "bump-bridge", "--no-gate", "--open-pr", "--dry-run")
    assert code == 2 and "--open-pr" in payload["error"]
