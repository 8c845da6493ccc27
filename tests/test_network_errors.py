"""A fetch that fails says why, in git's words: a server that was not reached is not one that lacks the
commit. Real git against a port nobody listens on, a path with no repository, and a real repository
without the base; the URL's credentials never printed."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from forkctl.cli import cli
from tests.chain import make_chain, url
from tests.gitrepos import git


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))


def _closed_port() -> int:
    """A local TCP port that refuses connections (bound once, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _upstream_at(manifest: Path, upstream_url: str) -> None:
    data = yaml.safe_load(manifest.read_text())
    data["upstream"]["url"] = upstream_url
    manifest.write_text(yaml.safe_dump(data, sort_keys=False))


def _error(manifest: Path, *args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(cli, ["--manifest", str(manifest), *args, "--json"])
    return result.exit_code, json.loads(result.stdout)


@pytest.mark.parametrize("verb", [["check-pins"], ["publish", "--dry-run"], ["bump-bridge", "--dry-run"]])
def test_an_unreachable_upstream_is_said_with_gits_reason(tmp_path: Path, verb: list[str]) -> None:
    chain = make_chain(tmp_path)
    _upstream_at(chain.manifest, f"https://maintainer:s3cret-token@127.0.0.1:{_closed_port()}/up.git")
    code, payload = _error(chain.manifest, *verb)
    assert code == 2, payload
    said = payload["error"]
    assert said.startswith("could not reach https://"), said
    assert "unable to access" in said  # git's own reason, not a guess
    assert "is not in" not in said
    assert "s3cret-token" not in json.dumps(payload)
    assert "git ls-remote" in payload["hint"]
    flag = "--repo" if verb[0] == "publish" else "--upstream-repo"  # the verb's own name for it
    assert f"pass {flag} PATH" in payload["hint"]


def test_a_path_without_a_repository_is_not_reached_either(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    _upstream_at(chain.manifest, url(tmp_path / "no-such-repo.git"))
    code, payload = _error(chain.manifest, "check-pins")
    assert code == 2, payload
    assert payload["error"].startswith("could not reach file://"), payload
    assert "does not appear to be a git repository" in payload["error"]


def test_a_reachable_upstream_without_the_base_says_it_is_not_there(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    empty = tmp_path / "other-upstream.git"
    git(tmp_path, "init", "-q", "--bare", str(empty))
    git(
        tmp_path,
        "--git-dir",
        str(empty),
        "fetch",
        "-q",
        url(chain.upstream),
        f"{chain.base_parent}:refs/heads/main",
    )
    _upstream_at(chain.manifest, url(empty))
    code, payload = _error(chain.manifest, "check-pins")
    assert code == 2, payload
    assert payload["error"].startswith(f"the manifest base {chain.base} is not in file://"), payload
    assert "(git: " in payload["error"]
    assert "--upstream-repo PATH" in payload["hint"]
