"""Text for people fits: 120 columns in a log or a pipe, the terminal's width on a terminal; each finding
printed once; prose wrapped only between words, never inside a URL or a command; each fix on a line of
its own. Real chains (tests/chain.py) and a real pseudo-terminal."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from forkctl.cli import cli
from tests.chain import make_chain
from tests.toolkit import make_toolkit

ROOT = Path(__file__).resolve().parent.parent
COMMAND = re.compile(r"(?:git|gh|forkctl)\s[^(),;]*")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)


@pytest.fixture(autouse=True)
def _log_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests check the layout for a log's default width: `make test` sets $FORKCTL_LOG_WIDTH wide
    for every other test (tests/make_test_plugin.py)."""
    monkeypatch.delenv("FORKCTL_LOG_WIDTH", raising=False)


def _too_wide(text: str, width: int) -> list[str]:
    """Lines wider than `width` that could have been broken: a line may run past the width only when
    what it holds past its indent (and its `fix:` label) is one word or one command."""
    wide = []
    for line in text.splitlines():
        if len(line) <= width:
            continue
        body = line.strip().removeprefix("fix: ")
        if " " in body and not COMMAND.fullmatch(body.rstrip()):
            wide.append(line)
    return wide


def _flat(text: str) -> str:
    """The text as one line: what a wrap between words changes is gone."""
    return " ".join(text.split())


def _failing_chain_output(tmp_path: Path) -> tuple[str, dict]:
    chain = make_chain(tmp_path)  # the Bridge pins the plain upstream base, its .gitmodules names upstream
    args = ["--manifest", str(chain.manifest), "check-pins"]
    text = CliRunner().invoke(cli, args).stdout
    payload = json.loads(CliRunner().invoke(cli, [*args, "--json"]).stdout)
    assert payload["ok"] is False
    return text, payload


def test_check_pins_fits_a_log_and_says_each_finding_once(tmp_path: Path) -> None:
    text, payload = _failing_chain_output(tmp_path)
    assert _too_wide(text, 120) == [], text
    flat = _flat(text)
    failing = [f for link in payload["links"] for f in link["findings"] if f["status"] != "OK"]
    assert len(failing) >= 3
    for finding in failing:
        assert flat.count(_flat(finding["message"])) == 1, (finding["message"], text)
        assert flat.count(_flat(f"fix: {finding['fix']}")) == 1, (finding["fix"], text)
        # Each command of a fix is whole on one line, as the JSON has it.
        for command in COMMAND.findall(finding["fix"]):
            assert any(command.strip() in line for line in text.splitlines()), (command, text)
    for link in payload["links"]:
        assert any(link["url"] in line for line in text.splitlines()), (link["url"], text)


def test_a_stale_patch_keeps_gits_lines_under_its_error(tmp_path: Path) -> None:
    """git's own `error: patch failed` lines belong to the one finding: indented under it, not
    printed as findings of their own."""
    toolkit = make_toolkit(tmp_path / "t")
    new_base = toolkit.upstream.commit(
        "upstream edits a.py", {"megatron/core/a.py": "def a():\n    return 42\n"}
    )
    data = toolkit.manifest_data()
    data["upstream"]["base"] = new_base
    toolkit.write_manifest(data)
    result = CliRunner().invoke(
        cli, ["--manifest", str(toolkit.manifest), "status", "--repo", str(toolkit.upstream.path)]
    )
    assert result.exit_code == 1, result.stdout
    lines = result.stdout.splitlines()
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1, result.stdout
    assert errors[0].count(toolkit.patch_files[0].name) == 1  # named once, not as file and message
    assert any(line.startswith("  error: patch failed: megatron/core/a.py") for line in lines), result.stdout
    assert _too_wide(result.stdout, 120) == [], result.stdout


def _on_a_terminal(args: list[str], columns: int, env: dict[str, str]) -> str:
    """forkctl's stdout on a pseudo-terminal `columns` wide, colours and all."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    process = subprocess.Popen(
        [sys.executable, "-m", "forkctl", *args],
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed: the command is done
            break
        if not chunk:
            break
        chunks.append(chunk)
    process.wait(timeout=120)
    os.close(leader)
    return ANSI.sub("", b"".join(chunks).decode(errors="replace")).replace("\r\n", "\n")


def test_on_a_100_column_terminal_nothing_is_cut_inside_a_url(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "FORKCTL_CACHE": str(tmp_path / "cache"),
        "TERM": "xterm-256color",
    }
    env.pop("COLUMNS", None)
    text = _on_a_terminal(["--manifest", str(chain.manifest), "check-pins"], 100, env)
    assert "check-pins: FAILED" in text, text
    assert _too_wide(text, 100) == [], text
    payload = json.loads(
        CliRunner().invoke(cli, ["--manifest", str(chain.manifest), "check-pins", "--json"]).stdout
    )
    for link in payload["links"]:
        assert any(link["url"] in line for line in text.splitlines()), (link["url"], text)
    flat = _flat(text)
    for finding in (f for link in payload["links"] for f in link["findings"] if f["status"] != "OK"):
        assert flat.count(_flat(finding["message"])) == 1, (finding["message"], text)


def test_an_error_on_stderr_fits_a_log_with_its_url_and_gits_words_whole(tmp_path: Path) -> None:
    """The error that ends a command (here git's reason for an unreachable upstream, with a long URL)
    is wrapped between words for a log, as the report is."""
    chain = make_chain(tmp_path)
    data = yaml.safe_load(chain.manifest.read_text())
    long_url = "https://127.0.0.1:9/" + "a-rather-long-organisation-name/" * 3 + "Megatron-LM.git"
    data["upstream"]["url"] = long_url
    chain.manifest.write_text(yaml.safe_dump(data, sort_keys=False))
    result = CliRunner().invoke(cli, ["--manifest", str(chain.manifest), "check-pins"])
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert _too_wide(result.stderr, 120) == [], result.stderr
    assert any(line.startswith("forkctl: error: could not reach") for line in lines), result.stderr
    assert any(long_url in line for line in lines), result.stderr
    assert "unable to access" in _flat(result.stderr)


def test_a_log_width_can_be_set_and_a_nonsense_one_is_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """$FORKCTL_LOG_WIDTH sets the width of text written to a log or a pipe (40 columns or more).

    The manifest is named relative to the test's folder: a path is never broken, so an absolute one
    whose first word (the temp folder up to its first space) is long would make its own line longer
    than any width, as it did for a user whose temp folder's name is longer than root's."""
    monkeypatch.chdir(tmp_path)
    manifest = Path("missing") / ("a folder with spaces " * 12).strip() / "manifest.yaml"
    widths = {}
    for value in ("", "300", "7", "wide"):
        monkeypatch.setenv("FORKCTL_LOG_WIDTH", value)
        result = CliRunner().invoke(cli, ["--manifest", str(manifest), "lint"])
        assert result.exit_code == 2, result.output
        widths[value] = max(len(line) for line in result.stderr.splitlines())
    assert widths["300"] > 120 >= widths[""] == widths["7"] == widths["wide"], widths
