"""Bad input and odd environments end with a clear message and an exit code, never a traceback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.seriesrepo import SeriesSetup, clone, make_series, run_json

CLI = "import sys; from forkctl.cli import main; sys.argv[0] = 'forkctl'; main()"


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SeriesSetup:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    return make_series(tmp_path)


def forkctl(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """The real CLI in a child process (so nothing in the test runner catches what would escape)."""
    proc = subprocess.run(
        [sys.executable, "-c", CLI, *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent), **(env or {})},
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize(
    "content",
    [
        "schema: 1\n".encode("utf-16"),
        b"\x89PNG\r\n\x1a\n\x00\x00binary",
        b"schema: 1\nupstream: \xff\xfe\n",
        b"a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
        b"c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
        b"e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\n",
    ],
    ids=["utf16", "binary", "not-utf8", "alias-bomb"],
)
def test_unreadable_manifests_exit_2_with_a_message(tmp_path: Path, content: bytes) -> None:
    manifest = tmp_path / "manifest.yaml"
    manifest.write_bytes(content)
    for args in (["lint"], ["status", "--json"]):
        code, out, err = forkctl("--manifest", str(manifest), *args, cwd=tmp_path)
        assert code == 2, (out, err)
        assert "Traceback" not in out + err
        assert "manifest.yaml" in out + err
    code, out, _ = forkctl("--manifest", str(manifest), "lint", "--json", cwd=tmp_path)
    assert json.loads(out)["ok"] is False


def test_corrupt_state_file_then_abort_cleans_up(setup: SeriesSetup, tmp_path: Path) -> None:
    repo = clone(setup.upstream, tmp_path / "r", bare=True)
    state = repo.path / "forkctl" / "build-state.json"
    state.parent.mkdir()
    state.write_text('{"operation": "apply", "steps": [1, 2')
    code, data = run_json(setup, "apply", "--base", setup.base, "--repo", str(repo.path))
    assert code == 2 and "unreadable" in data["error"], data
    code, out, err = forkctl(
        "--manifest", str(setup.manifest), "apply", "--abort", "--repo", str(repo.path), "--json"
    )
    assert code == 0, (out, err)
    assert json.loads(out)["aborted"] is True
    assert not state.exists()
    code, data = run_json(setup, "apply", "--base", setup.base, "--repo", str(repo.path))
    assert code == 0, data


def test_a_state_field_of_the_wrong_type_is_unreadable_not_a_crash(
    setup: SeriesSetup, tmp_path: Path
) -> None:
    """Well-formed JSON with every key, edited by hand: a field of the wrong type is refused when the
    state is read (exit 2, the way out named), not where the field is first used (exit 3)."""
    repo = clone(setup.upstream, tmp_path / "r", bare=True)
    state = repo.path / "forkctl" / "build-state.json"
    state.parent.mkdir()
    fields = {
        "operation": "apply",
        "manifest": str(setup.manifest),
        "base": setup.base,
        "series_digest": "0" * 64,
        "files": [],
        "branch": "farai/main",
        "force": False,
        "old_tip": None,
        "worktree": str(tmp_path / "w"),
        "conflict_index": "the first one",
    }
    state.write_text(json.dumps(fields))
    code, data = run_json(setup, "apply", "--continue", "--repo", str(repo.path))
    assert code == 2 and "unreadable" in data["error"], data


def test_unwritable_step_summary_is_a_warning(setup: SeriesSetup, tmp_path: Path) -> None:
    summary = tmp_path / "no-such-dir" / "summary.md"
    code, out, err = forkctl(
        "--manifest", str(setup.manifest), "lint", "--github", env={"GITHUB_STEP_SUMMARY": str(summary)}
    )
    assert code == 0, (out, err)
    assert "cannot write the step summary" in out + err
    assert "Traceback" not in out + err


def test_deleted_working_directory(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    code = (
        "import os, sys; os.chdir(sys.argv[1]); os.rmdir(sys.argv[1]); "
        "sys.argv = ['forkctl', 'lint']; from forkctl.cli import main; main()"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(gone)],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert "current directory no longer exists" in proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr


def test_deeply_nested_or_linked_evidence_is_bad_input(tmp_path: Path, repo_root: Path) -> None:
    copy = tmp_path / "toolkit"
    for name in ("manifest.yaml", "patches", "tests", "validation"):
        source = repo_root / name
        if source.is_dir():
            shutil.copytree(source, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, copy / name)
    # The current series' evidence is what the gate parses (and must refuse cleanly), committed or not.
    code, out, _ = forkctl("--manifest", str(copy / "manifest.yaml"), "status", "--json")
    target = copy / "validation" / f"{json.loads(out)['series_digest']}.json"
    target.unlink(missing_ok=True)
    target.write_text("[" * 200_000 + "]" * 200_000)
    code, out, err = forkctl("--manifest", str(copy / "manifest.yaml"), "gate", "--json")
    assert code == 2, (out, err)
    assert "nested too deeply" in json.loads(out)["error"]
    target.unlink()
    target.symlink_to("/dev/zero")
    code, out, err = forkctl("--manifest", str(copy / "manifest.yaml"), "gate", "--json")
    assert code == 2, (out, err)
    assert "regular file" in json.loads(out)["error"]


def test_an_unexpected_error_becomes_exit_3_with_its_traceback_in_a_log() -> None:
    from forkctl.cli.kit import unexpected_error
    from forkctl.errors import EXIT_UNEXPECTED

    try:
        raise ValueError("boom")
    except ValueError as exc:
        error = unexpected_error("lint", exc)
    assert error.exit_code == EXIT_UNEXPECTED == 3
    assert error.message.startswith("unexpected error: ValueError: boom; the traceback is in ")
    log = Path(error.message.rsplit(" ", 1)[-1])
    assert "Traceback" in log.read_text() and "boom" in log.read_text()
    log.unlink()


def test_a_crash_log_holds_no_credential_and_records_the_versions(tmp_path: Path) -> None:
    """The log users are asked to attach: a token on the command line or in the error is redacted,
    and the versions a bug report needs are there."""
    import platform

    from forkctl import __version__

    token = "ghp_CRASHtoken0123456789abcdef=="
    script = (
        "import sys; from forkctl.cli.kit import unexpected_error; "
        f"e = unexpected_error('check-pins', ValueError('https://x:{token}@example.invalid/f.git')); "
        "print(e.message.rsplit(' ', 1)[-1])"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent), "TMPDIR": str(tmp_path)}
    argv = [
        sys.executable,
        "-c",
        script,
        "--manifest",
        f"https://u:{token}@example.invalid/t.git@main:m.yaml",
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=True)
    log = Path(proc.stdout.strip())
    text = log.read_text()
    assert token not in text and token[:-2] not in text
    assert "***@example.invalid" in text and "ValueError" in text
    git_version = subprocess.run(["git", "--version"], capture_output=True, text=True, check=True).stdout
    for version in (f"forkctl {__version__}", f"Python {platform.python_version()}", git_version.strip()):
        assert version in text


@pytest.mark.parametrize(
    "subject", ["=?UTF-8?q?fix=FF=FE=28?=", "=?UTF-8?b?!!!notbase64?=", "=?no-such-charset?q?x?="]
)
def test_badly_encoded_subjects_are_reported(setup: SeriesSetup, subject: str) -> None:
    first = setup.patch_files[0]
    lines = first.read_bytes().split(b"\n")
    lines = [b"Subject: " + subject.encode() if line.startswith(b"Subject: ") else line for line in lines]
    first.write_bytes(b"\n".join(lines))
    for args in (["lint"], ["status", "--json"]):
        code, out, err = forkctl("--manifest", str(setup.manifest), *args)
        assert code in (1, 2), (out, err)
        assert "Traceback" not in out + err
        assert "not validly encoded" in out + err
        assert first.name in out + err


def test_a_patch_file_linked_outside_the_repository_is_refused_and_never_written_through(
    setup: SeriesSetup, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_bytes(setup.patch_files[0].read_bytes())
    setup.patch_files[0].unlink()
    setup.patch_files[0].symlink_to(outside)
    before = outside.read_bytes()
    code, out, err = forkctl("--manifest", str(setup.manifest), "lint")
    assert code in (1, 2), (out, err)
    assert "regular file" in out + err
    dev = setup.dev.path
    code, out, err = forkctl(
        "--manifest", str(setup.manifest), "export", "--repo", str(dev), "--from", "series"
    )
    assert "Traceback" not in out + err
    assert outside.read_bytes() == before  # the file the link points to is never written


def test_an_error_under_json_is_one_document_of_the_report_shape(setup: SeriesSetup, tmp_path: Path) -> None:
    """A failed command's JSON names the command and carries `problems`, like a report does."""
    bare = tmp_path / "empty.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    code, out, err = forkctl(
        "--manifest", str(setup.manifest), "apply", "--abort", "--repo", str(bare), "--json"
    )
    assert code == 2, err
    data = json.loads(out)
    assert data["command"] == "apply" and data["ok"] is False and data["schema_version"] == 1
    assert [p["message"] for p in data["problems"]] == [data["error"]]
    assert "no apply in progress" in data["error"] and data["exit_code"] == 2
    code, report = run_json(setup, "lint")
    assert code == 0 and {"command", "ok", "problems"} <= set(report)


def test_a_crash_outside_any_command_is_exit_3_without_a_traceback(tmp_path: Path) -> None:
    """A verb whose module is missing (a broken install) fails before any command runs: still exit 3,
    one line and the log file, no traceback on the terminal (and one JSON document under --json)."""
    script = (
        "import sys; from forkctl.cli import main, verbs; "
        "verbs.SUMMARIES['ghost'] = 'a verb whose module is missing'; sys.argv[0] = 'forkctl'; main()"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    for args, as_json in ((["ghost"], False), (["ghost", "--json"], True)):
        proc = subprocess.run(
            [sys.executable, "-c", script, *args], capture_output=True, text=True, env=env, check=False
        )
        assert proc.returncode == 3, proc.stderr
        assert "Traceback" not in proc.stdout + proc.stderr
        if as_json:
            data = json.loads(proc.stdout)
            assert data["exit_code"] == 3 and "ModuleNotFoundError" in data["error"]
        else:
            assert "unexpected error: ModuleNotFoundError" in proc.stderr
