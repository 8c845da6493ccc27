"""Odd JSON from `gh` (issue 37, item 9): what `gh pr list` / `gh issue list` answer is data from a remote
service. A number past a float (`1e999`), one that is not a whole number, a list nested 100,000 deep, or
a document of the wrong shape is exit 2 with a message naming gh's answer; never a traceback (exit 3)
and never a hang. Through the CLI, with the recording stand-in for gh of tests/test_sync.py behind a
wrapper that answers every `list` with the odd document."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from forkctl.cli import cli
from tests.chain import make_chain
from tests.test_sync import FakeGh, bridge_upstream_pins

DEEP = "[" * 100_000 + "]" * 100_000
ITEM = {"number": 1, "url": "https://github.com/o/r/pull/1", "body": "", "author": {"login": "me"}}

ODD = {
    "huge-number": "1e999",
    "huge-item-number": json.dumps([{**ITEM, "number": 7}]).replace('"number": 7', '"number": 1e999'),
    "fractional-number": json.dumps([{**ITEM, "number": 1.5}]),
    "number-not-a-number": json.dumps([{**ITEM, "number": "NaN"}]),
    "deep-list": DEEP,
    "deep-in-an-item": json.dumps([{**ITEM, "body": "X"}]).replace('"X"', DEEP),
    "items-not-objects": "[1, 2]",
    "an-object": '{"number": 1}',
    "author-a-list": json.dumps([{**ITEM, "author": ["me"]}]),
}

WRAPPER = """#!{python}
import os, sys
if sys.argv[2:3] == ["list"]:
    sys.stdout.write(open({answer!r}).read())
    sys.exit(0)
os.execv({fake!r}, [{fake!r}, *sys.argv[1:]])
"""


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)


def odd_gh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: str) -> None:
    FakeGh(tmp_path, monkeypatch)
    (tmp_path / "gh-answer.json").write_text(answer)
    wrapper = tmp_path / "bin-odd" / "gh"
    wrapper.parent.mkdir()
    fake = str(tmp_path / "bin-gh" / "gh")
    wrapper.write_text(
        WRAPPER.format(python=sys.executable, answer=str(tmp_path / "gh-answer.json"), fake=fake)
    )
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper.parent}:{tmp_path / 'bin-gh'}")


@pytest.mark.parametrize("answer", list(ODD.values()), ids=list(ODD))
def test_sync_says_what_gh_answered_when_its_json_is_odd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: str
) -> None:
    chain = make_chain(tmp_path)
    odd_gh(tmp_path, monkeypatch, answer)
    bridge_upstream_pins(chain, chain.upstream_tip)
    result = CliRunner().invoke(cli, ["--manifest", str(chain.manifest), "sync", "--no-gate"])
    assert result.exit_code == 2, result.output[-3000:]
    said = " ".join(result.output.split())
    assert "gh pr list" in said and "JSON" in said, said[-2000:]
    assert "Traceback" not in result.output
