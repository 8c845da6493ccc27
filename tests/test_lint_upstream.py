"""`forkctl lint --upstream`: upstream's own pre-commit hooks on the fork head, against the base.

Offline: the upstream built here pins a `repo: local` hook of language python (a line-length checker kept
in upstream's tree, run in a venv forkctl makes without the network), beside a remote hook forkctl knows
(pylint) or does not know, whose install is refused when the package index cannot be used.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from forkctl.cli import cli
from forkctl.files import cache_root
from forkctl.upstreamlint.hooks import version_of
from forkctl.upstreamlint.tools import TOOLS_FOLDER
from tests.seriesrepo import SeriesSetup, make_series

CHECKER = """\
import sys

bad = False
for name in sys.argv[1:]:
    with open(name) as stream:
        for number, line in enumerate(stream, start=1):
            if len(line.rstrip("\\n")) > 100:
                print(f"{name}:{number}: line too long ({len(line.rstrip())}/100)")
                bad = True
sys.exit(1 if bad else 0)
"""

LOCAL_HOOK = """\
repos:
- repo: local
  hooks:
  - id: long-lines
    name: lines of at most 100 characters
    entry: python tools/longlines.py
    language: python
    files: ^megatron/core/
    types: [python]
"""

OLD_LONG = (
    "# " + "upstream's own long comment " * 4 + "\n"
)  # already on the base: not the series' doing; it ends in a blank
NEW_LONG = "VALUE = '" + "x" * 100 + "'\n"
A_BASE = OLD_LONG + "def a():\n    return 1\n"


def _lint_upstream(setup: SeriesSetup, *extra: str) -> tuple[int, dict]:
    """`lint --upstream --json` on the setup's upstream clone, trusting its local hooks unless `extra`
    says otherwise; progress goes to stderr, the JSON to stdout."""
    args = [
        "--manifest",
        str(setup.manifest),
        "lint",
        "--upstream",
        "--repo",
        str(setup.upstream.path),
        "--json",
        *(extra or ("--trust-local-hooks",)),
    ]
    result = CliRunner().invoke(cli, args)
    return result.exit_code, json.loads(result.stdout)


def _venvs(tool: str) -> list[Path]:
    return [path for path in (cache_root() / TOOLS_FOLDER).glob(f"{tool}-*") if path.is_dir()]


def _setup(tmp_path: Path, config: str, changed_a: str) -> SeriesSetup:
    upstream_files = {
        ".pre-commit-config.yaml": config,
        "tools/longlines.py": CHECKER,
        "megatron/core/a.py": A_BASE,
    }
    changes: list[tuple[str, dict[str, str | None]]] = [
        ("feat(core): a grows", {"megatron/core/a.py": changed_a}),
        # Outside the hook's `files:`: upstream's CI would not check it, nor does forkctl.
        ("docs: a long readme line", {"README.md": "upstream\n" + "y" * 150 + "\n"}),
    ]
    return make_series(tmp_path, changes, upstream_files)


def test_a_long_line_the_series_adds_is_found_on_the_fork_head_and_not_the_base(tmp_path: Path) -> None:
    # The series moves upstream's long line down two lines and adds one of its own.
    changed = "import os\n\n" + A_BASE + NEW_LONG
    setup = _setup(tmp_path, LOCAL_HOOK, changed)
    code, out = _lint_upstream(setup)
    assert code == 1, out
    added_at = changed.splitlines().index(NEW_LONG.rstrip("\n")) + 1
    assert out["new"] == [
        {
            "hook": "long-lines",
            "tool": "long-lines",
            "file": "megatron/core/a.py",
            "line": added_at,
            "message": f"line too long ({len(NEW_LONG.rstrip())}/100)",
        }
    ]
    (hook,) = out["hooks"]
    assert (hook["files"], hook["base_findings"], hook["head_findings"]) == (["megatron/core/a.py"], 1, 2)
    errors = [p for p in out["problems"] if p["level"] == "error"]
    assert [(p["file"], p["line"]) for p in errors] == [("megatron/core/a.py", added_at)]


def test_a_series_that_adds_nothing_new_passes_and_reuses_the_installed_tool(tmp_path: Path) -> None:
    setup = _setup(tmp_path, LOCAL_HOOK, "import os\n\n" + A_BASE)
    code, out = _lint_upstream(setup)
    assert code == 0, out
    assert out["new"] == []
    assert out["hooks"][0]["base_findings"] == out["hooks"][0]["head_findings"] == 1
    (venv,) = _venvs("long-lines")
    made = venv.stat().st_ino, (venv / "forkctl-installed.json").stat().st_mtime_ns
    code, _ = _lint_upstream(setup)
    assert code == 0
    assert (venv.stat().st_ino, (venv / "forkctl-installed.json").stat().st_mtime_ns) == made


@pytest.mark.slow
def test_a_pinned_tool_that_cannot_be_installed_is_named_with_its_version_and_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = LOCAL_HOOK + "- repo: https://github.com/pycqa/pylint\n  rev: v3.2.6\n  hooks:\n  - id: pylint\n"
    setup = _setup(tmp_path, config, A_BASE + NEW_LONG)
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # as offline as a machine without the network, deterministically
    code, out = _lint_upstream(setup)
    assert code == 2, out
    (problem,) = out["problems"]
    assert "pylint 3.2.6" in problem["message"] and "pylint==3.2.6" in problem["message"]
    assert "pip install pylint==3.2.6" in problem["hint"]
    assert _venvs("pylint-3.2.6") == [], "a failed install leaves no venv behind"


def test_a_hook_forkctl_cannot_install_is_listed_as_not_run(tmp_path: Path) -> None:
    config = LOCAL_HOOK + (
        "- repo: https://example.com/someone/unknown-hooks\n  rev: v1.0.0\n  hooks:\n  - id: mystery\n"
    )
    setup = _setup(tmp_path, config, "import os\n\n" + A_BASE)
    code, out = _lint_upstream(setup)
    assert code == 0, out
    assert [s["id"] for s in out["skipped"]] == ["mystery"]
    assert [p["level"] for p in out["problems"]] == ["warning"]


FIXER = """\
import sys

