"""One pattern for "a full SHA": SHA-1 (40) and SHA-256 (64) lowercase hex names, nothing else.

Every former hand-written check (regexes, `len(x) == 40`) now goes through `forkctl.git.sha`; these
tests reach the sites a user's input can reach (the CLI, a patch's `index` lines, a `URL@REF`).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from forkctl.cli import cli
from forkctl.errors import BadInput, Unexpected
from forkctl.git.sha import (
    is_commit_name,
    parse_full_sha,
    parse_tree_sha,
    printed_tree,
    require_full_sha,
    require_tree_sha,
)
from forkctl.git.snapshot import resolve_ref
from forkctl.manifest import load
from forkctl.ops.replay import promised_blobs
from tests.gitrepos import git, init_repo
from tests.test_fork_base import _fork, _record
from tests.test_fork_base import _run as fork_base
from tests.test_manifest import VALID
from tests.test_manifest import _write as write_manifest
from tests.toolkit import make_toolkit

SHA1 = "d12f6c8c9aff51e166d872fd70151687a8e3f375"
SHA256 = "4f" * 32
NOT_FULL = {
    "uppercase": SHA1.upper(),
    "one uppercase digit": "D" + SHA1[1:],
    "39 digits": SHA1[:39],
    "41 digits": SHA1 + "0",
    "63 digits": SHA256[:63],
    "65 digits": SHA256 + "0",
    "a trailing newline": SHA1 + "\n",
    "a leading space": " " + SHA1,
    "not hex": "g" * 40,
}


@pytest.mark.parametrize("text", [SHA1, SHA256])
def test_both_object_formats_are_full_names(text: str) -> None:
    assert parse_full_sha(text) == text
    assert require_full_sha(text, "the base") == text
    assert parse_tree_sha(text) == text
    assert require_tree_sha(text, "the tested tree") == text


@pytest.mark.parametrize("label", sorted(NOT_FULL))
def test_anything_else_is_refused_naming_what_it_was(label: str) -> None:
    assert parse_full_sha(NOT_FULL[label]) is None
    with pytest.raises(BadInput, match=r"upstream\.base .* is not a full commit SHA"):
        require_full_sha(NOT_FULL[label], "upstream.base")
    assert parse_tree_sha(NOT_FULL[label]) is None
    with pytest.raises(BadInput, match=r"package_tree .* is not a full tree object name"):
        require_tree_sha(NOT_FULL[label], "package_tree")


def test_a_tree_git_printed_is_taken_only_when_it_is_a_full_name() -> None:
    assert printed_tree(SHA256 + "\n", "write-tree") == SHA256
    with pytest.raises(Unexpected, match=r"git write-tree printed 'warning: x' where a tree object name"):
        printed_tree("warning: x", "write-tree")


def test_a_commit_name_is_an_abbreviation_or_a_full_name_of_either_format() -> None:
    assert all(map(is_commit_name, [SHA1[:7], SHA1, SHA256]))
    assert not any(map(is_commit_name, [SHA1[:6], SHA1 + "0", SHA256[:63], SHA1.upper(), SHA1 + "\n"]))


@pytest.mark.parametrize("label", sorted(NOT_FULL))
def test_fork_base_refuses_a_recorded_base_that_is_not_a_full_name(tmp_path: Path, label: str) -> None:
    # The old check (`^[0-9a-f]{40}$` with `match`) let a base with a trailing newline through.
    toolkit = make_toolkit(tmp_path)
    fork = _fork(tmp_path, _record(NOT_FULL[label]))
    code, out = fork_base(toolkit.manifest, fork.path)
    assert code == 1, out  # a file that does not read fails the check, and --write replaces it
    assert "upstream_base" in out and "is not a full commit SHA" in out and "fork-base --write" in out


def test_fork_base_reads_a_sha256_recorded_base_and_compares_it(tmp_path: Path) -> None:
    toolkit = make_toolkit(tmp_path)
    fork = _fork(tmp_path, _record(SHA256))
    code, out = fork_base(toolkit.manifest, fork.path, "--json")
    assert code == 1, out
    assert "is not a full commit SHA" not in out  # read, and found to differ from the manifest's base
    assert any(f"upstream_base is {SHA256[:12]}" in text for text in json.loads(out)["differences"])


def test_the_manifest_accepts_a_full_sha256_base_and_refuses_41_digits(tmp_path: Path) -> None:
    assert load(write_manifest(tmp_path / "ok", VALID.replace(SHA1, SHA256))).upstream.base == SHA256
    result = CliRunner().invoke(
        cli, ["--manifest", str(write_manifest(tmp_path / "bad", VALID.replace(SHA1, SHA1 + "0"))), "lint"]
    )
    assert result.exit_code == 2 and "is not a commit SHA" in result.output, result.output


def _sha256_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "--object-format=sha256", "-b", "main")
    for text in ("one\n", "two\n"):
        (path / "f.txt").write_text(text)
        git(path, "add", "f.txt")
        git(path, "commit", "-q", "-m", text.strip())
    return path


def test_a_sha256_patch_index_line_promises_its_blobs(tmp_path: Path) -> None:
    repo = _sha256_repo(tmp_path / "sha256")
    diff = subprocess.run(
        ["git", "-C", str(repo), "diff", "--full-index", "HEAD~1", "HEAD"], capture_output=True, check=True
    ).stdout
    old, new = (git(repo, "rev-parse", f"{rev}:f.txt").strip() for rev in ("HEAD~1", "HEAD"))
    assert len(old) == 64
    assert promised_blobs(diff) == [("f.txt", "f.txt", old, new)]


def test_a_full_sha256_after_the_at_is_its_own_answer_and_an_uppercase_one_is_a_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORKCTL_ALLOW_LOCAL_URLS", "1")
    repo = init_repo(tmp_path / "remote", {"a.txt": "a\n"})
    url = repo.path.as_uri()
    assert resolve_ref(url, SHA256).sha == SHA256
    with pytest.raises(BadInput, match="has no branch or tag"):
        resolve_ref(url, SHA1.upper())
