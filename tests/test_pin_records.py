"""Every record of a pin (issue 32, item 1): a consumer that keeps its pin twice, the gitlink and a file
(Megatron-Bridge's `.main.commit`, the full SHA and a newline), gets both moved in one bump commit;
check-pins reports a record that disagrees with its gitlink (or is missing or malformed) with a fix that
works as printed; describe shows the records; the manifest says which files and how they are written.

Real repositories (tests/chain.py), the real CLI in process, a private cache per test.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from forkctl.cli import cli
from forkctl.manifest import load
from tests.bridgerule import main_commit_matches_submodule
from tests.chain import BRIDGE_GITLINK, Chain, forkctl_json, make_chain, url, use_private_cache
from tests.gitrepos import git
from tests.test_manifest import VALID, _lint, _write
from tests.toolkit import flat

MAIN_COMMIT = ".main.commit"


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_private_cache(tmp_path, monkeypatch)


def _name_pin_files(chain: Chain, files: list[dict[str, str]] | None = None) -> None:
    """The toolkit's manifest says the Bridge also records its pin in `.main.commit`."""
    data = yaml.safe_load(chain.manifest.read_text())
    data["consumers"][0]["pin_files"] = files or [{"path": MAIN_COMMIT, "format": "sha-line"}]
    chain.manifest.write_text(yaml.safe_dump(data, sort_keys=False))


def _bridge_recording(chain: Chain, content: str | None, pin: str | None = None) -> str:
    """A Bridge farai/main commit whose gitlink pins `pin` (default: the plain base, .gitmodules as
    upstream Bridge has it; else `.gitmodules` names the fork) and whose `.main.commit` holds `content`."""
    files = {MAIN_COMMIT: content} if content is not None else None
    if pin is None:
        return chain.pin_bridge(chain.base, files=files)
    return chain.pin_bridge(pin, url(chain.fork), files=files)


def _gitlink_only_bump(repo: Path, parent: str, new: str) -> str:
    """The commit bump-bridge made before pin records: the gitlink moved, nothing else."""
    index = repo / "old-bump-index"
    env = {"GIT_INDEX_FILE": str(index), "PATH": "/usr/bin:/bin"}
    git(repo, "read-tree", parent, env=env)
    git(repo, "update-index", "--cacheinfo", f"160000,{new},{BRIDGE_GITLINK}", env=env)
    tree = git(repo, "write-tree", "--missing-ok", env=env)
    index.unlink()
    return git(repo, "commit-tree", tree, "-p", parent, "-m", "old bump", env={**env, **_IDENTITY})


_IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t.invalid",
}


# --- the manifest ----------------------------------------------------------------------------------

PIN_FILES = "    gitlink: 3rdparty/Megatron-LM\n    pin_files:\n"


def test_pin_files_load_with_their_format_and_default_to_none(tmp_path: Path, repo_root: Path) -> None:
    text = VALID.replace(
        "    gitlink: 3rdparty/Megatron-LM\n", PIN_FILES + "      - {path: .main.commit, format: sha-line}\n"
    )
    consumer = load(_write(tmp_path, text)).consumers[0]
    assert [(f.path, f.format) for f in consumer.pin_files] == [(".main.commit", "sha-line")]
    plain = load(_write(tmp_path / "old", VALID)).consumers[0]
    assert plain.pin_files == []  # a manifest from before pin_files is still valid: no records
    real = load(repo_root / "manifest.yaml").consumers
    assert [(f.path, f.format) for f in real[0].pin_files] == [(".main.commit", "sha-line")]
    assert real[1].pin_files == []


