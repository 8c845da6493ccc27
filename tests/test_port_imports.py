"""What a real `forkctl port` run imports: only the modules on port's path.

Reading the code of one verb means opening the modules it imports: port must not pull in GPU evidence,
the pin chain, GitHub, the demo, other verbs' views (status's preview and bisection), apply's module, or
the URL cache and its fetch machinery when --repo names the clone (clonecache, remote, graph, listings,
credentials).

Measured on the development machine (both runs with --repo, the child's `sys.modules` at exit):

| run | before (ed2b2d0) | e9b85bf | now |
|---|---|---|---|
| clean `port --onto` | 69 | 61 | 57 |
| stopped `port --onto` | 68 | 60 | 57 |
| its `--continue` | 69 | 61 | 56 |

Since e9b85bf: GitRepo's parts imported on first access (no submodules, index), the trace module only
for a traced run, the validation section's types in one module. (`import forkctl.commands.port`
alone: 67 before, 58 at e9b85bf, 53 with the parts.) The issue's goal is half of
before (34); not reached: what remains is on port's path (the git parts of GitRepo a port reads, the manifest schema's
sections, the series, replay, export, the port's own modules). The budget holds what was reached.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from forkctl.git.repo import GitRepo
from forkctl.ops.state import worktree_path
from tests import budget
from tests.probe import imported
from tests.seriesrepo import SeriesSetup, clone, make_series, run_json

NOW = {"onto": 57, "stop": 57, "continue": 56}
HELPER_UP = "def a():\n    return 1\n\n\ndef helper():\n    return 'up'\n"
RESOLVED = "def a():\n    return 10\n\n\ndef helper():\n    return 'hi up'\n"
NOT_ON_PATH = {
    "forkctl.ops.port.preview",
    "forkctl.ops.port.bisect",
    "forkctl.ops.apply",
    "forkctl.git.clonecache",
    "forkctl.git.remote",
    "forkctl.git.graph",
    "forkctl.git.listings",
    "forkctl.git.credentials",
}
# Never on port's path, whatever the run: other verbs' worlds.
FOREIGN = (
    "forkctl.gpu",
    "forkctl.chain",
    "forkctl.github",
    "forkctl.demo",
    "forkctl.slurm",
    "forkctl.upstreamlint",
)


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SeriesSetup:
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    return make_series(tmp_path)


def _port(tmp_path: Path, setup: SeriesSetup, fork: Path, *args: str) -> tuple[int, set[str]]:
    """`forkctl port ARGS --repo FORK` in a child: (its exit code, the forkctl modules it had imported)."""
    env = {"FORKCTL_CACHE": str(tmp_path / "cache")}
    proc, modules = imported(
        tmp_path, "--manifest", str(setup.manifest), "port", *args, "--repo", str(fork), env=env
    )
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    return proc.returncode, {m for m in modules if m == "forkctl" or m.startswith("forkctl.")}


def _check(what: str, modules: set[str], run: str) -> None:
    budget.none_of(f"other verbs' modules imported by {what}", {m for m in modules if m.startswith(FOREIGN)})
    budget.none_of(
        f"preview, bisection, apply or URL-cache modules imported by {what}", NOT_ON_PATH & modules
    )
    budget.at_most(f"forkctl modules imported by {what}", len(modules), NOW[run], "\n".join(sorted(modules)))


@pytest.mark.budget(
    "forkctl modules a real port run imports: 69 before, 57 now (development machine, see the docstring)"
)
def test_a_port_run_imports_only_what_port_runs(setup: SeriesSetup, tmp_path: Path) -> None:
    clean_base = setup.upstream.commit("unrelated upstream work", {"megatron/core/sub/c.py": "C = 4\n"})
    clean = clone(setup.upstream, tmp_path / "clean", bare=True)
    code, data = run_json(setup, "apply", "--base", setup.base, "--repo", str(clean.path))
    assert code == 0, data
    code, modules = _port(tmp_path, setup, clean.path, "--onto", clean_base)
    assert code == 0 and "forkctl.commands.port" in modules
    assert setup.manifest_data()["upstream"]["base"] == clean_base  # the port ran to its end
    _check("a clean `port --onto`", modules, "onto")


@pytest.mark.budget(
    "forkctl modules a stopped port and its --continue import: 68 / 69 before, 57 / 56 now (development "
    "machine, see the docstring)"
)
def test_a_stopped_port_and_its_continue_import_only_what_they_run(
    setup: SeriesSetup, tmp_path: Path
) -> None:
    base = setup.base
    fork = clone(setup.upstream, tmp_path / "fork", bare=True)
    code, data = run_json(setup, "apply", "--base", base, "--repo", str(fork.path))
    assert code == 0, data
    new_base = setup.upstream.commit("upstream edits helper", {"megatron/core/a.py": HELPER_UP})
    fork.git("fetch", "-q", str(setup.upstream.path), "main")
    code, stopped = _port(tmp_path, setup, fork.path, "--onto", new_base)
    assert code == 1
    conflicted = worktree_path(GitRepo(fork.path)) / "megatron/core/a.py"
    assert "<<<<<<<" in conflicted.read_text()
    conflicted.write_text(RESOLVED)
    code, continued = _port(tmp_path, setup, fork.path, "--continue")
    assert code == 0
    assert setup.manifest_data()["upstream"]["base"] == new_base
    assert "'hi up'" in fork.git("show", "farai/main:megatron/core/a.py")
    _check("a stopped `port --onto`", stopped, "stop")
    _check("`port --continue`", continued, "continue")