for name in sys.argv[1:]:
    with open(name) as stream:
        text = stream.read()
    fixed = "".join(line.rstrip() + "\\n" for line in text.splitlines())
    if fixed != text:
        with open(name, "w") as stream:
            stream.write(fixed)
        print(f"fixed {name}")
"""


def test_a_formatter_hook_reports_each_hunk_it_would_rewrite_that_the_base_has_not(
    tmp_path: Path,
) -> None:
    config = LOCAL_HOOK.replace("long-lines", "strip").replace("tools/longlines.py", "tools/strip.py")
    changed = A_BASE + "X = 1   \n\nY = 2  \n"
    setup = make_series(
        tmp_path,
        [("feat(core): trailing blanks", {"megatron/core/a.py": changed})],
        {".pre-commit-config.yaml": config, "tools/strip.py": FIXER, "megatron/core/a.py": A_BASE},
    )
    code, out = _lint_upstream(setup)
    assert code == 1, out
    # The base's own trailing blank (upstream's long comment) is rewritten too, and is not new.
    lines = changed.splitlines()
    assert [(f["file"], f["line"], f["message"]) for f in out["new"]] == [
        ("megatron/core/a.py", lines.index(added) + 1, "strip would rewrite this line")
        for added in ("X = 1   ", "Y = 2  ")
    ]
    assert out["hooks"][0]["base_findings"] == 1
    assert setup.upstream.git("status", "--porcelain") == "", "the user's checkout is never touched"


@pytest.mark.parametrize(
    ("rev", "version"),
    [
        ("refs/tags/26.3.0:refs/tags/26.3.0", "26.3.0"),  # Megatron-LM's black pin at the base
        ("v3.2.6", "3.2.6"),  # its pylint pin
        ("5.13.2", "5.13.2"),  # its isort pin
        ("d12f6c8c9aff51e166d872fd70151687a8e3f375", None),  # a commit names no release
        ("main", None),
    ],
)
def test_a_hook_revision_names_the_release_installed(rev: str, version: str | None) -> None:
    assert version_of(rev) == version


def test_without_a_pre_commit_config_at_the_base_it_says_so(tmp_path: Path) -> None:
    setup = make_series(tmp_path)
    code, out = _lint_upstream(setup)
    assert code == 2
    assert ".pre-commit-config.yaml" in json.dumps(out["problems"])


def test_a_local_hook_runs_only_when_trusted_by_name(tmp_path: Path) -> None:
    """A `repo: local` hook runs a command upstream's configuration names: data, never run unless the
    user says so; without --trust-local-hooks it is listed as not run, with the option that runs it."""
    setup = _setup(tmp_path, LOCAL_HOOK, NEW_LONG + "def a():\n    return 2\n")
    code, data = _lint_upstream(setup, "--no-trust-local-hooks")
    warned = [p for p in data["problems"] if p["level"] == "warning"]
    assert code == 0, data
    assert any("--trust-local-hooks" in f"{p['message']} {p.get('hint') or ''}" for p in warned), warned
    assert not [p for p in data["problems"] if p["level"] == "error"], data


@pytest.mark.parametrize(
    "extra",
    [
        "    entry: python -c 'print(1)'\n",
        "    args: ['--init-hook=import os']\n",
        "    additional_dependencies: ['six==1.16.0']\n",
    ],
)
def test_a_known_hook_told_to_run_named_code_needs_trust(extra: str) -> None:
    """pylint pinned as upstream pins it runs forkctl's own command; the same hook whose configuration
    names a command, a package or a code-loading option is not run unless trusted."""
    from forkctl.upstreamlint import hooks

    plain = "repos:\n- repo: https://github.com/pycqa/pylint\n  rev: v3.2.6\n  hooks:\n  - id: pylint\n"
    runnable, skipped = hooks.hooks_of(hooks.parse(plain))
    assert [h.id for h in runnable] == ["pylint"] and not skipped
    runnable, skipped = hooks.hooks_of(hooks.parse(plain + extra))
    assert not runnable and "--trust-local-hooks" in skipped[0].why
    assert [h.id for h in hooks.hooks_of(hooks.parse(plain + extra), trust_local=True)[0]] == ["pylint"]
