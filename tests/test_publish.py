"""forkctl publish on a real chain (tests/chain.py): the fork branch gets apply(series, base) as a fast-forward,
in merge mode as a merge commit onto the old tip, never forced; check-pins and bump-bridge accept that merge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from forkctl import manifest as manifest_mod
from forkctl.chain import publish as core
from forkctl.chain.forkhead import fork_context
from forkctl.cli import cli
from forkctl.errors import BadInput
from forkctl.git import GitRepo, Identity, remote
from forkctl.ops import replay
from forkctl.series import parse_patch
from tests.chain import Chain, make_chain, url
from tests.gitrepos import git

WHO = Identity("Someone Else", "else@example.com", "2026-05-01T00:00:00+00:00")


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)


def run(chain: Chain, *args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(cli, ["--manifest", str(chain.manifest), *args, "--json"])
    return result.exit_code, json.loads(result.stdout)


def set_fork(chain: Chain, base: str | None = None, **fork: str) -> None:
    """Edit the manifest: the base (as `forkctl port` leaves it) and fork.* keys."""
    data = yaml.safe_load(chain.manifest.read_text())
    if base is not None:
        data["upstream"]["base"] = base
    data["fork"].update(fork)
    chain.manifest.write_text(yaml.safe_dump(data, sort_keys=False))


def ported(chain: Chain, publish: str = "merge") -> str:
    """The series moved to upstream's tip (the fork branch still holds the old head); the new head R."""
    set_fork(chain, base=chain.upstream_tip, publish=publish)
    patches = [parse_patch(p) for p in chain.patches]
    return replay.build_series(GitRepo(chain.upstream), chain.upstream_tip, patches).head


def tip(chain: Chain, branch: str = "farai/main") -> str | None:
    return chain.refs(chain.fork).get(f"refs/heads/{branch}")


def commit(bare: Path, sha: str) -> tuple[str, list[str]]:
    tree, *parents = git(bare, "log", "-1", "--format=%T %P", sha).split()
    return tree, parents


def test_merge_mode_publishes_a_merge_of_the_new_head_onto_the_old_tip(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    head = ported(chain)
    assert tip(chain) == chain.head  # the old head, not an ancestor of the new one
    code, report = run(chain, "publish")
    assert code == 0, report["problems"]
    merge = tip(chain)
    tree, parents = commit(chain.fork, merge)  # type: ignore[arg-type]
    assert parents == [chain.head, head] and tree == commit(chain.fork, head)[0]
    assert report["mode"] == "merge" and report["action"] == "merge"
    assert (report["before"], report["tip"], report["head"]) == (chain.head, merge, head)
    message = git(chain.fork, "log", "-1", "--format=%B", merge)
    assert message.startswith(f"Publish apply(series, base) = {head[:12]} onto farai/main")
    assert chain.upstream_tip in message and "feat(core): a returns 10" in message
    # First-parent history is the branch's history: the merge, then the old tip.
    assert git(chain.fork, "rev-list", "--first-parent", "-2", merge).split() == [merge, chain.head]
    # Fixed identity and date: the same inputs make the same merge.
    assert (
        git(chain.fork, "log", "-1", "--format=%an <%ae> %cn", merge) == "forkctl <forkctl@localhost> forkctl"
    )

    code, again = run(chain, "publish")
    assert code == 0 and again["action"] == "already-published" and tip(chain) == merge
    assert "nothing to do" in again["summary"]


def test_dry_run_pushes_nothing(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    head = ported(chain)
    code, report = run(chain, "publish", "--dry-run")
    assert code == 0 and report["action"] == "merge" and report["pushed"] is False
    assert tip(chain) == chain.head and report["tip"] not in (None, chain.head, head)


def test_merge_mode_new_branch_and_up_to_date(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    head = ported(chain)
    # --repo: a local clone that has the base lends its objects (no fetch from upstream's URL).
    code, report = run(chain, "publish", "--branch", "farai/next", "--repo", str(chain.upstream))
    assert code == 0 and report["action"] == "create" and tip(chain, "farai/next") == head
    code, report = run(chain, "publish", "--branch", "farai/next")
    assert code == 0 and report["action"] == "up-to-date"


def test_rebuild_mode_refuses_a_non_fast_forward(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    ported(chain, publish="rebuild")
    code, report = run(chain, "publish")
    assert code == 1 and tip(chain) == chain.head
    said = " ".join(p["message"] + " " + p.get("hint", "") for p in report["problems"])
    assert "not a fast-forward" in said and "publish: merge" in said and "force-push" in said


def test_rebuild_mode_fast_forwards_and_pushes_to_another_url(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    head = ported(chain, publish="rebuild")
    git(chain.fork, "update-ref", "refs/heads/farai/main", chain.upstream_tip)  # an ancestor of the new head
    code, report = run(chain, "publish")
    assert code == 0 and report["action"] == "fast-forward" and tip(chain) == head
    other = tmp_path / "other.git"
    git(tmp_path, "init", "-q", "--bare", str(other))
    code, report = run(chain, "publish", "--to", url(other))
    assert code == 0 and report["action"] == "create"
    assert git(other, "rev-parse", "refs/heads/farai/main") == head


def test_remote_moving_between_read_and_push_is_refused(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    ported(chain)
    manifest = manifest_mod.load(chain.manifest)
    fork = fork_context(manifest, None, lambda _: None)
    plan = core.plan_publish(manifest, fork, "farai/main", manifest.fork.url, lambda _: None)
    assert plan.action == "merge"
    # Someone lands a commit on farai/main from a clone of their own before the push.
    other = tmp_path / "someone"
    git(tmp_path, "clone", "-q", "--branch", "farai/main", url(chain.fork), str(other))
    (other / "theirs.txt").write_text("theirs\n")
    git(other, "add", "theirs.txt")
    git(other, "-c", "user.name=S", "-c", "user.email=s@x", "commit", "-q", "-m", "theirs")
    git(other, "push", "-q", "origin", "HEAD:farai/main")
    moved = tip(chain)
    with pytest.raises(BadInput, match="moved"):
        core.push_plan(plan, fork.store)
    assert tip(chain) == moved


def test_compare_and_swap_refuses_a_rewound_or_deleted_branch(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    store = GitRepo(chain.fork)
    tree = commit(chain.fork, chain.head)[0]
    child = store.commit_tree(tree, [chain.head], "child\n", WHO)
    # Rewound behind the expected tip: a plain push would fast-forward it; the swap must not.
    git(chain.fork, "update-ref", "refs/heads/farai/main", chain.base)
    with pytest.raises(BadInput, match="moved"):
        remote.push_fast_forward(store, url(chain.fork), child, "farai/main", chain.head)
    assert tip(chain) == chain.base
    git(chain.fork, "update-ref", "-d", "refs/heads/farai/main")
    with pytest.raises(BadInput, match="moved"):
        remote.push_fast_forward(store, url(chain.fork), child, "farai/main", chain.head)
    assert tip(chain) is None
    # A new commit that does not descend from the expected tip is never sent.
    git(chain.fork, "update-ref", "refs/heads/farai/main", chain.head)
    with pytest.raises(BadInput, match="fast-forward"):
        remote.push_fast_forward(store, url(chain.fork), chain.base, "farai/main", chain.head)
    remote.push_fast_forward(store, url(chain.fork), child, "farai/main", chain.head)
    assert tip(chain) == child


def test_publish_mode_is_checked_with_its_line(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    set_fork(chain, publish="sideways")
    code, report = run(chain, "publish", "--dry-run")
    assert code == 2
    said = report["problems"][0]["message"]
    assert "publish" in said and "manifest.yaml:" in said
