"""A credential in a URL never leaves forkctl: not on stdout or stderr, not in --json, annotations or the
step summary, not in the cache's config, not in a consumer's .gitmodules, commits or pushed objects.

The manifest names the fork by a `https://forkctl:<token>@example.invalid/fork.git` URL that the test's
git config rewrites (`url.<path>.insteadOf`) to the local bare repository, so the whole check and bump
really run through the credentialed URL.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from forkctl.cli import cli
from tests.chain import Chain, make_chain, url
from tests.gitrepos import git

TOKEN = "ghp_PLANTEDtoken0123456789abcdef"


def credentialed(name: str) -> str:
    return f"https://forkctl:{TOKEN}@example.invalid/{name}.git"


@pytest.fixture
def chain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Chain:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    made = make_chain(tmp_path)
    config = tmp_path / "gitconfig"
    base_config = Path(os.environ["GIT_CONFIG_GLOBAL"]).read_text()
    # Both spellings reach the fork: with the token (the manifest's) and without (what a consumer's
    # .gitmodules gets, fetched in real life through a credential helper).
    rewrites = (
        f'[url "{url(made.fork)}"]\n\tinsteadOf = {credentialed("fork")}\n'
        f"\tinsteadOf = https://example.invalid/fork.git\n"
    )
    config.write_text(base_config + rewrites)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    data = yaml.safe_load(made.manifest.read_text())
    data["fork"]["url"] = credentialed("fork")
    made.manifest.write_text(yaml.safe_dump(data, sort_keys=False))
    return made


def invoke(chain: Chain, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--manifest", str(chain.manifest), *args])
    return result.exit_code, result.stdout + result.stderr


def everything_in(path: Path) -> bytes:
    """Every object and file of a repository (loose objects decompressed through git)."""
    objects = git(path, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)").split()
    contents = b"".join(
        subprocess.run(["git", "cat-file", "-p", sha], cwd=path, capture_output=True, check=True).stdout
        for sha in objects
    )
    files = b"".join(p.read_bytes() for p in path.rglob("*") if p.is_file() and "objects" not in p.parts)
    return contents + files


def test_a_planted_token_reaches_no_output_channel_and_no_repository(
    chain: Chain, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    outputs = []
    for args in (
        ("check-pins", "--github"),
        ("check-pins", "--json"),
        ("check-pins",),
        ("bump-bridge", "--through", "nemo-rl", "--push"),
        ("bump-bridge", "--through", "nemo-rl", "--push", "--json"),
        ("check-pins", "--json"),
    ):
        code, output = invoke(chain, *args)
        assert code in (0, 1, 2), output
        outputs.append(output)
    # The bump really went through the credentialed URLs: branches arrived on the bare remotes.
    assert git(chain.bridge, "for-each-ref", "refs/heads/forkctl/")
    assert git(chain.nemo, "for-each-ref", "refs/heads/forkctl/")
    assert any("***@example.invalid" in output for output in outputs)
    for output in outputs:
        assert TOKEN not in output
    assert TOKEN not in summary.read_text()
    for cached in (tmp_path / "cache").rglob("*"):  # config, FETCH_HEAD, logs, packs: every file
        if cached.is_file():
            assert TOKEN.encode() not in cached.read_bytes(), cached
    for repo in (chain.bridge, chain.nemo):
        assert TOKEN.encode() not in everything_in(repo)
    bumped = git(chain.bridge, "for-each-ref", "--format=%(refname)", "refs/heads/forkctl/").split()[0]
    assert "example.invalid/fork.git" in git(chain.bridge, "show", f"{bumped}:.gitmodules")


def test_an_unreachable_credentialed_url_is_reported_redacted(chain: Chain) -> None:
    data = yaml.safe_load(chain.manifest.read_text())
    data["fork"]["url"] = f"https://forkctl:{TOKEN}@unreachable.invalid/fork.git"
    chain.manifest.write_text(yaml.safe_dump(data, sort_keys=False))
    for args in (("check-pins", "--json"), ("check-pins", "--github"), ("bump-bridge", "--dry-run")):
        code, output = invoke(chain, *args)
        assert code in (1, 2), output
        assert TOKEN not in output
