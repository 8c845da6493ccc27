"""forkctl lint and forkctl status on toolkit repositories built from real git patches."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from forkctl.cli import cli
from forkctl.series import parse_patch
from tests.gitrepos import git
from tests.seriesrepo import clone, make_stale_series, shallow_clone
from tests.toolkit import flat, make_toolkit


def _run(manifest: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--manifest", str(manifest), *args])
    return result.exit_code, result.output


def test_lint_passes_on_a_clean_series(tmp_path: Path) -> None:
    toolkit = make_toolkit(tmp_path)
    code, output = _run(toolkit.manifest, "lint")
    assert code == 0, output
    assert "lint: ok (2 patches" in output


def test_lint_reports_each_problem_on_its_own_line(tmp_path: Path) -> None:
    toolkit = make_toolkit(tmp_path, patches=3)
    series_dir = toolkit.root / "patches" / "megatron-lm"
    # 1: an unlisted patch file; 2: a patch that lost the provenance line its manifest entry names;
    # 3: out-of-order numbering; 4: a listed file that is not a patch.
    (series_dir / "0009-stray.patch").write_bytes(toolkit.patch_files[0].read_bytes())
    second = toolkit.patch_files[1]
    named = parse_patch(second).provenance
    second.write_text(second.read_text().replace("(cherry picked from commit", "(picked from"))
    data = toolkit.manifest_data()
    data["series"][1]["provenance"] = named[0]
    data["series"][0], data["series"][2] = data["series"][2], data["series"][0]
    bogus = series_dir / "0004-bogus.patch"
    bogus.write_text("not a patch\n")
    data["series"].append({"file": str(bogus.relative_to(toolkit.root))})
    toolkit.write_manifest(data)
    code, output = _run(toolkit.manifest, "lint")
    assert code == 1, output
    # Each problem is its own block: an `error:` line, its message wrapped under it (indented).
    lines: list[str] = []
    for line in output.splitlines():
        if line.startswith("error:"):
            lines.append(line)
        elif line.startswith("  ") and lines:
            lines[-1] += " " + line.strip()
    assert any("0009-stray.patch" in line and "not listed" in line for line in lines)
    assert any(f"manifest says provenance {named[0]}" in line and "no commit" in line for line in lines)
    assert any("0003-" in line and "number 0003 but it is patch 1" in line for line in lines)
    assert any("0001-" in line and "number 0001 but it is patch 3" in line for line in lines)
    assert any("0004-bogus.patch" in line and "not a git format-patch file" in line for line in lines)
    assert len(lines) == 5


def test_lint_bad_name_and_provenance_mismatch(tmp_path: Path) -> None:
    toolkit = make_toolkit(tmp_path, patches=1)
    renamed = toolkit.patch_files[0].with_name("First_Patch.patch")
    toolkit.patch_files[0].rename(renamed)
    data = toolkit.manifest_data()
    data["series"] = [{"file": str(renamed.relative_to(toolkit.root)), "provenance": "abcdef0"}]
    toolkit.write_manifest(data)
    code, output = _run(toolkit.manifest, "lint", "--json")
    assert code == 1
    report = json.loads(output)
    messages = [p["message"] for p in report["problems"]]
    assert any("NNNN-<slug>.patch" in m for m in messages)
    assert any("manifest says provenance abcdef0" in m for m in messages)


def test_lint_github_annotations(tmp_path: Path, monkeypatch) -> None:
    toolkit = make_toolkit(tmp_path, patches=1)
    (toolkit.root / "patches" / "megatron-lm" / "0002-extra.patch").write_bytes(
        toolkit.patch_files[0].read_bytes()
    )
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    code, output = _run(toolkit.manifest, "lint", "--github")
    assert code == 1
    assert "::error file=patches/megatron-lm/0002-extra.patch::" in output
    assert "forkctl lint: failed" in summary.read_text()


def test_status_table_and_json(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # the table's width, whatever terminal (or xdist worker) runs this
    toolkit = make_toolkit(tmp_path)
    code, output = _run(toolkit.manifest, "status")
    assert code == 0, output
    assert "feat(core): change number 1" in output and "feat(core): change number 2" in output
    code, output = _run(toolkit.manifest, "status", "--json")
    assert code == 0
    data = json.loads(output)
    assert data["base"] == toolkit.base
    assert [p["order"] for p in data["patches"]] == [1, 2]
    first = data["patches"][0]
    assert first["paths"] == ["megatron/core/a.py"]
    assert len(first["provenance"]) == 1 and len(first["provenance"][0]) == 40
    assert first["status"] == "parsed"
    assert len(data["series_digest"]) == 64


def test_status_with_upstream_clone_reports_applies_and_conflicts(tmp_path: Path) -> None:
    toolkit = make_toolkit(tmp_path)
    code, output = _run(toolkit.manifest, "status", "--repo", str(toolkit.upstream.path), "--json")
    assert code == 0, output
    assert [p["status"] for p in json.loads(output)["patches"]] == ["applies", "applies"]
    # Upstream moves a.py so patch 1 no longer applies at a new base; point the manifest there.
    new_base = toolkit.upstream.commit(
        "upstream edits a.py", {"megatron/core/a.py": "def a():\n    return 42\n"}
    )
    data = toolkit.manifest_data()
    data["upstream"]["base"] = new_base
    toolkit.write_manifest(data)
    code, output = _run(toolkit.manifest, "status", "--repo", str(toolkit.upstream.path), "--json")
    assert code == 1
    patches = json.loads(output)["patches"]
    assert [p["status"] for p in patches] == ["stale", "applies"]
    assert "megatron/core/a.py" in patches[0]["apply_error"]


@pytest.mark.parametrize("verb", ["status", "lint"])
def test_a_stale_patch_is_flagged_with_the_fix_the_same_in_every_clone(tmp_path: Path, verb: str) -> None:
    """A patch that only a 3-way merge puts on its own base is stale for `status --repo` and
    `lint --repo`, in a clone that holds its pre-image blob and in one that does not."""
    setup, stale, pre_image = make_stale_series(tmp_path / "s")
    full = clone(setup.upstream, tmp_path / "full", bare=True)
    shallow = shallow_clone(setup.upstream, tmp_path / "shallow")
    assert git(shallow.path, "cat-file", "--batch-check", input=pre_image.encode()) == f"{pre_image} missing"
    answers = []
    for repo in (full, shallow):
        code, output = _run(setup.manifest, verb, "--repo", str(repo.path), "--json")
        assert code == 1, output
        data = json.loads(output)
        flagged = [p for p in data["problems"] if "stale" in p["message"]]
        assert [p["file"] for p in flagged] == [str(stale.relative_to(setup.root))]
        assert "megatron/core/long.py" in flagged[0]["message"]
        assert f"forkctl port --onto {setup.base}" in flagged[0]["hint"]
        assert "forkctl export" in flagged[0]["hint"]
        if verb == "status":
            assert [p["status"] for p in data["patches"]] == [
                "applies",
                "stale",
                "applies",
                "applies",
                "applies",
            ]
        answers.append(data)
    assert answers[0] == answers[1]


def test_lint_repo_passes_a_series_that_applies_as_written(tmp_path: Path) -> None:
    toolkit = make_toolkit(tmp_path)
    code, output = _run(toolkit.manifest, "lint", "--repo", str(toolkit.upstream.path))
    assert code == 0, output
    assert "lint: ok" in output


def test_status_with_clone_lacking_base(tmp_path: Path) -> None:
    toolkit = make_toolkit(tmp_path, patches=1)
    data = toolkit.manifest_data()
    data["upstream"]["base"] = "f" * 40
    toolkit.write_manifest(data)
    code, output = _run(toolkit.manifest, "status", "--repo", str(toolkit.upstream.path))
    assert code == 2
    assert "does not have the base commit" in flat(output)


def test_lint_checks_the_authors_sign_off_when_the_manifest_asks(tmp_path: Path) -> None:
    toolkit = make_toolkit(tmp_path, patches=2)
    code, output = _run(toolkit.manifest, "lint")
    assert code == 0, output  # not asked: unsigned patches pass
    data = toolkit.manifest_data()
    data["fork"]["require_signoff"] = True
    toolkit.write_manifest(data)
    first, second = toolkit.patch_files
    author = parse_patch(first)
    # Sign the first off by its author; the second carries only somebody else's sign-off.
    signed = f"Signed-off-by: {author.author_name} <{author.author_email}>\n(cherry picked from"
    first.write_text(first.read_text().replace("(cherry picked from", signed, 1))
    assert "Signed-off-by: Dev <dev@example.com>" in second.read_text()
    code, output = _run(toolkit.manifest, "lint", "--json")
    report = json.loads(output)
    unsigned = [p for p in report["problems"] if "Signed-off-by" in p["message"]]
    assert code == 1
    assert [p["file"] for p in unsigned] == [str(second.relative_to(toolkit.root))], unsigned
    assert "require_signoff" in unsigned[0]["message"] and "--signoff" in unsigned[0]["hint"]


def test_every_json_document_has_one_versioned_shape(tmp_path: Path) -> None:
    # A result and an error alike: schema_version, command, ok, problems (a list of objects); `patches`
    # is a list of objects with `file` in every command that reports patches.
    toolkit = make_toolkit(tmp_path)
    result = CliRunner().invoke(cli, ["--manifest", str(toolkit.manifest), "lint", "--json"])
    lint = json.loads(result.output)
    assert lint["schema_version"] == 1 and lint["command"] == "lint" and lint["ok"] is True
    assert [p["file"] for p in lint["patches"]] == [e["file"] for e in toolkit.manifest_data()["series"]]
    assert lint["patch_count"] == len(lint["patches"]) and lint["problems"] == []
    status = json.loads(
        CliRunner().invoke(cli, ["--manifest", str(toolkit.manifest), "status", "--json"]).output
    )
    assert [Path(p["file"]).name for p in status["patches"]] == [
        Path(p["file"]).name for p in lint["patches"]
    ]
    failed = CliRunner().invoke(cli, ["--manifest", str(tmp_path / "nowhere.yaml"), "lint", "--json"])
    error = json.loads(failed.output)
    assert failed.exit_code == 2 and error["schema_version"] == 1 and error["command"] == "lint"
    assert error["problems"] and error["problems"][0]["message"] == error["error"]