@pytest.mark.parametrize(
    ("entries", "line", "expected"),
    [
        ("      - {path: .main.commit, format: sha}\n", 20, "'sha-line'"),
        ("      - {path: .main.commit}\n", 20, "missing key"),
        ("      - {path: /etc/passwd, format: sha-line}\n", 20, "is absolute"),
        ("      - {path: ../x.commit, format: sha-line}\n", 20, "contains '..'"),
        ("      - {path: 3rdparty/Megatron-LM, format: sha-line}\n", 19, "is the gitlink itself"),
        ("      - {path: 3rdparty/Megatron-LM/x, format: sha-line}\n", 19, "inside the submodule"),
        ("      - {path: .gitmodules, format: sha-line}\n", 20, ".gitmodules"),
        (
            "      - {path: .main.commit, format: sha-line}\n      - {path: .main.commit, format: sha-line}\n",
            19,
            "listed twice",
        ),
    ],
    ids=[
        "unknown-format",
        "no-format",
        "absolute",
        "dotdot",
        "the-gitlink",
        "in-submodule",
        "gitmodules",
        "twice",
    ],
)
def test_bad_pin_files_name_the_line_and_exit_2(
    tmp_path: Path, entries: str, line: int, expected: str
) -> None:
    path = _write(tmp_path, VALID.replace("    gitlink: 3rdparty/Megatron-LM\n", PIN_FILES + entries))
    code, output = _lint(path)
    assert code == 2, output
    assert expected in flat(output)
    assert f"{path}:{line}:" in flat(output) and "pin_files" in flat(output)


# --- bump-bridge -------------------------------------------------------------------------------------


@pytest.mark.slow
def test_bump_writes_the_record_in_the_same_reproducible_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chain = make_chain(tmp_path)
    parent = _bridge_recording(chain, chain.base + "\n")
    _name_pin_files(chain)
    code, report = forkctl_json(chain, "bump-bridge", "--no-gate", "--through", "nemo-rl", "--push")
    assert code == 0, report["problems"]
    bridge_step = report["steps"][0]
    commit = bridge_step["commit"]
    assert git(chain.bridge, "rev-parse", f"{commit}~1") == parent
    assert git(chain.bridge, "diff", "--name-only", parent, commit).splitlines() == [
        ".gitmodules",
        MAIN_COMMIT,
        BRIDGE_GITLINK,
    ]
    assert git(chain.bridge, "cat-file", "blob", f"{commit}:{MAIN_COMMIT}") == chain.head
    shown = subprocess.run(
        ["git", "cat-file", "blob", f"{commit}:{MAIN_COMMIT}"],
        cwd=chain.bridge,
        capture_output=True,
        check=True,
    ).stdout
    assert shown == f"{chain.head}\n".encode()  # the full SHA and one newline, as the Bridge writes it
    main_commit_matches_submodule(chain.bridge, commit)  # the Bridge's own rule holds on the bump commit
    message = git(chain.bridge, "log", "-1", "--format=%B", commit)
    assert f"{MAIN_COMMIT}: {chain.base} -> {chain.head}" in message
    assert bridge_step["records"] == [
        {"path": MAIN_COMMIT, "format": "sha-line", "old": chain.base, "new": chain.head}
    ]
    assert report["steps"][1]["records"] == []
    # The checked chain includes the record, and it agrees.
    kinds = [(f["check"], f["kind"]) for f in report["links"][0]["findings"]]
    assert ("pin-file", "ok") in kinds
    # Same inputs, same SHA: a rerun from a fresh cache finds its pushes already there.
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache2"))
    code, again = forkctl_json(chain, "bump-bridge", "--no-gate", "--through", "nemo-rl", "--push")
    assert code == 0, again["problems"]
    assert [s["commit"] for s in again["steps"]] == [s["commit"] for s in report["steps"]]
    assert [s["push"] for s in again["steps"]] == ["already there", "already there"]
    # The user's checkout still has the old record (the bump touched no file).
    assert (chain.bridge_work.path / MAIN_COMMIT).read_text() == chain.base + "\n"


