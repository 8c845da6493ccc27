"""A command's exit code comes from its problems alone: 1 exactly when the report holds an error (each
saying what failed and how to fix it), else 0; the JSON's `ok` says the same."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from forkctl import report
from forkctl.chain.checks import check_chain
from forkctl.chain.forkhead import fork_context
from forkctl.chain.sources import Source
from forkctl.demo.chain import DemoChain, Flow
from forkctl.demo.package import Installed
from forkctl.manifest import load
from forkctl.report import Level, Problem, Report
from tests.chain import check_pins_json, make_chain, use_private_cache
from tests.seriesrepo import clone, insert_patch, make_series, make_stale_series, run_json


def assert_explained(code: int, data: dict) -> None:
    """Exit 1 exactly when `problems` holds an error, each error with a message and a fix."""
    errors = [p for p in data["problems"] if p["level"] == "error"]
    assert code in (0, 1), data
    assert (code == 1) == bool(errors), (code, data["problems"])
    assert data["ok"] is (code == 0), (code, data["ok"])
    for problem in errors:
        assert problem["message"].strip() and problem.get("hint", "").strip(), problem


def _payload(out: report.Report) -> dict:
    return json.loads(report.to_json(out))


# --- the Report ------------------------------------------------------------------------------------


def test_notices_and_warnings_exit_0_an_error_exits_1() -> None:
    out = Report(command="x")
    out.problems.append(Problem("the fork branch is behind", level=Level.NOTICE))
    out.fail(Problem("gh is not on PATH", level=Level.WARNING, hint="install gh"))
    assert (out.code, out.ok, _payload(out)["ok"]) == (0, True, True)
    # An error recorded any way (fail, or appended) is what makes the exit 1.
    out.problems.append(Problem("the pin is wrong", hint="bump it"))
    assert (out.code, out.ok, _payload(out)["ok"]) == (1, False, False)
    assert_explained(out.code, _payload(out))


def test_the_exit_code_cannot_be_set_beside_the_problems() -> None:
    """No second source of truth: `ok` is read from the problems, and there is no exit code to set."""
    out = Report(command="x")
    with pytest.raises(AttributeError):
        out.ok = False  # type: ignore[misc]
    with pytest.raises(TypeError):
        Report(command="x", exit_code=1)  # type: ignore[call-arg]
    assert "ok" not in msgspec.structs.fields(Report) and "exit_code" not in [
        f.name for f in msgspec.structs.fields(Report)
    ]
    assert out.code == 0


# --- each verb's failing outcome -------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_private_cache(tmp_path, monkeypatch)


def test_apply_refusing_a_stale_patch(tmp_path: Path) -> None:
    setup, _, _ = make_stale_series(tmp_path / "s")
    repo = clone(setup.upstream, tmp_path / "r", bare=True)
    code, data = run_json(setup, "apply", "--base", setup.base, "--repo", str(repo.path))
    assert code == 1 and data["stale"], data
    assert_explained(code, data)


def _exported_and_applied(tmp_path: Path) -> tuple[Any, Any]:
    """A series exported from its dev branch and applied to a bare clone of upstream (the fork)."""
    setup = make_series(tmp_path / "s")
    assert run_json(setup, "export", "--repo", str(setup.dev.path), "--branch", "series")[0] == 0
    fork = clone(setup.upstream, tmp_path / "fork", bare=True)
    code, data = run_json(setup, "apply", "--base", setup.base, "--repo", str(fork.path))
    assert_explained(code, data)
    assert code == 0
    return setup, fork


def test_port_stopping_on_a_conflict_and_export_check_of_a_changed_file(tmp_path: Path) -> None:
    setup, fork = _exported_and_applied(tmp_path)
    code, data = run_json(setup, "export", "--repo", str(fork.path), "--check")
    assert (code, data["changed"]) == (0, []), data
    assert_explained(code, data)
    first = setup.root / setup.manifest_data()["series"][0]["file"]
    first.write_bytes(first.read_bytes().replace(b"Why: patch 1.", b"Why: edited."))
    code, data = run_json(setup, "export", "--repo", str(fork.path), "--check")
    assert code == 1 and data["changed"], data
    assert_explained(code, data)
    new_base = setup.upstream.commit(
        "upstream edits helper",
        {"megatron/core/a.py": "def a():\n    return 1\n\n\ndef helper():\n    return 'up'\n"},
    )
    git_fork = clone(setup.upstream, tmp_path / "fork2", bare=True)
    assert run_json(setup, "apply", "--base", setup.base, "--repo", str(git_fork.path))[0] == 0
    code, data = run_json(setup, "port", "--onto", new_base, "--repo", str(git_fork.path))
    assert code == 1 and data["conflict"], data
    assert_explained(code, data)


def test_export_check_of_a_patch_the_branch_no_longer_has(tmp_path: Path) -> None:
    setup, fork = _exported_and_applied(tmp_path)
    insert_patch(
        setup,
        1,
        setup.base,
        "feat(core): b returns 5",
        {"megatron/core/b.py": "B = 5\n"},
        "2026-02-01T12:00:00+00:00",
    )
    code, data = run_json(setup, "export", "--repo", str(fork.path), "--check")
    assert code == 1 and data["stale"], data
    assert_explained(code, data)


def test_check_pins_mismatch_and_a_failed_demo(tmp_path: Path) -> None:
    """The chain pins the plain upstream base: check-pins fails with its problems, and a demo whose
    bumped chain still fails that check (run_flow's Flow when the planned chain does not pass) says
    in `problems` what failed and how to fix it, not only in its verdict line."""
    chain = make_chain(tmp_path / "chain")
    code, data = check_pins_json(chain)
    assert code == 1, data
    assert_explained(code, data)

    from forkctl.commands import demo  # the demo's report of a flow whose last check fails

    manifest = load(chain.manifest)
    fork = fork_context(manifest, None, lambda _: None)
    failing = check_chain(manifest, [Source(c) for c in manifest.consumers], fork=fork)
    assert not failing.ok
    built = DemoChain(
        tmp_path / "chain",
        Installed("megatron", tmp_path, "megatron-core", None),
        chain.toolkit,
        manifest,
        chain.base,
        chain.head,
    )
    flow = Flow(fork, failing, [], failing, failing, "forkctl/bump-megatron-demo")
    out = demo._report(built, flow, kept=False)
    data = _payload(out)
    assert out.code == 1 and "demo: FAILED" in data["verdict"], data
    assert_explained(out.code, data)
    assert any("after the bump" in p["message"] for p in data["problems"]), data["problems"]
    # People read the same report: the verdict line, the failing rows once in the "after" tables.
    text = report.plain_text(out)
    assert "demo: FAILED: after the bump check-pins still fails" in text
    assert "error:" not in text
