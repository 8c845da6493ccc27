"""A hostile HOME changes no byte forkctl writes: attributes, filters and the user's ignore rules included.

`tests/test_hermetic.py` holds the settings a `-c` pins; this file holds the sources of configuration
git reads besides its config keys: a global `core.attributesFile` whose clean filter rewrites `*.py`, an
`init.templateDir` whose `info/attributes` every new repository would copy, `merge.default` naming a
driver, `core.excludesFile`, and a `.gitattributes` in the directory forkctl is started from (git takes the
current directory for the working tree of a non-bare repository addressed by `--git-dir`). Each scenario
runs twice on identical copies, under the tests' plain configuration and under the hostile one, through
the code paths that run `git add` (the demo's snapshot, a port's `--continue`) and those that only read
and write objects (apply, export, port).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from forkctl.git.repo import GitRepo
from tests.seriesrepo import clone, make_series, run_json
from tests.test_hermetic import outputs

HOSTILE_HOME = """\
[user]
\tname = Someone Else
\temail = else@example.com
[protocol "file"]
\tallow = always
[core]
\tattributesFile = {home}/attributes
\texcludesFile = {home}/ignore
\tautocrlf = true
\teol = crlf
\tsafecrlf = true
\tfileMode = false
\thooksPath = {home}/hooks
[init]
\ttemplateDir = {home}/template
[filter "evil"]
\tclean = sed s/1/9/
\tsmudge = cat
[diff "evil"]
\txfuncname = ^(.*)$
[merge]
\tdefault = evil
[merge "evil"]
\tname = takes theirs
\tdriver = cp %B %A
[commit]
\tgpgSign = true
[gpg]
\tprogram = /bin/false
[diff]
\tnoprefix = true
[format]
\tsignature = hostile signature
[apply]
\twhitespace = fix
"""

# Every path forkctl writes a blob for is rewritten by the clean filter, shown with CRLF, diffed with a
# driver of the user's, merged by the user's driver.
HOSTILE_ATTRIBUTES = "* filter=evil diff=evil merge=evil text eol=crlf ident\n"

A_RESOLVED = "def a():\n    return 10\n\n\ndef helper():\n    return 'hi up'\n"


@pytest.fixture
def hostile_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """Switch the code under test to a HOME whose .gitconfig is hostile (and start it from a folder
    holding a hostile .gitattributes); returns the marker a hook would leave."""
    home = tmp_path / "hostile-home"
    marker = tmp_path / "hook-ran"

    def enable() -> None:
        (home / "hooks").mkdir(parents=True)
        for name in (
            "post-checkout",
            "pre-commit",
            "post-commit",
            "reference-transaction",
            "post-index-change",
        ):
            script = home / "hooks" / name
            script.write_text(f"#!/bin/sh\ntouch {marker}\n")
            script.chmod(0o755)
        (home / "attributes").write_text(HOSTILE_ATTRIBUTES)
        (home / "ignore").write_text("*.py\n*.sh\n")
        (home / "template" / "info").mkdir(parents=True)
        (home / "template" / "info" / "attributes").write_text(HOSTILE_ATTRIBUTES)
        (home / ".gitconfig").write_text(HOSTILE_HOME.format(home=home))
        monkeypatch.delenv("GIT_CONFIG_GLOBAL", raising=False)
        monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
        monkeypatch.setenv("HOME", str(home))
        start = tmp_path / "started-here"
        start.mkdir()
        (start / ".gitattributes").write_text("* -diff merge=binary\n")
        monkeypatch.chdir(start)

    return enable, marker


def scenario(root: Path, monkeypatch: pytest.MonkeyPatch, enable) -> dict[str, object]:  # type: ignore[no-untyped-def]
    """apply, export, port (plain and stopped + --continue) and the demo's snapshot, every result kept."""
    monkeypatch.setenv("FORKCTL_CACHE", str(root / "cache"))
    monkeypatch.setenv("GIT_COMMITTER_DATE", "2026-03-01T00:00:00+00:00")
    monkeypatch.setenv("GIT_AUTHOR_DATE", "2026-03-01T00:00:00+00:00")
    plain = make_series(root / "plain")
    plain_base = plain.upstream.commit("upstream: unrelated", {"megatron/core/sub/c.py": "C = 4\n"})
    plain_fork = clone(plain.upstream, root / "plain-fork")  # non-bare: a working tree git could read
    stopped = make_series(root / "stopped")
    stopped_base = stopped.upstream.commit(
        "upstream edits helper",
        {"megatron/core/a.py": "def a():\n    return 1\n\n\ndef helper():\n    return 'up'\n"},
    )
    stopped_fork = clone(stopped.upstream, root / "stopped-fork")
    package = root / "package"
    (package / "megatron" / "core").mkdir(parents=True)
    (package / "megatron" / "core" / "m1.py").write_text("ONE = 1\r\nTEN = 10\n")
    (package / "megatron" / "run.sh").write_text("#!/bin/sh\necho 1\n")
    (package / "megatron" / "run.sh").chmod(0o755)
    enable()
    found = outputs(plain, plain_fork, plain_base)
    code, data = run_json(stopped, "apply", "--base", stopped.base, "--repo", str(stopped_fork.path))
    assert code == 0, str(data)
    code, data = run_json(stopped, "port", "--onto", stopped_base, "--repo", str(stopped_fork.path))
    assert code == 1, data
    (Path(data["conflict"]["worktree"]) / "megatron/core/a.py").write_text(A_RESOLVED)
    code, data = run_json(stopped, "port", "--continue", "--repo", str(stopped_fork.path))
    assert code == 0, str(data)
    found["continued_head"] = data["head"]
    found["continued_patches"] = {f.name: f.read_bytes() for f in sorted(stopped.root.rglob("*.patch"))}
    found["snapshot"] = GitRepo.init_bare(root / "snapshot.git").indexes.tree_from_directory(package)
    return found


@pytest.mark.slow
def test_a_hostile_home_changes_no_byte_forkctl_writes(tmp_path: Path, hostile_home, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    enable, marker = hostile_home
    clean = scenario(tmp_path / "clean", monkeypatch, lambda: None)
    with monkeypatch.context() as inside:
        hostile = scenario(tmp_path / "hostile", inside, enable)
        assert os.environ["HOME"].endswith("hostile-home")
    assert hostile == clean
    assert not marker.exists()
