"""Provenance kept: export and port write a commit's provenance lines as git left them, every one of
them, and invent none (issue 34, item 3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from forkctl.series import parse_patch
from tests.gitrepos import Repo
from tests.seriesrepo import SeriesSetup, clone, make_series, run_json

BRANCH = "farai/main"


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SeriesSetup:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    return make_series(tmp_path)


def squash_of_two_picks(setup: SeriesSetup) -> Repo:
    """The dev clone on branch `squashed`: the first two authoring commits picked with `-x` and squashed
    into one commit whose message is both messages (as `git rebase -i`'s squash writes it), then the
    other two picked with `-x`."""
    dev = setup.dev
    dev.git("checkout", "-q", "-b", "squashed", setup.base)
    for sha in setup.dev_commits[:2]:
        dev.git("cherry-pick", "-x", sha)
    messages = [dev.git("log", "-1", "--format=%B", rev) for rev in ("HEAD~1", "HEAD")]
    dev.git("reset", "-q", "--soft", setup.base)
    dev.git("commit", "-q", "-m", "\n\n".join(messages))
    for sha in setup.dev_commits[2:]:
        dev.git("cherry-pick", "-x", sha)
    return dev


def test_a_squash_of_two_picks_keeps_both_lines_through_export_and_port(
    setup: SeriesSetup, tmp_path: Path
) -> None:
    dev = squash_of_two_picks(setup)
    both = setup.dev_commits[:2]
    code, data = run_json(setup, "export", "--repo", str(dev.path), "--branch", "squashed")
    assert code == 0, data
    entries = setup.manifest_data()["series"]
    first = setup.root / entries[0]["file"]
    assert parse_patch(first).provenance == both
    assert entries[0]["provenance"] == both  # a list where a patch names several commits
    assert [e["provenance"] for e in entries[1:]] == setup.dev_commits[2:]  # one stays a plain SHA
    assert data["patches"][0]["provenance"] == both
    code, lint = run_json(setup, "lint")
    assert code == 0 and lint["problems"] == [], lint
    code, check = run_json(setup, "export", "--repo", str(dev.path), "--branch", "squashed", "--check")
    assert code == 0, check
    # A file that lost one of the lines no longer matches the branch.
    kept = first.read_bytes()
    first.write_bytes(kept.replace(f"(cherry picked from commit {both[1]})\n".encode(), b""))
    assert parse_patch(first).provenance == both[:1]
    code, check = run_json(setup, "export", "--repo", str(dev.path), "--branch", "squashed", "--check")
    assert code == 1, check
    assert check["changed"] == [entries[0]["file"]]
    first.write_bytes(kept)
    # Through apply and a port: both lines stay, in the file and in the manifest.
    onto = setup.upstream.commit("upstream: unrelated", {"megatron/core/u.py": "U = 1\n"})
    fork = clone(setup.upstream, tmp_path / "fork", bare=True)
    code, data = run_json(setup, "apply", "--base", setup.base, "--repo", str(fork.path))
    assert code == 0, data
    code, data = run_json(setup, "port", "--onto", onto, "--repo", str(fork.path))
    assert code == 0, data
    entries = setup.manifest_data()["series"]
    assert parse_patch(setup.root / entries[0]["file"]).provenance == both
    assert entries[0]["provenance"] == both
    message = fork.git("log", "-1", "--format=%B", f"{BRANCH}~2")  # the first of the three
    assert [line for line in message.splitlines() if line.startswith("(cherry picked")] == [
        f"(cherry picked from commit {sha})" for sha in both
    ]
    code, check = run_json(setup, "export", "--repo", str(fork.path), "--check")
    assert code == 0, check
    assert run_json(setup, "lint")[0] == 0


def test_an_own_commit_gets_no_provenance_line_naming_a_local_commit(
    setup: SeriesSetup, tmp_path: Path
) -> None:
    dev = setup.dev
    dev.git("checkout", "-q", "-b", "own", setup.base)
    own = dev.commit("feat: our own change\n\nWhy: ours.\n", {"README.md": "upstream\nours\n"})
    code, data = run_json(setup, "export", "--repo", str(dev.path), "--branch", "own")
    assert code == 0, data
    entry = setup.manifest_data()["series"][0]
    patch = parse_patch(setup.root / entry["file"])
    assert patch.provenance == [] and own not in patch.raw.decode()
    assert entry.get("provenance") is None  # nothing names a commit only this clone has
    assert data["patches"][0]["provenance"] == [] and data["patches"][0]["commit"] == own
    code, lint = run_json(setup, "lint")
    assert code == 0 and lint["problems"] == [], lint
    # A port rebuilds it on the new base without naming the commit it was built as on the old one.
    onto = setup.upstream.commit("upstream: unrelated", {"megatron/core/u.py": "U = 1\n"})
    fork = clone(setup.upstream, tmp_path / "fork", bare=True)
    assert run_json(setup, "apply", "--base", setup.base, "--repo", str(fork.path))[0] == 0
    old_commit = fork.head(BRANCH)
    code, data = run_json(setup, "port", "--onto", onto, "--repo", str(fork.path))
    assert code == 0, data
    entry = setup.manifest_data()["series"][0]
    ported = parse_patch(setup.root / entry["file"])
    assert ported.provenance == [] and old_commit not in ported.raw.decode()
    assert entry.get("provenance") is None
    assert "cherry picked" not in fork.git("log", "-1", "--format=%B", BRANCH)