def test_the_bridge_rule_fails_on_a_gitlink_only_bump(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    parent = _bridge_recording(chain, chain.base + "\n")
    main_commit_matches_submodule(chain.bridge, parent)  # holds where both say the base
    old_bump = _gitlink_only_bump(chain.bridge, parent, chain.head)
    with pytest.raises(AssertionError, match="names " + chain.base):
        main_commit_matches_submodule(chain.bridge, old_bump)


def test_bump_refuses_a_record_the_consumer_does_not_keep(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    _name_pin_files(chain)  # the Bridge's tree has no .main.commit
    before = chain.refs(chain.bridge)
    code, report = forkctl_json(chain, "bump-bridge", "--no-gate", "--push")
    assert code == 2, report
    text = flat(" ".join(p["message"] + " " + (p.get("hint") or "") for p in report["problems"]))
    assert MAIN_COMMIT in text and "pin_files" in text
    assert chain.refs(chain.bridge) == before


# --- check-pins --------------------------------------------------------------------------------------


def _check_bridge(chain: Chain) -> tuple[int, dict]:
    return forkctl_json(chain, "check-pins", "--consumer", url(chain.bridge))


def _record_finding(report: dict) -> dict:
    findings = [f for f in report["links"][0]["findings"] if f["check"] == "pin-file"]
    assert len(findings) == 1, report["links"][0]["findings"]
    return findings[0]


def test_check_pins_reports_a_stale_record_and_its_fix_works_as_printed(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    _bridge_recording(chain, chain.base + "\n", pin=chain.head)  # gitlink right, record stale
    _name_pin_files(chain)
    code, report = _check_bridge(chain)
    assert code == 1, report
    finding = _record_finding(report)
    assert finding["status"] == "MISMATCH" and finding["kind"] == "pin-file-mismatch"
    assert chain.base in finding["message"] and chain.head in finding["message"]
    assert report["links"][0]["records"] == [
        {"path": MAIN_COMMIT, "format": "sha-line", "recorded": chain.base, "agrees": False}
    ]
    # The gitlink itself passes: only the record fails.
    assert all(f["status"] == "OK" for f in report["links"][0]["findings"] if f["check"] != "pin-file")
    fix = finding["fix"].split(" (")[0]
    subprocess.run(["sh", "-c", fix], cwd=chain.bridge_work.path, check=True)
    chain.pin_bridge(chain.head, files={MAIN_COMMIT: (chain.bridge_work.path / MAIN_COMMIT).read_text()})
    code, report = _check_bridge(chain)
    assert code == 0, report["problems"]
    assert _record_finding(report)["kind"] == "ok"


@pytest.mark.parametrize(
    ("content", "kind"),
    [(None, "pin-file-missing"), ("SHORT", "pin-file-malformed"), ("", "pin-file-malformed")],
    ids=["missing", "abbreviated", "empty"],
)
def test_check_pins_reports_a_missing_or_malformed_record(
    tmp_path: Path, content: str | None, kind: str
) -> None:
    chain = make_chain(tmp_path)
    text = chain.head[:12] + "\n" if content == "SHORT" else content
    _bridge_recording(chain, text, pin=chain.head)
    _name_pin_files(chain)
    code, report = _check_bridge(chain)
    assert code == 1, report
    finding = _record_finding(report)
    assert finding["kind"] == kind and finding["status"] == "MISMATCH"
    assert MAIN_COMMIT in finding["message"] and finding["fix"]


def test_check_pins_under_test_points_at_the_record(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    _bridge_recording(chain, chain.base + "\n", pin=chain.head)
    _name_pin_files(chain)
    result = CliRunner().invoke(
        cli,
        [
            "--manifest",
            str(chain.manifest),
            "check-pins",
            "--under-test",
            str(chain.bridge_work.path),
            "--json",
        ],
    )
    assert result.exit_code == 1, result.output
    import json

    finding = _record_finding(json.loads(result.stdout))
    assert finding["file"] == MAIN_COMMIT and finding["line"] == 1


def test_a_consumer_without_pin_files_is_checked_as_before(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    _bridge_recording(chain, chain.base + "\n", pin=chain.head)  # a stale file nobody named
    code, report = _check_bridge(chain)
    assert code == 0, report["problems"]
    assert not [f for f in report["links"][0]["findings"] if f["check"] == "pin-file"]


# --- describe ----------------------------------------------------------------------------------------


def test_describe_shows_every_record_the_move_writes(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    _bridge_recording(chain, chain.base + "\n")
    _name_pin_files(chain)
    code, payload = forkctl_json(chain, "describe")
    assert code == 0, payload
    records = payload["parts"]["records"]
    assert records[0]["consumer"] == "megatron-bridge"
    assert records[0]["gitlink"] == {"path": BRIDGE_GITLINK, "old": chain.base, "new": chain.head}
    assert records[0]["files"] == [
        {"path": MAIN_COMMIT, "format": "sha-line", "old": chain.base, "new": chain.head}
    ]
    body = payload["body"]
    assert f"`{MAIN_COMMIT}`" in body and f"`{chain.base[:12]}` -> `{chain.head[:12]}`" in body
