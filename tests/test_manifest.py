"""Every manifest error names the file, the line and the fix, and exits 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from forkctl.cli import cli
from forkctl.manifest import load, plain, rewrite
from tests.toolkit import flat, make_toolkit

VALID = """\
schema: 1
upstream:
  repo: NVIDIA/Megatron-LM
  url: https://github.com/NVIDIA/Megatron-LM.git
  base: d12f6c8c9aff51e166d872fd70151687a8e3f375
fork:
  repo: AlignmentResearch/Megatron-LM
  url: https://github.com/AlignmentResearch/Megatron-LM.git
  branch: farai/main
series:
  - file: patches/megatron-lm/0001-one.patch
consumers:
  - name: megatron-bridge
    upstream: NVIDIA-NeMo/Megatron-Bridge
    fork: AlignmentResearch/megatron-bridge-contrib
    url: https://github.com/AlignmentResearch/megatron-bridge-contrib.git
    branch: farai/main
    gitlink: 3rdparty/Megatron-LM
"""


def _write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "patches" / "megatron-lm").mkdir(parents=True)
    (tmp_path / "patches" / "megatron-lm" / "0001-one.patch").write_text("placeholder\n")
    path = tmp_path / "manifest.yaml"
    path.write_text(text)
    return path


def _lint(path: Path) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--manifest", str(path), "lint"])
    return result.exit_code, result.output


def test_valid_manifest_loads(tmp_path: Path) -> None:
    manifest = load(_write(tmp_path, VALID))
    assert manifest.upstream.base == "d12f6c8c9aff51e166d872fd70151687a8e3f375"
    assert manifest.series[0].file == "patches/megatron-lm/0001-one.patch"
    assert manifest.consumers[0].gitlink == "3rdparty/Megatron-LM"
    assert manifest.validation.evidence_dir == "validation"


@pytest.mark.parametrize(
    ("old", "new", "line", "expected"),
    [
        ("  branch: farai/main\n", "", 6, "missing key 'fork.branch'"),
        ("schema: 1\n", "schema: 1\nupstrem: {}\n", 2, "unknown key 'upstrem': did you mean 'upstream'?"),
        (
            "  branch: farai/main\nseries",
            "  branch: farai/main\n  brnch: x\nseries",
            10,
            "unknown key 'fork.brnch'",
        ),
        (
            "  repo: NVIDIA/Megatron-LM\n",
            "  repo: [a, b]\n",
            3,
            "'upstream.repo' has the wrong type: expected a string",
        ),
        ("d12f6c8c9aff51e166d872fd70151687a8e3f375", "d12f6", 5, "is not a commit SHA (7 to 40"),
        ("d12f6c8c9aff51e166d872fd70151687a8e3f375", "zzzzzzzz", 5, "is not a commit SHA"),
        (
            "  - file: patches/megatron-lm/0001-one.patch\n",
            "  - file: patches/megatron-lm/0001-one.patch\n  - file: patches/megatron-lm/0001-one.patch\n",
            1,
            "duplicate patch 'patches/megatron-lm/0001-one.patch'",
        ),
        ("patches/megatron-lm/0001-one.patch", "patches/megatron-lm/0002-gone.patch", 11, "does not exist"),
        ("patches/megatron-lm/0001-one.patch", "elsewhere/0001-one.patch", 11, "is outside patches/"),
        ("patches/megatron-lm/0001-one.patch", "/etc/0001-one.patch", 11, "is absolute"),
        ("patches/megatron-lm/0001-one.patch", "patches/../0001-one.patch", 11, "contains '..'"),
        ("    gitlink: 3rdparty/Megatron-LM\n", "    gitlink: ''\n", 18, "the gitlink path is empty"),
        ("schema: 1\n", "schema: 2\n", 1, "'schema' must be one of 1, got 2"),
        ("fork:\n", "fork: 3\nfork2:\n", 6, "'fork' has the wrong type: expected a mapping"),
    ],
    ids=[
        "missing-key",
        "unknown-top-key",
        "unknown-nested-key",
        "wrong-type",
        "short-sha",
        "non-hex-sha",
        "duplicate-patch",
        "missing-patch-file",
        "outside-patches",
        "absolute-path",
        "dotdot-path",
        "empty-gitlink",
        "wrong-schema",
        "fork-not-mapping",
    ],
)
def test_manifest_errors_name_file_line_and_exit_2(
    tmp_path: Path, old: str, new: str, line: int, expected: str
) -> None:
    assert old in VALID
    path = _write(tmp_path, VALID.replace(old, new, 1))
    code, output = _lint(path)
    assert code == 2, output
    assert f"{path}:{line}:" in flat(output)
    assert expected in flat(output)


def test_invalid_yaml_names_line(tmp_path: Path) -> None:
    path = _write(tmp_path, VALID.replace("  branch: farai/main\n", "  branch: [farai/main\n"))
    code, output = _lint(path)
    assert code == 2
    assert f"{path}:" in flat(output) and "not valid YAML" in flat(output)


def test_unsafe_yaml_tags_are_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, VALID.replace("schema: 1", "schema: !!python/object/apply:os.system ['true']"))
    code, output = _lint(path)
    assert code == 2
    assert "not valid YAML" in flat(output) or "could not determine a constructor" in flat(output)


def test_empty_manifest(tmp_path: Path) -> None:
    code, output = _lint(_write(tmp_path, ""))
    assert code == 2 and "the manifest is empty" in flat(output)


def test_missing_manifest_file(tmp_path: Path) -> None:
    code, output = _lint(tmp_path / "nope.yaml")
    assert code == 2 and "no such manifest" in flat(output)


def test_manifest_found_by_walking_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    toolkit = make_toolkit(tmp_path, patches=1)
    deep = toolkit.root / "patches" / "megatron-lm"
    monkeypatch.chdir(deep)
    result = CliRunner().invoke(cli, ["status", "--json"])
    assert result.exit_code == 0, result.output
    assert '"base": "' + toolkit.base in result.output


def test_no_manifest_anywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["lint"])
    assert result.exit_code == 2
    assert "no manifest.yaml" in result.output


def test_rewrite_keeps_comments_and_validates(tmp_path: Path) -> None:
    text = VALID.replace("schema: 1\n", "# keep me\nschema: 1\n") + "dropped: []\n# trailing comment\n"
    path = _write(tmp_path, text)
    new_base = "a" * 40
    rewrite(
        path,
        {
            ("upstream", "base"): new_base,
            ("dropped",): [{"subject": "x", "reason": "empty", "base": new_base}],
            ("series",): [{"file": "patches/megatron-lm/0001-one.patch", "provenance": "b" * 40}],
        },
    )
    after = path.read_text()
    assert "# keep me" in after and "# trailing comment" in after
    manifest = load(path)
    assert manifest.upstream.base == new_base
    assert manifest.model.dropped[0].reason == "empty"
    assert manifest.series[0].provenance == "b" * 40
    assert manifest.consumers[0].gitlink == "3rdparty/Megatron-LM"


def test_rewrite_refuses_an_invalid_result(tmp_path: Path) -> None:
    path = _write(tmp_path, VALID)
    before = path.read_text()
    with pytest.raises(Exception, match="not a commit SHA"):
        rewrite(path, {("upstream", "base"): "nothex"})
    assert path.read_text() == before


def test_repository_manifest_is_valid(repo_root: Path) -> None:
    manifest = load(repo_root / "manifest.yaml")
    assert manifest.upstream.base == "d12f6c8c9aff51e166d872fd70151687a8e3f375"
    assert [c.name for c in manifest.consumers] == ["megatron-bridge", "nemo-rl"]
    assert manifest.consumers[1].gitlink == "3rdparty/Megatron-Bridge-workspace/Megatron-Bridge"


def test_rewrite_round_trip_keeps_every_other_byte(tmp_path: Path, repo_root: Path) -> None:
    """Block -> flow -> block: comments and blank lines between sections survive byte for byte."""
    path = tmp_path / "manifest.yaml"
    original = (repo_root / "manifest.yaml").read_text()
    path.write_text(original)
    (tmp_path / "patches").symlink_to(repo_root / "patches")
    entries = [plain(entry, drop_none=True) for entry in load(path).series]
    rewrite(path, {("series",): [], ("dropped",): []})
    emptied = path.read_text()
    assert "series: []\n" in emptied and "# Patches dropped by" in emptied
    rewrite(path, {("series",): entries, ("dropped",): []})
    assert path.read_text() == original


def test_a_manifest_error_under_github_is_an_annotation_on_its_file_and_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path, VALID.replace("schema: 1\n", "schema: 1\nupstrem: {}\n", 1))
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_WORKSPACE", str(tmp_path))
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = CliRunner().invoke(cli, ["--manifest", str(path), "lint", "--github"])
    assert result.exit_code == 2
    annotations = [line for line in result.stdout.splitlines() if line.startswith("::error")]
    assert annotations == [
        "::error file=manifest.yaml,line=2::unknown key 'upstrem': did you mean 'upstream'?"
    ]
    assert "## forkctl lint: error" in summary.read_text()
    assert "unknown key 'upstrem'" in summary.read_text()


def test_what_is_specific_to_a_fork_has_defaults_any_fork_can_use(tmp_path: Path) -> None:
    manifest = load(_write(tmp_path, VALID))
    assert manifest.fork.tree_include == "**"
    assert manifest.fork.bump_branch_prefix == "forkctl/bump-"
    assert manifest.validation.multigpu_tests == "tests/multigpu"
    assert manifest.validation.benchmark is None and manifest.validation.layer_benchmark is None


@pytest.mark.parametrize(
    ("section", "line", "needle"),
    [
        ("fork:\n  tree_include: ''\n", "tree_include", "the glob is empty"),
        ("fork:\n  bump_branch_prefix: --force\n", "bump_branch_prefix", "cannot start a branch name"),
        ("validation:\n  benchmark_rows: 8k,32k\n", "benchmark_rows", "not a comma-separated list"),
        ("validation:\n  benchmark: /abs/bench.py\n", "benchmark", "is absolute"),
    ],
)
def test_fork_specific_settings_are_checked(tmp_path: Path, section: str, line: str, needle: str) -> None:
    key = section.partition(":\n")[0]
    text = VALID.replace(f"{key}:\n", section, 1) if f"\n{key}:\n" in VALID else VALID + section
    path = _write(tmp_path, text)
    code, out = _lint(path)
    lineno = text.splitlines().index(next(x for x in text.splitlines() if x.strip().startswith(line))) + 1
    assert code == 2 and needle in flat(out) and f"manifest.yaml:{lineno}" in out, out
