"""forkctl publish is forward-only and publishes only what is committed (issue 32, item 3).

A toolkit whose manifest is still on the old base must not publish over a fork branch already on a
newer upstream base: the merge it would push has the old head's tree, so it reverts every upstream
commit between the two bases. And a toolkit that is a git checkout publishes only the manifest and
patch files its HEAD holds. Real repositories built in tmp dirs (tests/chain.py).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from forkctl.cli import cli
from tests.chain import Chain, make_chain, use_private_cache
from tests.gitrepos import Repo, git, init_repo
from tests.test_publish import fork_base_record, on_tip, ported, set_fork, tip


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_private_cache(tmp_path, monkeypatch)


def run(chain: Chain, *args: str) -> tuple[int, dict]:
    # --no-gate: these tests hold the forward rule; tests/test_gate_moves.py holds the gate.
    result = CliRunner().invoke(
        cli, ["--manifest", str(chain.manifest), "publish", "--no-gate", *args, "--json"]
    )
    return result.exit_code, json.loads(result.stdout)


def beside_the_gate(report: dict) -> list[dict]:
    """The report's problems but the warning of the --no-gate these tests pass (the chain has no evidence)."""
    return [p for p in report["problems"] if not p["message"].startswith("publish --no-gate:")]


def run_text(chain: Chain, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--manifest", str(chain.manifest), "publish", "--no-gate", *args])
    return result.exit_code, result.output


def newer_branch(chain: Chain, how: str) -> str:
    """The fork branch moved onto upstream's tip (2 commits past the manifest base) while the toolkit
    stays on the base: by forkctl's own publish of a port there, or by a hand-made sync merge of
    upstream whose `.fork-base.json` still names the old base (a record that must not be trusted)."""
    if how == "published":
        ported(chain)  # the manifest on upstream's tip, as `forkctl port --onto` leaves it
        code, report = run(chain)
        assert code == 0 and report["action"] == "merge", report["problems"]
        set_fork(chain, base=chain.base)  # the stale toolkit: its manifest is back on the old base
    else:
        set_fork(chain, publish="merge")
        on_tip(chain, "fork: record the base", {".fork-base.json": fork_base_record(chain.base)})
        work = chain.fork_work()
        work.git("fetch", "-q", "origin")
        work.git("checkout", "-q", "--detach", "origin/farai/main")
        work.git("fetch", "-q", str(chain.upstream), "main")
        work.git("merge", "-q", "--no-ff", "-m", "sync: merge upstream main", "FETCH_HEAD")
        work.git("push", "-q", "origin", "HEAD:refs/heads/farai/main")
    newer = tip(chain)
    assert (
        newer is not None and git(chain.fork, "merge-base", newer, chain.upstream_tip) == chain.upstream_tip
    )
    return newer


@pytest.mark.slow
@pytest.mark.parametrize("how", ["published", "synced-by-hand"])
@pytest.mark.parametrize("dry_run", [False, True])
def test_a_stale_toolkit_does_not_publish_over_a_branch_on_a_newer_base(
    tmp_path: Path, how: str, dry_run: bool
) -> None:
    chain = make_chain(tmp_path)
    newer_branch(chain, how)
    before = chain.refs(chain.fork)
    extra = ["--dry-run"] if dry_run else []
    code, report = run(chain, *extra)
    assert code == 1, report
    assert chain.refs(chain.fork) == before  # nothing pushed anywhere, no sync branch either
    assert report["action"] == "backwards" and report["pushed"] is False
    # The tip's base is computed from history (the tip's merge-base with upstream), not read from its
    # .fork-base.json, which in the hand-made sync still names the old base.
    assert report["tip_base"] == chain.upstream_tip and report["base"] == chain.base
    assert report["backwards"] == {
        "tip_base": chain.upstream_tip,
        "lacks": 2,
        "port": f"forkctl port --onto {chain.upstream_tip}",
    }
    problem = report["problems"][0]
    assert chain.upstream_tip[:12] in problem["message"] and "2 upstream commits" in problem["message"]
    assert f"forkctl port --onto {chain.upstream_tip}" in problem["hint"]
    assert "--allow-backwards" in problem["hint"]
    code, text = run_text(chain, *extra)
    assert code == 1 and f"forkctl port --onto {chain.upstream_tip}" in text
    assert chain.refs(chain.fork) == before


@pytest.mark.slow
def test_the_port_the_refusal_prints_moves_the_toolkit_forward(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    newer = newer_branch(chain, "published")
    assert run(chain)[0] == 1
    ported(chain)  # what `forkctl port --onto <tip base>` leaves: the manifest on that base
    code, report = run(chain)
    assert code == 0 and report["action"] == "already-published" and tip(chain) == newer
    assert report["backwards"] is None and report["tip_base"] in (None, chain.upstream_tip)


@pytest.mark.slow
def test_allow_backwards_publishes_the_older_base_and_says_so(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    newer = newer_branch(chain, "published")
    code, report = run(chain, "--allow-backwards")
    assert code == 0, report["problems"]
    assert report["action"] == "merge" and report["pushed"] is True
    merge = tip(chain)
    assert git(chain.fork, "log", "-1", "--format=%P", merge).split() == [newer, chain.head]  # type: ignore[arg-type]
    # Going back is said, not hidden: the finding is in the JSON and as a notice.
    assert report["backwards"]["tip_base"] == chain.upstream_tip
    assert [p["level"] for p in beside_the_gate(report)] == ["notice"]
    assert "--allow-backwards" in beside_the_gate(report)[0]["message"]


@pytest.mark.slow
def test_a_forward_publish_carries_no_finding(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    ported(chain)
    code, report = run(chain)
    assert code == 0 and report["action"] == "merge"
    assert report["backwards"] is None and beside_the_gate(report) == []


# --- only what is committed --------------------------------------------------------------------


def committed_toolkit(chain: Chain) -> Repo:
    """The chain's toolkit as a git checkout, everything committed."""
    toolkit = init_repo(chain.toolkit)
    toolkit.commit("toolkit", date="2026-03-02T00:00:00+00:00")
    return toolkit


@pytest.mark.slow
@pytest.mark.parametrize("dry_run", [False, True])
def test_uncommitted_manifest_and_patch_files_are_not_published(tmp_path: Path, dry_run: bool) -> None:
    chain = make_chain(tmp_path)
    toolkit = committed_toolkit(chain)
    ported(chain)  # the port's manifest edit, not committed
    toolkit.git("add", "manifest.yaml")  # staged is not committed either
    edited = chain.patches[2]
    edited.write_text(edited.read_text().replace("Why: patch 3.", "Why: patch 3, reworded."))
    before = chain.refs(chain.fork)
    extra = ["--dry-run"] if dry_run else []
    code, report = run(chain, *extra)
    assert code == 1, report
    assert chain.refs(chain.fork) == before
    assert report["action"] == "uncommitted" and report["pushed"] is False
    patch = str(edited.relative_to(chain.toolkit))
    assert report["uncommitted"] == sorted(["manifest.yaml", patch])
    problem = report["problems"][0]
    assert "manifest.yaml" in problem["message"] and patch in problem["message"]
    assert "commit" in problem["hint"]

    toolkit.commit("port", date="2026-03-03T00:00:00+00:00")
    code, report = run(chain, *extra)
    assert code == 0 and report["action"] == "merge" and report["uncommitted"] == []


@pytest.mark.slow
def test_an_untracked_or_ignored_patch_file_is_not_published(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    toolkit = committed_toolkit(chain)
    patch = chain.patches[3]
    toolkit.write({".gitignore": "*.patch\n"})
    toolkit.git("rm", "-q", "--cached", "--", str(patch.relative_to(chain.toolkit)))
    toolkit.commit("ignore the last patch", date="2026-03-03T00:00:00+00:00")
    ported(chain)
    toolkit.commit("port", date="2026-03-04T00:00:00+00:00")  # add -A leaves the ignored file out
    before = chain.refs(chain.fork)
    code, report = run(chain)
    assert code == 1 and chain.refs(chain.fork) == before
    assert report["uncommitted"] == [str(patch.relative_to(chain.toolkit))]
    # The fix works as printed: the commit it names makes the publish go.
    fix = report["problems"][0]["hint"].split("(", 1)[1].split(")", 1)[0]
    editor = {**os.environ, "GIT_EDITOR": "sed -i 1s/^/port/"}  # git commit's editor writes the message
    subprocess.run(fix, shell=True, check=True, capture_output=True, env=editor, timeout=60)
    code, report = run(chain)
    assert code == 0 and report["action"] == "merge", report["problems"]


@pytest.mark.slow
def test_sync_onto_an_older_commit_than_the_branch_base_pushes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # sync publishes through the same plan: its merge onto a branch already past the sync target would
    # revert upstream's commits between them just the same.
    from tests.test_sync import FakeGh, sync

    chain = make_chain(tmp_path)
    newer_branch(chain, "synced-by-hand")
    middle = git(chain.upstream, "rev-parse", f"{chain.upstream_tip}~1")
    gh = FakeGh(tmp_path, monkeypatch)
    before = chain.refs(chain.fork)
    code, report = sync(chain, "--no-gate", "--onto", middle)
    assert code == 1 and chain.refs(chain.fork) == before
    assert report["publish"]["action"] == "backwards" and gh.items("pr") == []
    assert chain.upstream_tip[:12] in report["problems"][0]["message"]
