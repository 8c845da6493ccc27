"""Output cannot carry commands (issue 23): data that forkctl prints is inert on every channel.

- log lines: GitHub's runner executes a line that starts with `::` (after leading whitespace) or holds
  the legacy `##[`; no data may do either, and forkctl's own annotation lines escape their values;
- Markdown (step summary, pull-request body): data is in code, where GitHub renders no HTML, mentions
  or issue references; a body fits GitHub's 65,536 characters whatever the range-diff holds;
- a printed shell fix, pasted, runs exactly the command shown.

The chain, the consumers' `.gitmodules` and the patches are real (tests/chain.py); forkctl runs as a
child process where the runner would read its stdout and stderr.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from forkctl.cli import cli
from tests.chain import BRIDGE_GITLINK, Chain, make_chain, url

PAYLOAD = "\n::stop-commands::x\n::notice::pwned <img src=https://t.example/p.png><h1>passed</h1>"
FORGED_NAME = "##[warning]forged ::notice::pwned"
OWN_ANNOTATION_RE = re.compile(r"::(error|warning|notice)(?: (?P<props>[^:]*))?::(?P<message>.*)")
PROPERTY_RE = re.compile(r"(file=[^,:\r\n]*|line=\d+)")

# CommonMark's code: fenced blocks (closed by the same fence) and inline spans (same backtick run).
_FENCED_RE = re.compile(r"^(?P<fence>`{3,})[^\n]*\n.*?^(?P=fence)[ \t]*$", re.M | re.S)
_SPAN_RE = re.compile(r"(?<!`)(?P<ticks>`+)(?!`)(?P<body>.+?)(?<!`)(?P=ticks)(?!`)", re.S)


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.chdir(tmp_path)


def outside_code(markdown: str) -> str:
    """What GitHub renders as Markdown and HTML: the text without fenced blocks and code spans."""
    return _SPAN_RE.sub("", _FENCED_RE.sub("", markdown))


def code_spans(markdown: str) -> list[str]:
    return [m.group("body").strip() for m in _SPAN_RE.finditer(_FENCED_RE.sub("", markdown))]


def rename_bridge_module(chain: Chain, name: str, url_: str) -> None:
    """The Bridge's `.gitmodules` section for the Megatron gitlink renamed to `name`, its url `url_`;
    committed on farai/main with the fork head pinned."""
    work = chain.bridge_work
    work.git(
        "config", "-f", ".gitmodules", "--rename-section", f"submodule.{BRIDGE_GITLINK}", f"submodule.{name}"
    )
    work.git("config", "-f", ".gitmodules", f"submodule.{name}.url", url_)
    chain.pin_bridge(chain.head)


def run_forkctl(chain: Chain, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "PYTEST_"))}
    env |= {"GITHUB_STEP_SUMMARY": str(tmp / "summary.md"), "GITHUB_WORKSPACE": str(tmp)}
    return subprocess.run(
        [sys.executable, "-m", "forkctl", "--manifest", str(chain.manifest), *args],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
    )


def test_a_gitmodules_url_and_name_cannot_issue_workflow_commands(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    rename_bridge_module(chain, FORGED_NAME, url(chain.fork) + PAYLOAD)
    result = run_forkctl(chain, tmp_path, "check-pins", "--github")
    assert result.returncode == 1, result.stdout + result.stderr
    output = result.stdout + result.stderr
    assert "stop-commands" in output and "forged" in output  # the data is shown, not dropped
    own = 0
    for line in output.splitlines():
        assert "##[" not in line, line
        if not line.lstrip().startswith("::"):
            continue
        match = OWN_ANNOTATION_RE.fullmatch(line)  # only forkctl's own annotations start with `::`
        assert match and line == line.lstrip(), line
        props = match.group("props")
        assert not props or all(PROPERTY_RE.fullmatch(p) for p in props.split(",")), line
        assert "\r" not in match.group("message")
        own += 1
    assert own >= 1


def test_the_step_summary_shows_html_from_data_inert(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    rename_bridge_module(chain, BRIDGE_GITLINK, url(chain.fork) + PAYLOAD)
    result = run_forkctl(chain, tmp_path, "check-pins", "--github")
    assert result.returncode == 1, result.stdout + result.stderr
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith("## forkctl check-pins: failed")
    rendered = outside_code(summary)
    assert "<img" not in rendered and "<h1>" not in rendered and "passed</h1>" not in rendered
    assert "stop-commands" not in rendered
    # The data is there, whole, in code.
    assert any("<img src=https://t.example/p.png><h1>passed</h1>" in span for span in code_spans(summary))


def test_a_printed_fix_pasted_runs_exactly_the_command_shown(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    name = "$(touch PWNED) `touch PWNED2`; touch PWNED3"
    rename_bridge_module(chain, name, "https://example.com/other/Megatron-LM.git")
    result = CliRunner().invoke(cli, ["--manifest", str(chain.manifest), "check-pins", "--json"])
    payload = json.loads(result.stdout)
    fixes = [f["fix"] for link in payload["links"] for f in link["findings"] if f["kind"] == "url-other"]
    assert fixes, payload
    text = CliRunner().invoke(cli, ["--manifest", str(chain.manifest), "check-pins"]).stdout
    paste = tmp_path / "paste"
    paste.mkdir()
    pasted = []
    for fix in fixes:
        # The command people copy is the one printed in the JSON: whole, on its own line.
        assert f"fix: {fix}" in [line.strip() for line in text.splitlines()], text
        pasted.append(subprocess.run(["bash", "-c", fix], cwd=paste, capture_output=True, text=True))
    assert sorted(p.name for p in paste.iterdir()) == [".gitmodules"]  # nothing but the edit ran
    assert not any((tmp_path / f).exists() for f in ("PWNED", "PWNED2", "PWNED3"))
    assert all(run.returncode == 0 for run in pasted), [run.stderr for run in pasted]
    got = subprocess.run(
        ["git", "config", "-f", ".gitmodules", "--get", f"submodule.{name}.url"],
        cwd=paste,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert got == url(chain.fork)  # the argument arrived intact


def _describe(chain: Chain) -> dict:
    result = CliRunner().invoke(cli, ["--manifest", str(chain.manifest), "describe", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_a_patch_subject_in_the_describe_body_notifies_and_links_nobody(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    hostile = "@octocat #123 owner/repo#4 <b>x</b> ![t](https://t.example/p.png)"
    patch = chain.patches[0]
    patch.write_text(re.sub(r"^(Subject: .*)$", rf"\1 {hostile}", patch.read_text(), count=1, flags=re.M))
    body = _describe(chain)["body"]
    rendered = outside_code(body)
    for live in ("@octocat", "#123", "owner/repo#4", "<b>", "![t]"):
        assert live not in rendered, live
    assert any(span.endswith(hostile) for span in code_spans(body))  # shown whole, in code


@pytest.mark.slow
def test_a_huge_range_diff_still_fits_a_pull_request_body(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    work = chain.fork_work()
    work.git("checkout", "-q", "--detach", chain.base)
    for number in range(20):  # 20 commits of 10,000-character subjects: a 200,000+ character range-diff
        work.commit(f"old {number} " + "y" * 10_000, {f"old{number}.txt": f"{number}\n"})
    work.git("push", "-q", "origin", "HEAD:refs/heads/old-series")
    chain.pin_bridge(work.head())
    payload = _describe(chain)
    whole, body = payload["parts"]["range_diff"], payload["body"]
    assert len(whole) > 200_000
    assert len(body.encode("utf-16-le")) // 2 < 65_536
    assert "The range-diff is cut here" in body and "parts.range_diff" in body
    assert body.rstrip().endswith("keeps it current.</sub>")  # the parts after the range-diff are kept
    assert whole[:5_000] in body  # what is shown is the range-diff's start, cut by characters


def test_a_printed_git_fetch_fix_quotes_the_branch(tmp_path: Path) -> None:
    """A consumer branch from the manifest (git accepts `$`, `(`, `{`) is quoted in the fetch fix."""
    chain = make_chain(tmp_path)
    branch = "farai/x$(touch${IFS}PWNED)"
    data = yaml.safe_load(chain.manifest.read_text())
    data["consumers"][0]["branch"] = branch
    chain.manifest.write_text(yaml.safe_dump(data, sort_keys=False))
    args = ["--manifest", str(chain.manifest), "bump-bridge", "--dry-run", "--json"]
    result = CliRunner().invoke(cli, [*args, "--bridge-repo", str(chain.bridge_work.path)])
    hint = json.loads(result.stdout)["hint"]
    command, _, rest = hint.partition(" in that clone")
    assert rest, hint
    paste = tmp_path / "paste"
    subprocess.run(["git", "init", "-q", str(paste)], check=True)
    subprocess.run(["bash", "-c", command], cwd=paste, capture_output=True)  # no origin: git fails
    assert not (paste / "PWNED").exists()
    assert shlex.split(command) == ["git", "fetch", "origin", branch]


def test_a_printed_branch_delete_fix_quotes_the_branch(tmp_path: Path) -> None:
    """The bump branch (its prefix from the manifest) is quoted in the `git branch -D` fix."""
    chain = make_chain(tmp_path)
    data = yaml.safe_load(chain.manifest.read_text())
    data["fork"]["bump_branch_prefix"] = "bump$(touch${IFS}PWNED)-"
    chain.manifest.write_text(yaml.safe_dump(data, sort_keys=False))
    branch = f"bump$(touch${{IFS}}PWNED)-{chain.head[:12]}"
    chain.bridge_work.git("branch", branch, "HEAD~0")  # taken, at another commit than the bump's
    chain.pin_bridge(chain.base, files={"later.txt": "1\n"})  # farai/main moves on: the branch is stale
    args = ["--manifest", str(chain.manifest), "bump-bridge", "--json"]
    result = CliRunner().invoke(cli, [*args, "--bridge-repo", str(chain.bridge_work.path)])
    hint = json.loads(result.stdout)["hint"]
    command = re.fullmatch(r"merge farai/main into it, or delete it \((.*)\), then rerun", hint).group(1)
    paste = tmp_path / "paste"
    subprocess.run(["git", "init", "-q", str(paste)], check=True)
    subprocess.run(["bash", "-c", command], cwd=paste, capture_output=True)  # no such branch: git fails
    assert not (paste / "PWNED").exists()
    assert shlex.split(command) == ["git", "-C", str(chain.bridge_work.path), "branch", "-D", branch]
