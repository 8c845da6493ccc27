"""forkctl publish on a real chain (tests/chain.py): the fork branch gets apply(series, base) as a fast-forward,
in merge mode as a merge commit onto the old tip, never forced; check-pins and bump-bridge accept that merge."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from forkctl import manifest as manifest_mod
from forkctl.chain import publish as core
from forkctl.chain.forkhead import fork_context
from forkctl.cli import cli
from forkctl.errors import BadInput
from forkctl.git import locations, remote
from forkctl.git.commits import Identity
from forkctl.git.repo import GitRepo
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


def set_fork(chain: Chain, base: str | None = None, **fork: object) -> None:
    """Edit the manifest: the base (as `forkctl port` leaves it) and fork.* keys."""
    data = yaml.safe_load(chain.manifest.read_text())
    if base is not None:
        data["upstream"]["base"] = base
    data["fork"].update(fork)
    chain.manifest.write_text(yaml.safe_dump(data, sort_keys=False))


def ported(chain: Chain, publish: str = "merge", base: str | None = None, **fork: object) -> str:
    """The series moved to `base` (default upstream's tip; the fork branch still holds the old head); the
    new head R."""
    base = base or chain.upstream_tip
    set_fork(chain, base=base, publish=publish, **fork)
    patches = [parse_patch(p) for p in chain.patches]
    return replay.build_series(GitRepo(chain.upstream), base, patches).head


def on_tip(chain: Chain, message: str, files: dict[str, str | None], branch: str = "farai/main") -> str:
    """A commit made by hand on the fork branch (from a clone of the fork), pushed; its SHA."""
    work = chain.fork_work()
    work.git("fetch", "-q", "origin")
    work.git("checkout", "-q", "--detach", f"origin/{branch}")
    sha = work.commit(message, files, date="2026-04-01T00:00:00+00:00")
    work.git("push", "-q", "origin", f"HEAD:refs/heads/{branch}")
    return sha


def fork_base_record(base: str) -> str:
    record = {
        "schema": 1,
        "fork_repo": "AlignmentResearch/Megatron-LM",
        "upstream_repo": "NVIDIA/Megatron-LM",
        "upstream_branch": "main",
        "upstream_base": base,
    }
    return json.dumps(record, indent=2) + "\n"


def changed(bare: Path, old: str, new: str) -> list[str]:
    return git(bare, "diff", "--name-only", old, new).split()


def show(bare: Path, rev: str, path: str) -> str:
    return git(bare, "show", f"{rev}:{path}")


def tip(chain: Chain, branch: str = "farai/main") -> str | None:
    return chain.refs(chain.fork).get(f"refs/heads/{branch}")


def commit(bare: Path, sha: str) -> tuple[str, list[str]]:
    tree, *parents = git(bare, "log", "-1", "--format=%T %P", sha).split()
    return tree, parents


def test_merge_mode_publishes_a_merge_of_the_new_head_onto_the_old_tip(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    head = ported(chain)
    assert tip(chain) == chain.head  # the old head, not an ancestor of the new one
    code, report = run(chain, "publish", "--no-gate")
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

    code, again = run(chain, "publish", "--no-gate")
    assert code == 0 and again["action"] == "already-published" and tip(chain) == merge
    assert "nothing to do" in again["summary"]


def test_dry_run_pushes_nothing(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    head = ported(chain)
    code, report = run(chain, "publish", "--no-gate", "--dry-run")
    assert code == 0 and report["action"] == "merge" and report["pushed"] is False
    assert tip(chain) == chain.head and report["tip"] not in (None, chain.head, head)


def test_merge_mode_new_branch_and_up_to_date(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    head = ported(chain)
    # --repo: a local clone that has the base lends its objects (no fetch from upstream's URL).
    code, report = run(chain, "publish", "--no-gate", "--branch", "farai/next", "--repo", str(chain.upstream))
    assert code == 0 and report["action"] == "create" and tip(chain, "farai/next") == head
    code, report = run(chain, "publish", "--no-gate", "--branch", "farai/next")
    assert code == 0 and report["action"] == "up-to-date"


def test_rebuild_mode_publishes_a_port_to_a_sync_branch_and_says_how_to_land_it(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    on_tip(chain, "fork: record the base", {".fork-base.json": fork_base_record(chain.base)})
    old_tip = tip(chain)
    head = ported(chain, publish="rebuild")
    code, report = run(chain, "publish", "--no-gate")
    assert code == 0, report["problems"]
    # The fork's convention: sync/upstream-<date>-<sha12>, the date the new base's committer date (UTC).
    when = git(chain.upstream, "log", "-1", "--format=%cI", chain.upstream_tip)
    day = datetime.fromisoformat(when).astimezone(UTC).strftime("%Y-%m-%d")
    sync = f"sync/upstream-{day}-{chain.upstream_tip[:12]}"
    assert report["action"] == "sync" and report["target"] == sync and report["pushed"] is True
    assert tip(chain) == old_tip and report["tip"] == old_tip  # the branch itself is never rewritten
    merge = tip(chain, sync)
    assert report["target_tip"] == merge and commit(chain.fork, merge)[1] == [old_tip, head]  # type: ignore[arg-type]
    assert changed(chain.fork, head, merge) == [".fork-base.json"]  # type: ignore[arg-type]
    assert json.loads(show(chain.fork, merge, ".fork-base.json"))["upstream_base"] == chain.upstream_tip  # type: ignore[arg-type]
    land = report["land"]
    assert land in report["summary"] and "--force" not in land and "+" not in land
    # Rerun: the same merge on the same branch, nothing pushed.
    code, again = run(chain, "publish", "--no-gate")
    assert (code, again["action"], again["pushed"], tip(chain, sync)) == (0, "already-synced", False, merge)
    # Landing it is the plain push printed: a fast-forward of farai/main.
    subprocess.run(land, shell=True, cwd=chain.fork_work().path, check=True, capture_output=True)
    assert tip(chain) == merge
    code, landed = run(chain, "publish", "--no-gate")
    assert (code, landed["action"]) == (0, "already-published")


def test_a_sync_branch_holding_another_commit_is_refused(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    ported(chain, publish="rebuild")
    sync = run(chain, "publish", "--no-gate", "--dry-run")[1]["target"]
    git(chain.fork, "update-ref", f"refs/heads/{sync}", chain.base)  # someone else's branch of that name
    code, report = run(chain, "publish", "--no-gate")
    assert code == 1 and report["action"] == "sync-taken" and tip(chain, sync) == chain.base
    said = report["problems"][0]
    assert sync in said["message"] and "--delete" in said["hint"]


def test_rebuild_mode_fast_forwards_and_pushes_to_another_url(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    head = ported(chain, publish="rebuild")
    git(chain.fork, "update-ref", "refs/heads/farai/main", chain.upstream_tip)  # an ancestor of the new head
    code, report = run(chain, "publish", "--no-gate")
    assert code == 0 and report["action"] == "fast-forward" and tip(chain) == head
    other = tmp_path / "other.git"
    git(tmp_path, "init", "-q", "--bare", str(other))
    code, report = run(chain, "publish", "--no-gate", "--to", url(other))
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
        core.push_plan(plan, fork.upstream_repo)
    assert tip(chain) == moved


def test_compare_and_swap_refuses_a_rewound_or_deleted_branch(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    with locations.named_by_user(
        [url(chain.fork)]
    ):  # called directly: the test is the user who names the fork
        store = GitRepo(chain.fork)
        tree = commit(chain.fork, chain.head)[0]
        child = store.commits.commit_tree(tree, [chain.head], "child\n", WHO)
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
    code, report = run(chain, "publish", "--no-gate", "--dry-run")
    assert code == 2
    said = report["problems"][0]["message"]
    assert "publish" in said and "manifest.yaml:" in said


def test_merge_mode_keeps_a_committed_fork_base_json_and_names_the_new_base(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chain = make_chain(tmp_path)
    written = fork_base_record(chain.base).replace(
        "AlignmentResearch/Megatron-LM", "alignmentresearch/megatron-lm"
    )
    old_tip = on_tip(chain, "fork: record the base", {".fork-base.json": written})
    head = ported(chain)
    # Same inputs, same merge: two caches plan the same commit.
    first = run(chain, "publish", "--no-gate", "--dry-run")[1]["tip"]
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "another-cache"))
    code, report = run(chain, "publish", "--no-gate", "--dry-run")
    assert code == 0 and report["tip"] == first
    code, report = run(chain, "publish", "--no-gate")
    assert code == 0, report["problems"]
    merge = tip(chain)
    assert merge == first and report["action"] == "merge" and report["carried"] == [".fork-base.json"]
    assert commit(chain.fork, merge)[1] == [old_tip, head]  # type: ignore[arg-type]
    # The head's tree but for the fork's file, which names the base published (its spelling kept).
    assert changed(chain.fork, head, merge) == [".fork-base.json"]  # type: ignore[arg-type]
    record = json.loads(show(chain.fork, merge, ".fork-base.json"))  # type: ignore[arg-type]
    assert (
        record["upstream_base"] == chain.upstream_tip
        and record["fork_repo"] == "alignmentresearch/megatron-lm"
    )
    assert ".fork-base.json" in git(chain.fork, "log", "-1", "--format=%B", merge)  # type: ignore[arg-type]
    code, again = run(chain, "publish", "--no-gate")
    assert (code, again["action"], tip(chain)) == (0, "already-published", merge)


def test_a_later_port_keeps_the_forks_own_files(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    own = {".fork-base.json": fork_base_record(chain.base), "README.fork.md": "FAR.AI fork\n"}
    on_tip(chain, "fork: our readme and base", {**own, ".github/workflows/fork.yml": "on: push\n"})
    middle = git(chain.upstream, "rev-parse", f"{chain.upstream_tip}~1")
    own_paths = [".fork-base.json", "README.fork.md", ".github/**"]
    set_fork(chain, own_paths=own_paths)
    ported(chain, base=middle)
    assert run(chain, "publish", "--no-gate")[0] == 0
    first = tip(chain)
    # Someone edits the fork's readme on the branch; then the next port.
    on_tip(chain, "fork: readme", {"README.fork.md": "FAR.AI fork, v2\n"})
    head = ported(chain)
    code, report = run(chain, "publish", "--no-gate")
    assert code == 0, report["problems"]
    merge = tip(chain)
    assert git(chain.fork, "rev-list", "--first-parent", "-3", merge).split()[2] == first  # type: ignore[arg-type]
    assert changed(chain.fork, head, merge) == [
        ".fork-base.json",
        ".github/workflows/fork.yml",
        "README.fork.md",
    ]  # type: ignore[arg-type]
    assert show(chain.fork, merge, "README.fork.md") == "FAR.AI fork, v2"  # type: ignore[arg-type]
    assert json.loads(show(chain.fork, merge, ".fork-base.json"))["upstream_base"] == chain.upstream_tip  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["merge", "rebuild"])
def test_a_hotfix_committed_on_the_tip_is_refused_not_dropped(tmp_path: Path, mode: str) -> None:
    chain = make_chain(tmp_path)
    on_tip(chain, "fork: record the base", {".fork-base.json": fork_base_record(chain.base)})
    hotfix = on_tip(
        chain,
        "hotfix: b returns 3",
        {"megatron/core/b.py": "def b():\n    return 3\n", ".fork-base.json": fork_base_record("1" * 40)},
    )
    ported(chain, publish=mode)
    before = chain.refs(chain.fork)
    code, report = run(chain, "publish", "--no-gate")
    assert code == 1 and report["action"] == "foreign" and report["pushed"] is False
    assert chain.refs(chain.fork) == before  # nothing pushed anywhere
    assert report["foreign"] == [
        {"commit": hotfix, "subject": "hotfix: b returns 3", "paths": ["megatron/core/b.py"]}
    ]
    problem = report["problems"][0]
    assert hotfix[:12] in problem["message"] and "megatron/core/b.py" in problem["message"]
    assert ".fork-base.json" not in problem["message"]  # the fork's own file is not the problem
    assert "forkctl export" in problem["hint"] and "fork.own_paths" in problem["hint"]


@pytest.mark.slow
def test_a_hotfix_brought_into_the_series_is_published(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    hotfix = on_tip(chain, "hotfix: b returns 3", {"megatron/core/b.py": "def b():\n    return 3\n"})
    head = ported(chain)
    assert run(chain, "publish", "--no-gate", "--dry-run")[0] == 1
    # The fix the refusal names: the change becomes a patch of the series.
    patch = chain.fork_work().format_patch(hotfix, chain.toolkit / "patches" / "megatron-lm", number=5)
    data = yaml.safe_load(chain.manifest.read_text())
    data["series"].append({"file": str(patch.relative_to(chain.toolkit))})
    chain.manifest.write_text(yaml.safe_dump(data, sort_keys=False))
    code, report = run(chain, "publish", "--no-gate")
    assert code == 0, report["problems"]
    merge = tip(chain)
    assert report["head"] != head and show(chain.fork, merge, "megatron/core/b.py").endswith("return 3")  # type: ignore[arg-type]


def test_own_paths_are_checked_with_their_line(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    for glob, said in (("**", "matches every path"), ("../x", "'..'"), ("/etc/x", "absolute")):
        set_fork(chain, own_paths=[glob])
        code, report = run(chain, "publish", "--no-gate", "--dry-run")
        assert code == 2, glob
        message = report["problems"][0]["message"]
        assert "own_paths" in message and said in message and "manifest.yaml:" in message


def test_a_series_that_changes_a_fork_owned_path_is_refused(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    ported(chain, own_paths=["README.md"])
    code, report = run(chain, "publish", "--no-gate", "--dry-run")
    assert code == 2 and tip(chain) == chain.head
    message = report["problems"][0]["message"]
    assert "README.md" in message and "0003-" in message and "fork.own_paths" in report["problems"][0]["hint"]
