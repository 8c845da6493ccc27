"""Sign-off (issue 32, item 6): the consumers (Megatron-Bridge, NeMo-RL) ask for the DCO on every commit,
and a DCO check wants a `Signed-off-by:` that matches the commit's author.

- Bump commits carry the sign-off of the identity the caller (`--signoff`, FORKCTL_SIGNOFF: a bot in CI)
  or the manifest (`fork.bump_signoff`) names, and are authored by it; still reproducible.
- `lint` with `fork.require_signoff` accepts a verbatim pick of an upstream commit (proved with `--repo`:
  the commit is on upstream's branch there, the patch's message, author and change are its own) and
  says, for what it rejects, which patch, which sign-off is missing and how to fix it.

Real repositories (tests/chain.py, tests/toolkit.py), the real CLI in process, a private cache per test.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from forkctl.cli import cli
from forkctl.series import Patch, parse_patch
from tests.chain import forkctl_json, make_chain, use_private_cache
from tests.gitrepos import git
from tests.toolkit import Toolkit, flat, make_toolkit

BOT = "Fork Bot <fork-bot@example.com>"
MAINTAINER = "Fork Maintainer <maintainer@example.com>"


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_private_cache(tmp_path, monkeypatch)
    monkeypatch.delenv("FORKCTL_SIGNOFF", raising=False)


def _signoffs(repo: Path, sha: str) -> list[str]:
    """The Signed-off-by trailers of a commit, as git's own trailer parser reads them."""
    out = git(repo, "show", "-s", "--format=%(trailers:key=Signed-off-by,valueonly)", sha)
    return [line for line in out.splitlines() if line.strip()]


def _who(repo: Path, sha: str) -> tuple[str, str]:
    author, committer = git(repo, "show", "-s", "--format=%an <%ae>%n%cn <%ce>", sha).splitlines()
    return author, committer


@pytest.mark.slow
def test_bump_commits_are_signed_off_and_authored_by_the_identity_the_caller_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chain = make_chain(tmp_path)
    code, first = forkctl_json(
        chain, "bump-bridge", "--no-gate", "--through", "nemo-rl", "--push", "--signoff", BOT
    )
    assert code == 0, first["problems"]
    for bare, step in zip((chain.bridge, chain.nemo), first["steps"], strict=True):
        # What a DCO check reads: one sign-off, and it is the commit's author's.
        assert _signoffs(bare, step["commit"]) == [BOT]
        assert _who(bare, step["commit"]) == (BOT, BOT)
    # Reproducible: another machine's cache, the identity from the environment (a CI bot), same commits.
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "another-machine"))
    monkeypatch.setenv("FORKCTL_SIGNOFF", BOT)
    code, again = forkctl_json(chain, "bump-bridge", "--no-gate", "--through", "nemo-rl", "--push")
    assert code == 0, again["problems"]
    assert [s["commit"] for s in again["steps"]] == [s["commit"] for s in first["steps"]]
    assert [s["push"] for s in again["steps"]] == ["already there", "already there"]


def _set_fork(chain_manifest: Path, **values: str) -> None:
    data = yaml.safe_load(chain_manifest.read_text())
    data["fork"].update(values)
    chain_manifest.write_text(yaml.safe_dump(data, sort_keys=False))


