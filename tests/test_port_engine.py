"""The port engine on the cases real upstream history produces, each compared with plain `git rebase`.

Every test builds a real upstream repository, a series authored in a dev clone, and a bare fork clone;
`forkctl port` runs through the CLI, and `git rebase --onto` runs on a scratch clone of the same objects.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from forkctl.cli import cli
from tests import budget
from tests.gitrepos import FORMAT_PATCH, Repo, git
from tests.seriesrepo import SeriesSetup, clone, make_series, run_json, write_manifest

BRANCH = "farai/main"
LINES = [f"line {n}" for n in range(1, 21)]


def text(lines: list[str]) -> str:
    return "\n".join(lines) + "\n"


def edited(**changes: str) -> str:
    """LINES with some lines replaced: edited(l5="five") replaces `line 5`."""
    lines = list(LINES)
    for key, value in changes.items():
        lines[int(key[1:]) - 1] = value
    return text(lines)


BASE_FILES = {"megatron/core/long.py": text(LINES), "megatron/core/other.py": "X = 1\n"}


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))


def setup_with(tmp_path: Path, changes: list[tuple[str, dict[str, str | None]]]) -> SeriesSetup:
    """A series made of `changes` on a base that holds BASE_FILES."""
    return make_series(tmp_path, changes=changes, extra_upstream_files=BASE_FILES)


def fork_with_branch(setup: SeriesSetup, tmp_path: Path) -> Repo:
    fork = clone(setup.upstream, tmp_path / "fork.git", bare=True)
    code, data = run_json(setup, "apply", "--base", setup.base, "--repo", str(fork.path))
    assert code == 0, data
    return fork


def rebase_tree(fork: Repo, tmp_path: Path, old_base: str, old_head: str, new_base: str) -> tuple[int, str]:
    """(exit status, HEAD tree) of plain `git rebase --onto new_base old_base` of old_head."""
    work = tmp_path / "rebase-work"
    git(tmp_path, "clone", "-q", str(fork.path), str(work))
    git(work, "checkout", "-q", "--detach", old_head)
    status = subprocess.run(
        ["git", "rebase", "-q", "--onto", new_base, old_base], cwd=work, capture_output=True, check=False
    ).returncode
    return status, git(work, "rev-parse", "HEAD^{tree}")


def port(setup: SeriesSetup, fork: Repo, onto: str, *extra: str) -> tuple[int, dict]:
    return run_json(setup, "port", "--onto", onto, "--repo", str(fork.path), *extra)


def test_context_drift_merges_without_stopping_and_equals_rebase(tmp_path: Path) -> None:
    setup = setup_with(tmp_path, [("feat: line 10", {"megatron/core/long.py": edited(l10="TEN")})])
    # Upstream edits a context line of the patch (two lines above): `git apply` fails, a merge is clean.
    new_base = setup.upstream.commit("upstream: line 8", {"megatron/core/long.py": edited(l8="EIGHT")})
    fork = fork_with_branch(setup, tmp_path)
    old_head = fork.head(BRANCH)
    with_plain_apply = git(tmp_path, "-C", str(fork.path), "diff", setup.base, old_head)
    assert "line 8" in with_plain_apply  # the patch's context holds the line upstream changed
    code, data = port(setup, fork, new_base)
    assert code == 0, data
    assert data["steps"][0]["commit"] and not data["steps"][0]["resolved"]
    status, tree = rebase_tree(fork, tmp_path, setup.base, old_head, new_base)
    assert status == 0
    assert fork.git("rev-parse", f"{BRANCH}^{{tree}}") == tree


def test_rename_is_followed_like_rebase(tmp_path: Path) -> None:
    setup = setup_with(tmp_path, [("feat: line 10", {"megatron/core/long.py": edited(l10="TEN")})])
    (setup.upstream.path / "megatron/core/ops").mkdir()
    setup.upstream.git("mv", "megatron/core/long.py", "megatron/core/ops/long.py")
    new_base = setup.upstream.commit("upstream: move long.py into ops/")
    fork = fork_with_branch(setup, tmp_path)
    old_head = fork.head(BRANCH)
    code, data = port(setup, fork, new_base)
    assert code == 0, data
    assert "TEN" in fork.git("show", f"{BRANCH}:megatron/core/ops/long.py")
    assert fork.git("ls-tree", "-r", "--name-only", BRANCH, "megatron/core/long.py") == ""
    status, tree = rebase_tree(fork, tmp_path, setup.base, old_head, new_base)
    assert status == 0
    assert fork.git("rev-parse", f"{BRANCH}^{{tree}}") == tree
    # The re-exported patch names the new path and rebuilds the same branch on the new base.
    code, again = run_json(setup, "apply", "--base", new_base, "--repo", str(fork.path), "--branch", "again")
    assert code == 0, again
    assert again["head"] == fork.head(BRANCH)


def test_real_conflict_on_a_renamed_file_leaves_markers_at_the_new_path(tmp_path: Path) -> None:
    setup = setup_with(tmp_path, [("feat: line 10", {"megatron/core/long.py": edited(l10="TEN")})])
    (setup.upstream.path / "megatron/core/ops").mkdir()
    setup.upstream.git("mv", "megatron/core/long.py", "megatron/core/ops/long.py")
    setup.upstream.write({"megatron/core/ops/long.py": edited(l10="UPSTREAM TEN")})
    new_base = setup.upstream.commit("upstream: move and edit line 10")
    fork = fork_with_branch(setup, tmp_path)
    code, data = port(setup, fork, new_base)
    assert code == 1, data
    assert data["conflict"]["paths"] == ["megatron/core/ops/long.py"]
    assert "CONFLICT" in data["conflict"]["message"]
    worktree = Path(data["conflict"]["worktree"])
    content = (worktree / "megatron/core/ops/long.py").read_text()
    assert "<<<<<<<" in content and "TEN" in content and "UPSTREAM TEN" in content
    # The text output shows git's own words, not only --json.
    run_json(setup, "port", "--abort", "--repo", str(fork.path))
    text_out = CliRunner().invoke(
        cli, ["--manifest", str(setup.manifest), "port", "--onto", new_base, "--repo", str(fork.path)]
    )
    assert text_out.exit_code == 1
    assert "CONFLICT (content): Merge conflict in megatron/core/ops/long.py" in text_out.output


def test_modify_delete_stops_with_the_file_in_the_worktree(tmp_path: Path) -> None:
    setup = setup_with(tmp_path, [("feat: line 10", {"megatron/core/long.py": edited(l10="TEN")})])
    new_base = setup.upstream.commit("upstream: delete long.py", {"megatron/core/long.py": None})
    fork = fork_with_branch(setup, tmp_path)
    code, data = port(setup, fork, new_base)
    assert code == 1, data
    assert data["conflict"]["paths"] == ["megatron/core/long.py"]
    assert "modify/delete" in data["conflict"]["message"]
    assert (Path(data["conflict"]["worktree"]) / "megatron/core/long.py").is_file()


def test_lines_upstream_took_in_rewritten_context_stop_like_rebase_naming_the_commit(tmp_path: Path) -> None:
    setup = setup_with(tmp_path, [("feat: line 10", {"megatron/core/long.py": edited(l10="TEN")})])
    upstream = setup.upstream
    upstream.commit("upstream: rewrite around", {"megatron/core/long.py": edited(l9="NINE", l11="ELEVEN")})
    absorbed_by = upstream.commit(
        "upstream: take line 10 (#99)", {"megatron/core/long.py": edited(l9="NINE", l10="TEN", l11="ELEVEN")}
    )
    new_base = upstream.commit("upstream: later", {"megatron/core/other.py": "X = 2\n"})
    fork = fork_with_branch(setup, tmp_path)
    old_head = fork.head(BRANCH)
    # The same zero-context patch-id names upstream's commit, but git's merge conflicts: a hint, no drop.
    code, data = port(setup, fork, new_base)
    assert code == 1, data
    assert data["conflict"]["named_by"] == "patch-id-zero-context"
    assert data["conflict"]["upstream_commit"] == absorbed_by
    status, _ = rebase_tree(fork, tmp_path, setup.base, old_head, new_base)
    assert status != 0
    code, data = run_json(setup, "port", "--skip", "--repo", str(fork.path))
    assert code == 0, data
    assert setup.manifest_data()["dropped"][0]["reason"] == "skipped"


def test_provenance_names_the_upstream_commit_of_a_pick_rewritten_since(tmp_path: Path) -> None:
    upstream_setup = setup_with(tmp_path, [])
    upstream = upstream_setup.upstream
    # X: an upstream commit, cherry-picked (-x) into the series with an adaptation, then rewritten upstream.
    dev = Repo(tmp_path / "dev")
    dev.git("fetch", "-q", str(upstream.path), "main")
    x_commit = upstream.commit("upstream: line 10 (#7)", {"megatron/core/long.py": edited(l10="TEN")})
    dev.git("fetch", "-q", str(upstream.path), "main")
    dev.git("checkout", "-q", "--detach", upstream_setup.base)
    dev.git("cherry-pick", "-x", "-n", x_commit)
    dev.write({"megatron/core/other.py": "X = 1  # adapted for the old base\n"})
    dev.git("add", "-A")
    message = f"backport: line 10\n\n(cherry picked from commit {x_commit})\n"
    dev.git("commit", "-q", "-m", message)
    out = upstream_setup.root / "patches" / "megatron-lm"
    name = dev.git(*FORMAT_PATCH, "-o", str(out), "-1", "HEAD")
    write_manifest(
        upstream_setup.root,
        upstream_setup.base,
        upstream_setup.url,
        [str(Path(name).relative_to(upstream_setup.root))],
    )
    new_base = upstream.commit(
        "upstream: line 10 again",
        {"megatron/core/long.py": edited(l10="TEN!"), "megatron/core/other.py": "X = 3\n"},
    )
    fork = fork_with_branch(upstream_setup, tmp_path)
    old_head = fork.head(BRANCH)
    # The adaptation is ours and git stops on it. The new base holds X, so only the adaptation (the
    # interdiff with X) is merged: the stop is on other.py alone, its own lines named; nothing dropped.
    code, data = port(upstream_setup, fork, new_base)
    assert code == 1, data
    assert data["conflict"]["named_by"] == "provenance"
    assert data["conflict"]["upstream_commit"] == x_commit
    assert data["conflict"]["paths"] == ["megatron/core/other.py"]
    assert "adapted for the old base" in data["conflict"]["own_lines"]
    assert "TEN" not in data["conflict"]["own_lines"]
    status, _ = rebase_tree(fork, tmp_path, upstream_setup.base, old_head, new_base)
    assert status != 0


def test_partially_absorbed_patch_is_applied_and_reported(tmp_path: Path) -> None:
    setup = setup_with(
        tmp_path,
        [("feat: lines 3 and 17", {"megatron/core/long.py": edited(l3="THREE", l17="SEVENTEEN")})],
    )
    new_base = setup.upstream.commit("upstream: line 3", {"megatron/core/long.py": edited(l3="THREE")})
    fork = fork_with_branch(setup, tmp_path)
    old_head = fork.head(BRANCH)
    code, data = port(setup, fork, new_base)
    assert code == 0, data
    assert data["steps"][0]["partial"] == {"changed_lines": 4, "still_needed": 2}
    status, tree = rebase_tree(fork, tmp_path, setup.base, old_head, new_base)
    assert status == 0 and fork.git("rev-parse", f"{BRANCH}^{{tree}}") == tree


def test_empty_resolution_is_refused_then_skip_records_it(tmp_path: Path) -> None:
    setup = setup_with(
        tmp_path,
        [
            ("feat: line 10", {"megatron/core/long.py": edited(l10="TEN")}),
            ("feat: other", {"megatron/core/other.py": "X = 5\n"}),
        ],
    )
    new_base = setup.upstream.commit("upstream: line 10", {"megatron/core/long.py": edited(l10="UP")})
    fork = fork_with_branch(setup, tmp_path)
    code, data = port(setup, fork, new_base)
    assert code == 1, data
    worktree = Path(data["conflict"]["worktree"])
    # The person keeps upstream's side: the patch would become empty.
    (worktree / "megatron/core/long.py").write_text(edited(l10="UP"))
    code, refused = run_json(setup, "port", "--continue", "--repo", str(fork.path))
    assert code == 2, refused
    assert "changes nothing" in refused["error"] and "--skip" in refused["hint"]
    code, data = run_json(setup, "port", "--skip", "--repo", str(fork.path))
    assert code == 0, data
    dropped = setup.manifest_data()["dropped"]
    assert [d["reason"] for d in dropped] == ["skipped"]
    assert dropped[0]["skipped_by"] == "Test User <test@example.com>"
    assert dropped[0]["skipped_at"]
    files = [setup.root / e["file"] for e in setup.manifest_data()["series"]]
    assert len(files) == 1 and files[0].stat().st_size > 0
    code, lint = run_json(setup, "lint")
    assert code == 0, lint


def test_backport_onto_a_branch_cut_before_the_base(tmp_path: Path) -> None:
    setup = setup_with(tmp_path, [("feat: line 10", {"megatron/core/long.py": edited(l10="TEN")})])
    upstream = setup.upstream
    upstream.git("checkout", "-q", "-b", "release", f"{setup.base}~1")
    release = upstream.commit("release: fix", {"megatron/core/long.py": edited(l1="ONE")})
    upstream.git("checkout", "-q", "main")
    fork = fork_with_branch(setup, tmp_path)
    old_head = fork.head(BRANCH)
    code, refused = port(setup, fork, release)
    assert code == 2 and "--backport" in refused["hint"]
    code, data = port(setup, fork, release, "--backport", "--branch", "release-fork")
    assert code == 0, data
    assert data["backport"] is True
    assert setup.manifest_data()["upstream"]["base"] == release
    status, tree = rebase_tree(fork, tmp_path, setup.base, old_head, release)
    assert status == 0 and fork.git("rev-parse", "release-fork^{tree}") == tree


@pytest.mark.budget(
    "`status --first-break` on real history: 1.22 s a patch against 3.55 s for `git bisect run` "
    "(bench/first_break_bench.py, 2026-12-02): a bisection, not a walk over every upstream commit"
)
def test_preview_moves_nothing_and_first_break_names_the_upstream_commit(tmp_path: Path) -> None:
    setup = setup_with(
        tmp_path,
        [
            ("feat: line 10", {"megatron/core/long.py": edited(l10="TEN")}),
            ("feat: other", {"megatron/core/other.py": "X = 5\n"}),
            ("docs: readme", {"README.md": "upstream\nforked\n"}),
        ],
    )
    upstream = setup.upstream
    upstream.commit("upstream: line 8", {"megatron/core/long.py": edited(l8="EIGHT")})  # drift only
    for number in range(5):
        upstream.commit(f"upstream: unrelated {number}", {f"megatron/core/u{number}.py": "U = 1\n"})
    culprit = upstream.commit("upstream: rewrite other.py", {"megatron/core/other.py": "X = 100\n"})
    for number in range(5, 9):
        upstream.commit(f"upstream: unrelated {number}", {f"megatron/core/u{number}.py": "U = 1\n"})
    upstream.commit("upstream: readme too", {"README.md": "upstream\nforked\n"})  # absorbs patch 3
    target = upstream.head()
    fork = fork_with_branch(setup, tmp_path)
    refs_before = fork.git("for-each-ref")
    manifest_before = setup.manifest.read_bytes()
    code, data = run_json(setup, "status", "--onto", target, "--repo", str(fork.path), "--first-break")
    assert code == 1, data
    results = [p["result"] for p in data["patches"]]
    assert results == ["applies with 3-way", "conflicts", "absorbed"]
    assert data["patches"][2]["reason"] == "patch-id"
    assert data["patches"][1]["conflict"]["paths"] == ["megatron/core/other.py"]
    broke = data["patches"][1]["first_break"]
    assert broke["commit"] == culprit
    assert broke["subject"] == "upstream: rewrite other.py"
    assert broke["files"] == ["megatron/core/other.py"]
    budget.at_most("commits tested to find the break among 12 upstream commits", broke["commits_tested"], 11)
    assert fork.git("for-each-ref") == refs_before
    assert setup.manifest.read_bytes() == manifest_before
    assert not (fork.path / "forkctl").exists()
    text_out = CliRunner().invoke(
        cli,
        [
            "--manifest",
            str(setup.manifest),
            "status",
            "--onto",
            target,
            "--repo",
            str(fork.path),
            "--first-break",
        ],
    )
    assert text_out.exit_code == 1
    assert f"first breaks at {culprit[:12]}" in text_out.output
    assert "CONFLICT (content): Merge conflict in megatron/core/other.py" in text_out.output
    github = CliRunner().invoke(
        cli,
        ["--manifest", str(setup.manifest), "status", "--onto", target, "--repo", str(fork.path), "--github"],
    )
    assert github.exit_code == 1
    assert f"::error file={data['patches'][1]['file']}" in github.output
