"""What the CLI imports before it does anything, and what it prints to a pipe.

`forkctl --help` must not import a verb, the manifest schema, YAML, rich or git code; `lint` and
`status` printing to a pipe must not import rich. These are the imports that made start-up cost a
second; the benchmark (bench/startup_bench.py) times it, these tests hold the line on what is loaded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from forkctl.cli import cli, verbs
from tests import budget
from tests.probe import imported, probe
from tests.toolkit import make_toolkit

ROOT = Path(__file__).resolve().parent.parent
STARTUP = "bench/startup_bench.py, median of 15 runs, 2026-12-02T02:59Z"


def _imported(tmp_path: Path, *args: str) -> tuple[set[str], str]:
    """The modules a `forkctl ARGS` process had imported when it exited, and its stdout (at a width of
    100 columns, whatever the width of the terminal that runs the tests: `--help` wraps to it)."""
    proc, modules = imported(tmp_path, *args, env={"COLUMNS": "100"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    return modules, proc.stdout


def _heavy(modules: set[str], roots: tuple[str, ...]) -> set[str]:
    return {m for m in modules if m.split(".")[0] in roots or m.startswith(roots)}


@pytest.mark.budget(
    f"`forkctl --help` starts in 0.097 s, target 0.15 s ({STARTUP}): it imports no verb, schema, YAML, "
    "rich or git code, the imports that once made a start cost a second"
)
def test_help_imports_no_verb_and_nothing_heavy(tmp_path: Path) -> None:
    modules, out = _imported(tmp_path, "--help")
    assert "forkctl.cli" in modules  # the probe works
    budget.none_of("verbs imported by --help", {m for m in modules if m.startswith("forkctl.commands.")})
    heavy = ("rich", "yaml", "msgspec", "pydantic", "forkctl.manifest", "forkctl.report", "forkctl.git")
    budget.none_of("heavy modules imported by --help", _heavy(modules, heavy))
    for name, summary in verbs.SUMMARIES.items():
        assert f"{name}" in out and summary[:40] in out


@pytest.mark.budget(
    f"`forkctl lint` / `status` to a pipe start in 0.145 / 0.147 s, target 0.25 s ({STARTUP}): rich, "
    "which only colours a terminal, is not imported"
)
def test_lint_and_status_to_a_pipe_do_not_import_rich(tmp_path: Path) -> None:
    toolkit = make_toolkit(tmp_path)
    for verb in ("lint", "status"):
        modules, out = _imported(tmp_path, "--manifest", str(toolkit.manifest), verb)
        assert f"forkctl.commands.{verb}" in modules
        budget.none_of(f"rich or pydantic modules imported by {verb}", _heavy(modules, ("rich", "pydantic")))
        assert out.strip(), verb


@pytest.mark.budget(
    f"`forkctl lint` / `status` start in 0.145 / 0.147 s, target 0.25 s ({STARTUP}); the email package "
    "alone cost them 26-33 ms (forkctl/mail.py)"
)
def test_lint_and_status_load_no_gpu_or_mail_code(tmp_path: Path) -> None:
    """A manifest with allowed signers is checked without the signing module (ssh-keygen, tempfile), and
    plain ASCII patches are read without the email package (socket, calendar, its parser)."""
    toolkit = make_toolkit(tmp_path)
    data = toolkit.manifest_data()
    data["validation"]["allowed_signers"] = ["runner@forkctl ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExample"]
    toolkit.write_manifest(data)
    for verb in ("lint", "status"):
        modules, out = _imported(tmp_path, "--manifest", str(toolkit.manifest), verb)
        assert out.strip(), verb
        budget.none_of(
            f"GPU or mail modules imported by {verb}",
            _heavy(modules, ("forkctl.gpu", "email", "socket", "calendar")),
        )
        # a local --manifest is no URL spec
        budget.none_of(f"remote-manifest code imported by {verb}", {"forkctl.manifest.remote"} & modules)


@pytest.mark.budget(
    f"start-up of lint, status and a re-apply ({STARTUP}): each dataclass costs 1.5-2.5 ms to build, a "
    "msgspec struct about 0.05 ms (docs/architecture.md, Why these choices)"
)
def test_lint_status_and_a_reapply_define_no_dataclass(tmp_path: Path) -> None:
    """Building a dataclass execs its generated methods (1.5-2.5 ms each here): the records on these
    paths are msgspec structs, so the `dataclasses` module is never even imported."""
    toolkit = make_toolkit(tmp_path)
    apply = ("apply", "--base", toolkit.base, "--repo", str(toolkit.upstream.path), "--branch", "again")
    _imported(tmp_path, "--manifest", str(toolkit.manifest), *apply)  # creates the branch
    for args in (("lint",), ("status",), apply):
        modules, out = _imported(tmp_path, "--manifest", str(toolkit.manifest), *args)
        assert f"forkctl.commands.{args[0]}" in modules and out.strip(), args
        budget.none_of(f"the dataclasses module imported by {args[0]}", {"dataclasses"} & modules)


@pytest.mark.budget(
    "the interpreter's exit: its shutdown collection over the start-up objects took 34 ms, 9 ms with them "
    "frozen (docs/architecture.md, Why these choices; the development machine)"
)
@pytest.mark.parametrize("args", [("--help",), ("lint",), ("no-such-verb",)], ids=["help", "lint", "usage"])
def test_the_process_leaves_its_objects_to_the_os_at_exit(tmp_path: Path, args: tuple[str, ...]) -> None:
    """Python's shutdown collects garbage over everything the imports made (25-30 ms here): by the
    time atexit runs, forkctl has frozen those objects, on success, failure and usage error alike."""
    toolkit = make_toolkit(tmp_path)
    _proc, frozen = probe(
        tmp_path, 'str(__import__("gc").get_freeze_count())', "--manifest", str(toolkit.manifest), *args
    )
    budget.at_least(f"objects frozen by `forkctl {args[0]}` before exit", int(frozen), 10_001)


def test_every_verb_loads_under_its_name_with_the_table_summary() -> None:
    for name, summary in verbs.SUMMARIES.items():
        command = verbs.load(name)
        assert command is not None and command.name == name
        assert command.get_short_help_str(limit=200) == summary
    assert verbs.load("stauts") is None


def test_plain_tables_keep_every_cell_whole(tmp_path: Path) -> None:
    """In a log, a long subject or fix command is printed whole on its line, never folded or cut."""
    toolkit = make_toolkit(tmp_path)
    long_subject = "feat: " + "a-very-long-subject-" * 12
    patch = toolkit.patch_files[0]
    lines = patch.read_text().splitlines(keepends=True)
    subject_at = next(i for i, line in enumerate(lines) if line.startswith("Subject: "))
    lines[subject_at] = f"Subject: [PATCH 1/2] {long_subject}\n"
    patch.write_text("".join(lines))
    result = CliRunner().invoke(cli, ["--manifest", str(toolkit.manifest), "status"])
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if line.startswith("0001"))
    assert long_subject in row
    data = json.loads(
        CliRunner().invoke(cli, ["--manifest", str(toolkit.manifest), "status", "--json"]).output
    )
    assert data["patches"][0]["subject"] == long_subject
    # Columns line up: the provenance cell starts under its heading.
    header = next(line for line in result.output.splitlines() if line.startswith("#"))
    newest = data["patches"][0]["provenance"][-1][:12]
    assert header.index("provenance") == row.index(newest)


def test_apply_shows_a_progress_bar_on_a_terminal_and_none_in_a_log(tmp_path: Path) -> None:
    """Long work reports progress on stderr when it is a terminal (a pseudo-terminal here), and keeps
    a log or a pipe clean."""
    import pty

    from tests.seriesrepo import make_series

    setup = make_series(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FORKCTL_CACHE": str(tmp_path / "cache"), "TERM": "xterm"}
    env["COLUMNS"] = "100"  # a terminal of common width, whatever runs the tests (a narrow one cuts the line)
    base_args = [
        "--manifest",
        str(setup.manifest),
        "apply",
        "--base",
        setup.base,
        "--repo",
        str(setup.upstream.path),
    ]
    primary, secondary = pty.openpty()
    proc = subprocess.run(
        [sys.executable, "-m", "forkctl", *base_args, "--branch", "on-a-tty"],
        stdout=subprocess.PIPE,
        stderr=secondary,
        env=env,
        cwd=ROOT,
        check=False,
    )
    os.close(secondary)
    seen = b""
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # the terminal's other end is closed: all read
            break
        if not chunk:
            break
        seen += chunk
    os.close(primary)
    assert proc.returncode == 0, seen
    count = len(setup.patch_files)
    assert f"applying {count} patches".encode() in seen and f"{count}/{count}".encode() in seen, seen
    piped = subprocess.run(
        [sys.executable, "-m", "forkctl", *base_args, "--branch", "in-a-log"],
        capture_output=True,
        env=env,
        cwd=ROOT,
        check=False,
    )
    assert piped.returncode == 0 and b"applying" not in piped.stderr, piped.stderr


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "forkctl", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )


def test_a_mistyped_verb_gets_a_suggestion_and_exit_2() -> None:
    done = _cli("stauts")
    assert done.returncode == 2
    assert "No such command 'stauts'. Did you mean 'status'?" in done.stderr


def test_a_usage_error_under_json_is_one_json_document() -> None:
    done = _cli("lint", "--bogus", "--json")
    assert done.returncode == 2, done.stderr
    data = json.loads(done.stdout)
    assert data == {
        "schema_version": 1,
        "command": "lint",
        "ok": False,
        "error": "No such option '--bogus'.",
        "hint": "see forkctl lint --help",
        "exit_code": 2,
        "problems": [
            {"message": "No such option '--bogus'.", "level": "error", "hint": "see forkctl lint --help"}
        ],
    }
    assert _cli("lint", "--bogus").stdout == ""  # without --json: click's own words, on stderr
