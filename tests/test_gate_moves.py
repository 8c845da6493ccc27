"""Moves consult the gate (issue 33, item 1): publish, bump-bridge --push/--open-pr and sync refuse a series
without GPU evidence (exit 1, nothing pushed, the gate's findings and the forkctl validate that records
it), unless --no-gate, which is written into what is published; describe states the gate's verdict.

Real chains (tests/chain.py: local bare remotes), real evidence files (tests/test_evidence.py's helpers,
the toolkit given a small GPU suite); `gh` is the recording fake the sync and open-pr tests use.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from forkctl import manifest
from forkctl.gpu import evidence
from forkctl.series import load_series
from tests.chain import Chain, make_chain
from tests.gitrepos import git
from tests.test_evidence import GPU_SUITE, make_run, write_files
from tests.test_open_pr import gh_calls, install_fake_gh

# The publish tests' own cache fixture (autouse, imported so it applies here) and their CLI runner.
from tests.test_publish import _cache, run  # noqa: F401
from tests.test_sync import FakeGh, bridge_upstream_pins

NOTE = "Published without GPU evidence (--no-gate)"


def gated_chain(tmp_path: Path, publish: str = "rebuild") -> Chain:
    """The chain, its toolkit given a GPU suite and `validation.require: [sm90]` (no evidence yet)."""
    chain = make_chain(tmp_path)
    write_files(chain.toolkit, GPU_SUITE)
    data = yaml.safe_load(chain.manifest.read_text())
    data["validation"] = {"require": ["sm90"]}
    data["fork"]["publish"] = publish
    chain.manifest.write_text(yaml.safe_dump(data, sort_keys=False))
    return chain


def record_evidence(chain: Chain) -> Path:
    """Passing sm90 evidence for the toolkit's current series, as validate --source records it."""
    loaded = manifest.load(chain.manifest)
    return evidence.record_run(loaded, load_series(loaded), make_run(loaded), evidence.evidence_dir(loaded))


def change_patch(chain: Chain) -> None:
    """Edit the first patch's message: a new series (and fork head) that no evidence names."""
    path = chain.patches[0]
    text = path.read_text()
    assert "feat(core): a returns 10" in text
    path.write_text(text.replace("feat(core): a returns 10", "feat(core): a returns ten", 1))


def messages(problems: list[dict]) -> str:
    return " ".join(f"{p['message']} {p.get('hint') or ''}" for p in problems)


def message_of(bare: Path, sha: str) -> str:
    return git(bare, "log", "-1", "--format=%B", sha)


# --- publish ------------------------------------------------------------------------------------------


def test_publish_of_a_changed_patch_is_refused_until_evidence_or_no_gate(tmp_path: Path) -> None:
    chain = gated_chain(tmp_path, publish="merge")
    record_evidence(chain)  # evidence for the series the fork branch holds
    change_patch(chain)
    before = chain.refs(chain.fork)

    code, refused = run(chain, "publish")
    assert code == 1, refused
    assert chain.refs(chain.fork) == before  # nothing pushed
    said = messages(refused["problems"])
    assert "changed since the evidence was recorded" in said  # the gate's own finding
    assert "forkctl validate --source" in said  # the command that records the evidence
    assert "--no-gate" in said
    assert refused["action"] == "gated" and refused["pushed"] is False
    assert refused["gate"]["ok"] is False and refused["gate"]["overridden"] is False

    code, dry = run(chain, "publish", "--dry-run")  # a dry run says the real run would be refused
    assert code == 1 and "would refuse" in messages(dry["problems"])

    code, done = run(chain, "publish", "--no-gate")
    assert code == 0, done
    merge = chain.refs(chain.fork)["refs/heads/farai/main"]
    assert done["action"] == "merge" and merge == done["tip"] != before["refs/heads/farai/main"]
    said = message_of(chain.fork, merge)
    assert NOTE in said and "changed since the evidence was recorded" in said
    assert done["gate"]["overridden"] is True and done["gate"]["note"][0].startswith(NOTE)

    # Published: a rerun without the option pushes nothing, so nothing is refused.
    code, again = run(chain, "publish")
    assert code == 0 and again["action"] == "already-published", again


def test_publish_past_a_passing_gate_needs_no_option_and_writes_no_note(tmp_path: Path) -> None:
    chain = gated_chain(tmp_path, publish="merge")
    change_patch(chain)
    record_evidence(chain)  # evidence for exactly the new series
    code, done = run(chain, "publish")
    assert code == 0, done
    merge = chain.refs(chain.fork)["refs/heads/farai/main"]
    assert done["action"] == "merge" and "Published without GPU evidence" not in message_of(chain.fork, merge)
    assert done["gate"]["ok"] is True


def test_a_rebuild_sync_branch_published_with_the_note_is_found_again_without_it(tmp_path: Path) -> None:
    chain = gated_chain(tmp_path)  # rebuild: the merge goes to a sync branch a person lands
    change_patch(chain)
    code, first = run(chain, "publish", "--no-gate")
    assert code == 0 and first["action"] == "sync", first
    record_evidence(chain)  # the evidence comes later: the merge without the note is another commit
    code, again = run(chain, "publish")
    assert code == 0 and again["action"] == "already-synced", again
    assert again["target_tip"] == first["target_tip"]


# --- bump-bridge --------------------------------------------------------------------------------------


