"""forkctl fork-base: `.fork-base.json` (schema 1) checked against the manifest, and written by --write."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from forkctl.cli import cli
from tests.chain import make_chain
from tests.gitrepos import Repo, init_repo
from tests.test_publish import ported, run, tip
from tests.toolkit import flat, make_toolkit

KEYS = ["schema", "fork_repo", "upstream_repo", "upstream_branch", "upstream_base"]


def _run(manifest: Path, fork: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--manifest", str(manifest), "fork-base", "--repo", str(fork), *args])
    return result.exit_code, result.output


def _fork(tmp: Path, record: dict | None) -> Repo:
    files = {"README.md": "fork\n"}
    if record is not None:
        files[".fork-base.json"] = json.dumps(record, indent=2) + "\n"
    return init_repo(tmp / "fork", files)


def _record(base: str, **changes: str) -> dict:
    record = {
        "schema": 1,
        "fork_repo": "AlignmentResearch/Megatron-LM",
        "upstream_repo": "NVIDIA/Megatron-LM",
        "upstream_branch": "main",
        "upstream_base": base,
    }
    return {**record, **changes}


def test_a_missing_file_fails_the_check_and_write_creates_it(tmp_path: Path) -> None:
    toolkit = make_toolkit(tmp_path)
    fork = _fork(tmp_path, None)
    code, out = _run(toolkit.manifest, fork.path)
    assert code == 1 and ".fork-base.json is missing" in out and "fork-base --write" in out
    assert not (fork.path / ".fork-base.json").exists()

    code, out = _run(toolkit.manifest, fork.path, "--write")
    assert code == 0, out
    written = json.loads((fork.path / ".fork-base.json").read_text())
    assert list(written) == KEYS and written == _record(toolkit.base)
    assert _run(toolkit.manifest, fork.path)[0] == 0


def test_write_updates_only_what_differs_and_keeps_the_files_spelling(tmp_path: Path) -> None:
    toolkit = make_toolkit(tmp_path)
    url = "https://github.com/alignmentresearch/Megatron-LM.git"
    fork = _fork(tmp_path, _record("0" * 40, fork_repo=url))
    code, out = _run(toolkit.manifest, fork.path, "--json")
    assert code == 1
    report = json.loads(out)
    assert report["command"] == "fork-base" and report["up_to_date"] is False
    assert any("upstream_base is 000000000000" in text for text in report["differences"])

    code, out = _run(toolkit.manifest, fork.path, "--write", "--json")
    assert code == 0, out
    assert json.loads(out)["written"] is True
    assert json.loads((fork.path / ".fork-base.json").read_text()) == _record(toolkit.base, fork_repo=url)
    changed = fork.git("diff", "--numstat").split()
    assert changed[:2] == ["1", "1"], changed  # the base line alone


def test_uncommitted_changes_to_the_file_are_never_overwritten(tmp_path: Path) -> None:
    toolkit = make_toolkit(tmp_path)
    fork = _fork(tmp_path, _record(toolkit.base))
    edited = json.dumps(_record("1" * 40), indent=4) + "\n"
    (fork.path / ".fork-base.json").write_text(edited)
    code, out = _run(toolkit.manifest, fork.path, "--write")
    assert code == 2 and "uncommitted changes" in flat(out) and "commit or stash" in flat(out)
    assert (fork.path / ".fork-base.json").read_text() == edited


def test_a_file_that_agrees_is_left_byte_for_byte(tmp_path: Path) -> None:
    toolkit = make_toolkit(tmp_path)
    compact = json.dumps(_record(toolkit.base), separators=(",", ":"))
    fork = init_repo(tmp_path / "fork", {".fork-base.json": compact})
    code, out = _run(toolkit.manifest, fork.path, "--write")
    assert code == 0 and "agrees with the manifest" in flat(out)
    assert (fork.path / ".fork-base.json").read_text() == compact


def test_a_broken_file_is_reported_and_replaced_by_write(tmp_path: Path) -> None:
    toolkit = make_toolkit(tmp_path)
    fork = init_repo(tmp_path / "fork", {".fork-base.json": '{"schema": 2}'})
    code, out = _run(toolkit.manifest, fork.path)
    assert code == 1 and "schema is 2" in flat(out)
    assert _run(toolkit.manifest, fork.path, "--write")[0] == 0
    assert json.loads((fork.path / ".fork-base.json").read_text()) == _record(toolkit.base)


def test_outside_a_repository_it_says_where_to_run(tmp_path: Path) -> None:
    toolkit = make_toolkit(tmp_path)
    plain = tmp_path / "plain"
    plain.mkdir()
    code, out = _run(toolkit.manifest, plain)
    assert code == 2 and "not inside a git working tree" in flat(out) and "--repo" in out


def test_the_written_file_committed_on_the_fork_branch_survives_publish_and_names_the_new_base(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    chain = make_chain(tmp_path)
    work = chain.fork_work()
    work.git("checkout", "-q", "-B", "farai/main", "origin/farai/main")
    code, out = _run(chain.manifest, work.path, "--write")
    assert code == 0 and "forkctl publish keeps it" in out, out
    work.commit("fork: record the base", date="2026-04-01T00:00:00+00:00")  # as the README says
    work.git("push", "-q", "origin", "HEAD:refs/heads/farai/main")
    ported(chain)  # the series moves to a new base: the file on the branch names the old one
    assert _run(chain.manifest, work.path)[0] == 1
    code, report = run(chain, "publish", "--no-gate")
    assert code == 0, report["problems"]
    work.git("fetch", "-q", "origin")
    work.git("checkout", "-q", "--detach", tip(chain))  # type: ignore[arg-type]
    code, out = _run(chain.manifest, work.path)
    assert code == 0 and "agrees with the manifest" in flat(out), out
    assert json.loads((work.path / ".fork-base.json").read_text())["upstream_base"] == chain.upstream_tip


def test_write_never_replaces_an_ignored_file_without_force(tmp_path: Path) -> None:
    toolkit = make_toolkit(tmp_path)
    fork = init_repo(tmp_path / "fork", {"README.md": "fork\n", ".gitignore": ".fork-base.json\n"})
    mine = json.dumps(_record("1" * 40, upstream_branch="my-notes"), indent=4) + "\n"
    (fork.path / ".fork-base.json").write_text(mine)
    assert fork.git("status", "--porcelain") == ""  # ignored: git has no copy of it anywhere
    code, out = _run(toolkit.manifest, fork.path, "--write")
    assert code == 2, out
    assert "does not track" in out and "--force" in out
    assert (fork.path / ".fork-base.json").read_text() == mine
    code, out = _run(toolkit.manifest, fork.path, "--write", "--force")
    assert code == 0, out
    assert json.loads((fork.path / ".fork-base.json").read_text()) == _record(toolkit.base)


def test_write_never_replaces_an_untracked_file_without_force(tmp_path: Path) -> None:
    toolkit = make_toolkit(tmp_path)
    fork = _fork(tmp_path, None)
    mine = json.dumps(_record("1" * 40), indent=4) + "\n"
    (fork.path / ".fork-base.json").write_text(mine)
    code, out = _run(toolkit.manifest, fork.path, "--write")
    assert code == 2 and "does not track" in out, out
    assert (fork.path / ".fork-base.json").read_text() == mine
    assert _run(toolkit.manifest, fork.path, "--write", "--force")[0] == 0
    assert json.loads((fork.path / ".fork-base.json").read_text()) == _record(toolkit.base)


@pytest.mark.parametrize("write", [False, True], ids=["check", "write"])
def test_a_folder_at_the_path_is_bad_input(tmp_path: Path, write: bool) -> None:
    toolkit = make_toolkit(tmp_path)
    fork = _fork(tmp_path, None)
    (fork.path / ".fork-base.json").mkdir()
    (fork.path / ".fork-base.json" / "keep").write_text("x")
    code, out = _run(toolkit.manifest, fork.path, *(["--write", "--force"] if write else []))
    assert code == 2, out
    assert "not a regular file" in flat(out)
    assert (fork.path / ".fork-base.json" / "keep").read_text() == "x"


def test_a_deeply_nested_file_is_reported_not_a_crash(tmp_path: Path) -> None:
    toolkit = make_toolkit(tmp_path)
    fork = init_repo(tmp_path / "fork", {".fork-base.json": "[" * 100_000 + "]" * 100_000})
    code, out = _run(toolkit.manifest, fork.path)
    assert code == 1, out
    assert "nested too deeply" in out