@pytest.mark.slow
def test_the_manifest_names_the_bump_identity_and_the_caller_overrides_it(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    code, unsigned = forkctl_json(chain, "bump-bridge", "--no-gate", "--dry-run")
    assert code == 0, unsigned["problems"]
    _set_fork(chain.manifest, bump_signoff=BOT)
    code, overridden = forkctl_json(chain, "bump-bridge", "--no-gate", "--dry-run", "--signoff", MAINTAINER)
    assert code == 0, overridden["problems"]
    code, signed = forkctl_json(chain, "bump-bridge", "--no-gate", "--push")
    assert code == 0, signed["problems"]
    commit = signed["steps"][0]["commit"]
    assert _signoffs(chain.bridge, commit) == [BOT] and _who(chain.bridge, commit) == (BOT, BOT)
    # The identity is part of the commit: none, the manifest's and the caller's make three commits.
    assert len({unsigned["steps"][0]["commit"], commit, overridden["steps"][0]["commit"]}) == 3


@pytest.mark.parametrize("where", ["option", "environment", "manifest"])
def test_a_sign_off_that_is_not_name_and_email_is_bad_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    chain = make_chain(tmp_path)
    args = ["bump-bridge", "--no-gate", "--dry-run"]
    if where == "option":
        args += ["--signoff", "fork-bot"]
    elif where == "environment":
        monkeypatch.setenv("FORKCTL_SIGNOFF", "fork-bot")
    else:
        _set_fork(chain.manifest, bump_signoff="fork-bot")
    code, report = forkctl_json(chain, *args)
    assert code == 2, report
    text = flat(json.dumps(report["problems"]))
    assert "fork-bot" in text and "NAME <EMAIL>" in text
    if where == "manifest":
        assert "bump_signoff" in text


# --- lint: require_signoff and upstream's own commits -------------------------------------------------

UPSTREAM_AUTHOR = {"GIT_AUTHOR_NAME": "Upstream Author", "GIT_AUTHOR_EMAIL": "author@upstream.example"}
UPSTREAM_MESSAGE = (
    "fix(core): make b return three (#5400)\n\n"
    "Reviewed-by: Upstream Reviewer <reviewer@upstream.example>\n"
    "Signed-off-by: Upstream Merger <merger@upstream.example>\n"
)


def _with_upstream_pick(tmp: Path, amend: str | None = None) -> tuple[Toolkit, Path, str]:
    """A toolkit whose series (one own patch, signed off) ends with a `cherry-pick -x` of an upstream
    commit U made after the base; `amend` edits the pick's message. (toolkit, pick's file, U)"""
    toolkit = make_toolkit(tmp, patches=1)
    (own,) = toolkit.patch_files
    author = parse_patch(own)
    own.write_text(
        own.read_text().replace("(cherry picked from", f"{_own_signoff(author)}\n(cherry picked from", 1)
    )
    upstream = toolkit.upstream.path
    env = {**os.environ, **UPSTREAM_AUTHOR, "GIT_AUTHOR_DATE": "2026-02-03T10:00:00+00:00"}
    (upstream / "megatron" / "core" / "b.py").write_text("def b():\n    return 3\n")
    git(upstream, "commit", "-q", "-a", "-m", UPSTREAM_MESSAGE, env=env)
    picked = git(upstream, "rev-parse", "HEAD")
    git(upstream, "checkout", "-q", "feature")
    git(upstream, "cherry-pick", "-x", picked)
    if amend:
        message = git(upstream, "log", "-1", "--format=%B")
        git(upstream, "commit", "-q", "--amend", "-m", message.replace("three", amend, 1))
    pick = toolkit.upstream.format_patch("HEAD", toolkit.root / "patches" / "megatron-lm", 2)
    git(upstream, "checkout", "-q", "main")
    data = toolkit.manifest_data()
    data["series"].append({"file": str(pick.relative_to(toolkit.root))})
    data["fork"]["require_signoff"] = True
    toolkit.write_manifest(data)
    return toolkit, pick, picked


def _own_signoff(patch: Patch) -> str:
    return f"Signed-off-by: {patch.author_name} <{patch.author_email}>"


def _lint(toolkit: Toolkit, *args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(cli, ["--manifest", str(toolkit.manifest), "lint", "--json", *args])
    return result.exit_code, json.loads(result.output)


def _signoff_problems(report: dict) -> list[dict]:
    return [p for p in report["problems"] if "Signed-off-by" in p["message"]]


def test_lint_accepts_a_verbatim_upstream_pick_it_can_check_against_upstream(tmp_path: Path) -> None:
    toolkit, pick, picked = _with_upstream_pick(tmp_path)
    assert "Upstream Author" in pick.read_text() and f"cherry picked from commit {picked}" in pick.read_text()
    code, report = _lint(toolkit, "--repo", str(toolkit.upstream.path))
    assert code == 0, report["problems"]


def test_lint_says_which_patch_lacks_which_sign_off_and_how_to_fix_it(tmp_path: Path) -> None:
    toolkit, pick, picked = _with_upstream_pick(tmp_path)
    rel = str(pick.relative_to(toolkit.root))
    # Without an upstream clone, nothing proves the pick is upstream's: rejected, with both ways out.
    code, report = _lint(toolkit)
    (problem,) = _signoff_problems(report)
    assert code == 1 and problem["file"] == rel
    assert "Signed-off-by: Upstream Author <author@upstream.example>" in problem["message"]
    assert picked[:12] in problem["message"]
    assert "--signoff" in problem["hint"] and "--repo" in problem["hint"]


def test_lint_rejects_an_amended_pick_and_says_what_differs(tmp_path: Path) -> None:
    toolkit, pick, picked = _with_upstream_pick(tmp_path, amend="3, as upstream does")
    code, report = _lint(toolkit, "--repo", str(toolkit.upstream.path))
    (problem,) = _signoff_problems(report)
    assert code == 1 and problem["file"] == str(pick.relative_to(toolkit.root))
    assert picked[:12] in problem["message"] and "message" in problem["message"]
    assert "--signoff" in problem["hint"]


def test_lint_rejects_an_unsigned_own_commit_even_with_an_upstream_clone(tmp_path: Path) -> None:
    """A provenance that names a commit of the fork's branch (not upstream's) proves nothing."""
    toolkit, _, _ = _with_upstream_pick(tmp_path)
    own = toolkit.patch_files[0]
    own.write_text(own.read_text().replace(_own_signoff(parse_patch(own)) + "\n", "", 1))
    code, report = _lint(toolkit, "--repo", str(toolkit.upstream.path))
    assert code == 1
    assert [p["file"] for p in _signoff_problems(report)] == [str(own.relative_to(toolkit.root))]