def test_bump_push_without_evidence_is_refused_and_no_gate_is_written_into_the_commits(
    tmp_path: Path,
) -> None:
    chain = gated_chain(tmp_path)
    before = (chain.refs(chain.bridge), chain.refs(chain.nemo))

    code, refused = run(chain, "bump-bridge", "--through", "nemo-rl", "--push")
    assert code == 1, refused
    assert (chain.refs(chain.bridge), chain.refs(chain.nemo)) == before  # nothing pushed
    said = messages(refused["problems"])
    assert "no GPU evidence for series" in said and "forkctl validate --source" in said
    code, dry = run(chain, "bump-bridge", "--through", "nemo-rl", "--dry-run")
    assert code == 1 and "would refuse" in messages(dry["problems"])

    code, done = run(chain, "bump-bridge", "--through", "nemo-rl", "--push", "--no-gate")
    assert code == 0, done
    for bare, step in zip((chain.bridge, chain.nemo), done["steps"], strict=True):
        pushed = chain.refs(bare)[f"refs/heads/{step['branch']}"]
        said = message_of(bare, pushed)
        assert NOTE in said and "no GPU evidence for series" in said, said


def test_bump_push_past_a_passing_gate_needs_no_option(tmp_path: Path) -> None:
    chain = gated_chain(tmp_path)
    record_evidence(chain)
    code, done = run(chain, "bump-bridge", "--push")
    assert code == 0, done
    pushed = chain.refs(chain.bridge)[f"refs/heads/{done['steps'][0]['branch']}"]
    assert "Published without GPU evidence" not in message_of(chain.bridge, pushed)


def test_bump_open_pr_no_gate_says_so_in_the_pull_request_body(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chain = gated_chain(tmp_path)
    log = install_fake_gh(tmp_path, monkeypatch)
    code, refused = run(chain, "bump-bridge", "--open-pr")
    assert code == 1 and gh_calls(log) == [], refused  # refused before gh is asked anything
    code, done = run(chain, "bump-bridge", "--open-pr", "--no-gate")
    assert code == 0, done
    (created,) = [c for c in gh_calls(log) if c["argv"][:2] == ["pr", "create"]]
    assert NOTE in created["body"] and "no GPU evidence for series" in created["body"]


# --- sync ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_sync_without_evidence_for_the_ported_series_pushes_and_opens_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chain = gated_chain(tmp_path)
    gh = FakeGh(tmp_path, monkeypatch)
    bridge_upstream_pins(chain, chain.upstream_tip)
    record_evidence(chain)  # evidence for the series as it is: not for the series ported onto the target
    before = chain.refs(chain.fork)

    code, refused = run(chain, "sync")
    assert code == 1, refused
    assert chain.refs(chain.fork) == before and gh.calls() == []  # nothing pushed, nothing opened
    said = messages(refused["problems"])
    assert "the upstream base moved" in said and "forkctl validate --source" in said
    code, dry = run(chain, "sync", "--dry-run")
    assert code == 1 and "would refuse" in messages(dry["problems"])

    code, done = run(chain, "sync", "--no-gate")
    assert code == 0, done
    assert f"refs/heads/{done['sync_branch']}" in chain.refs(chain.fork)
    (pr,) = gh.items("pr")
    assert NOTE in pr["body"] and "the upstream base moved" in pr["body"]


# --- describe -----------------------------------------------------------------------------------------


def test_describe_states_the_gates_verdict(tmp_path: Path) -> None:
    chain = gated_chain(tmp_path)
    code, failing = run(chain, "describe")
    assert code == 0, failing
    assert failing["parts"]["gate"]["verdict"] == "fails"
    assert "**Gate verdict: fails**" in failing["body"] and "no GPU evidence for series" in failing["body"]
    record_evidence(chain)
    code, passing = run(chain, "describe")
    assert passing["parts"]["gate"]["verdict"] == "passes"
    assert "**Gate verdict: passes**" in passing["body"]


def test_a_pending_environment_is_accepted_by_name_on_a_move_and_said_in_what_it_publishes(
    tmp_path: Path,
) -> None:
    """sm90 recorded, sm90-ep2 required but pending: the move is refused as the default gate refuses it,
    and goes with --allow-pending sm90-ep2, the acceptance written into the bump commits."""
    chain = gated_chain(tmp_path)
    data = yaml.safe_load(chain.manifest.read_text())
    data["validation"] = {"require": ["sm90", "sm90-ep2"], "pending": {"sm90-ep2": "no two-GPU host lent"}}
    chain.manifest.write_text(yaml.safe_dump(data, sort_keys=False))
    record_evidence(chain)
    before = chain.refs(chain.bridge)

    code, refused = run(chain, "bump-bridge", "--push")
    assert code == 1, refused
    assert chain.refs(chain.bridge) == before
    assert "--allow-pending" in messages(refused["problems"])

    code, done = run(chain, "bump-bridge", "--push", "--allow-pending", "sm90-ep2")
    assert code == 0, done
    said = message_of(chain.bridge, chain.refs(chain.bridge)[f"refs/heads/{done['steps'][0]['branch']}"])
    assert "accepted as pending (--allow-pending)" in said and "sm90-ep2: no two-GPU host lent" in said, said
    assert NOTE not in said

    code, published = run(chain, "publish", "--allow-pending", "sm90-ep2")
    assert code == 0, published
