"""The `forkctl-check-pins` pre-commit hook in a consumer repository, which has no manifest of its own.

pre-commit installs the hook with pip into a virtualenv of its own; here pip is offline and finds the
CLI's locked wheels in `.wheelhouse/` (scripts/bootstrap.sh downloads them once per lock; without them
the pre-commit runs are skipped and say so). The manifest comes from $FORKCTL_MANIFEST (try-repo) or from
the hook's `args: [--manifest, SPEC]` (a consumer's .pre-commit-config.yaml): try-repo on this Python,
the consumer's config on 3.11 where this machine has it.

Building a hook's environment is what costs (a virtualenv, then pip builds forkctl's wheel in an isolated
build environment and installs it with its dependencies: 5-10 s of CPU each). So the session builds as
few as pre-commit allows: the tests that install the hook from a consumer's config share one snapshot of
this checkout (one repo and rev) and one PRE_COMMIT_HOME across xdist workers (pre-commit locks its store
while it installs, so a second worker waits and then reuses the environment); try-repo always installs
into a store of its own, so each try-repo run builds one. Every build shares virtualenv's seed data and
skips pip's bytecode compilation (Python compiles what the hook imports when it runs).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from forkctl.cli import cli, hoist_manifest
from tests.chain import BRIDGE_GITLINK, NEMO_GITLINK, Chain, commit_index, make_chain, make_fixed_chain, url
from tests.gitrepos import git

ROOT = Path(__file__).resolve().parent.parent
WHEELHOUSE = ROOT / ".wheelhouse"
HOOK = next(
    h
    for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    if h["id"] == "forkctl-check-pins"
)
needs_wheelhouse = pytest.mark.skipif(
    not (WHEELHOUSE / ".stamp").exists(),
    reason=".wheelhouse/ is missing or incomplete (scripts/bootstrap.sh downloads it when the network is there)",
)


def test_hook_definition_takes_its_manifest_from_args_and_runs_when_pins_change() -> None:
    assert HOOK["entry"] == "forkctl check-pins" and HOOK["language"] == "python"
    assert HOOK["pass_filenames"] is False and HOOK["always_run"] is False
    assert HOOK["files"] == r"^(\.gitmodules|3rdparty/)"
    assert "directory" in HOOK["types_or"] and HOOK["types"] == []


def test_manifest_is_accepted_after_the_verb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    chain = make_fixed_chain(tmp_path)
    monkeypatch.setenv("FORKCTL_CACHE", str(tmp_path / "cache"))
    after = CliRunner().invoke(cli, ["check-pins", "--json", "--manifest", str(chain.manifest)])
    before = CliRunner().invoke(cli, ["--manifest", str(chain.manifest), "check-pins", "--json"])
    assert after.exit_code == before.exit_code == 0, after.output
    assert after.stdout == before.stdout
    assert hoist_manifest(["status", "--manifest=m.yaml", "--", "--manifest", "x"]) == [
        "--manifest=m.yaml",
        "status",
        "--",
        "--manifest",
        "x",
    ]
    assert hoist_manifest(["--manifest", "status", "lint"]) == ["--manifest", "status", "lint"]


def _consumer(chain: Chain, tmp: Path) -> Path:
    clone = tmp / "consumer"
    git(tmp, "clone", "-q", "--depth", "1", "--branch", "farai/main", url(chain.bridge), str(clone))
    return clone


@pytest.fixture(scope="session")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder all xdist workers of this session share (their base temp folders' parent)."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "hook-shared"
    folder.mkdir(exist_ok=True)
    return folder


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def hook_repo(shared: Path) -> Path:
    """This checkout as a hook repository (its working tree committed), made once per session."""
    repo = shared / "forkctl"
    with _locked(shared):
        if not (repo / ".git").is_dir():
            partial = shared / "forkctl.partial"
            _snapshot_of_this_checkout(partial)
            partial.rename(repo)
    return repo


def _hook_env(shared: Path, tmp: Path, *, drop: tuple[str, ...]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FORKCTL_", "PIP_", "PYTEST_", *drop))}
    return env | {
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(WHEELHOUSE),
        "PIP_CONFIG_FILE": os.devnull,  # this machine's pip.conf names other indexes: offline, only ours
        "PIP_NO_COMPILE": "1",
        "VIRTUALENV_OVERRIDE_APP_DATA": str(shared / "virtualenv-app-data"),
        "PRE_COMMIT_HOME": str(shared / "pre-commit-home"),
        "FORKCTL_CACHE": str(tmp / "cache"),
    }


def _pre_commit(workspace: Path, shared: Path, tmp: Path, *args: str, env: dict[str, str] | None = None):
    base = _hook_env(shared, tmp, drop=()) | (env or {})
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", *args],
        cwd=workspace,
        env=base,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.slow
@needs_wheelhouse
def test_try_repo_in_a_consumer_with_the_manifest_from_the_environment(tmp_path: Path, shared: Path) -> None:
    # A broken chain, so the verdict can only come from check-pins having read $FORKCTL_MANIFEST. The
    # passing verdict is the consumer-config test's: each try-repo run builds the hook's environment
    # anew (it clones the hook repository into a store of its own).
    chain = make_chain(tmp_path)
    workspace = _consumer(chain, tmp_path)
    result = _pre_commit(
        workspace,
        shared,
        tmp_path,
        "try-repo",
        str(ROOT),
        "forkctl-check-pins",
        "--all-files",
        "--hook-stage",
        "pre-push",
        env={"FORKCTL_MANIFEST": str(chain.manifest)},
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "forkctl check-pins" in result.stdout and "Failed" in result.stdout
    assert "megatron-bridge" in result.stdout


def _snapshot_of_this_checkout(dest: Path) -> Path:
    """A clone of this repository with the working tree's tracked changes committed (the hook as it is now)."""
    git(ROOT.parent, "clone", "-q", "--no-local", str(ROOT), str(dest))
    changed = git(ROOT, "diff", "--name-only", "HEAD").splitlines()
    for name in changed:
        source, target = ROOT / name, dest / name
        if source.exists():
            target.write_bytes(source.read_bytes())
        else:
            target.unlink()
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "--allow-empty", "-m", "the working tree")
    return dest


def _base_python(version: str) -> str | None:
    venv = ROOT / ".venv-pythons" / version / "bin" / "python"
    if version == f"{sys.version_info[0]}.{sys.version_info[1]}":
        return sys.executable
    if not venv.exists():
        return None
    probe = subprocess.run(
        [str(venv), "-c", "import sys; print(sys._base_executable)"], capture_output=True, text=True
    )
    return probe.stdout.strip() or None


def _another_python() -> tuple[str, str]:
    """(version, interpreter): 3.11 where this machine has it (try-repo ran on this one), else this one."""
    this = f"{sys.version_info[0]}.{sys.version_info[1]}"
    for version in ("3.11", this):
        python = _base_python(version)
        if python is not None:
            return version, python
    raise AssertionError("unreachable: this interpreter is always there")


@pytest.mark.slow
@needs_wheelhouse
def test_consumer_config_with_manifest_in_args_runs_only_when_pins_change(
    tmp_path: Path, shared: Path, hook_repo: Path
) -> None:
    version, python = _another_python()
    chain = make_fixed_chain(tmp_path)
    workspace = _consumer(chain, tmp_path)
    config = {
        "default_language_version": {"python": python},
        "repos": [
            {
                "repo": url(hook_repo),
                "rev": git(hook_repo, "rev-parse", "HEAD"),
                "hooks": [{"id": "forkctl-check-pins", "args": ["--manifest", str(chain.manifest)]}],
            }
        ],
    }
    (workspace / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))
    run = ("run", "--hook-stage", "pre-push", "forkctl-check-pins")
    # A change elsewhere: skipped. A gitlink moved to upstream's tip: the hook runs and fails.
    other = _pre_commit(workspace, shared, tmp_path, *run, "--files", "src/bridge/mod0.py")
    assert other.returncode == 0 and "Skipped" in other.stdout, other.stdout + other.stderr
    passing = _pre_commit(workspace, shared, tmp_path, *run, "--files", BRIDGE_GITLINK)
    assert passing.returncode == 0 and "Passed" in passing.stdout, passing.stdout + passing.stderr
    git(workspace, "update-index", "--cacheinfo", f"160000,{chain.upstream_tip},{BRIDGE_GITLINK}")
    git(workspace, "commit", "-q", "-m", "bump megatron to upstream")
    failing = _pre_commit(workspace, shared, tmp_path, *run, "--files", BRIDGE_GITLINK)
    assert failing.returncode == 1 and "unpatched upstream commit" in failing.stdout, failing.stdout
    # The hook's environments in the shared store (the README test asks for the same Python): each one
    # runs the Python the config names.
    env_pythons = [
        p for p in (shared / "pre-commit-home").rglob("python") if p.parent.name == "bin" and p.is_file()
    ]
    assert env_pythons
    for env_python in env_pythons:
        reported = subprocess.run(
            [str(env_python), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
        )
        assert reported.stdout.strip() == version


def _readme_yaml(first_line: str) -> dict:
    """The README's one ```yaml block that starts with `first_line`, parsed."""
    blocks = re.findall(r"^```yaml\n(.*?)^```", (ROOT / "README.md").read_text(), re.S | re.M)
    found = [block for block in blocks if block.startswith(first_line)]
    assert len(found) == 1, f"the README has {len(found)} blocks starting {first_line!r}"
    return yaml.safe_load(found[0])


def _push(workspace: Path, shared: Path, tmp: Path, refspec: str) -> subprocess.CompletedProcess[str]:
    """`git push origin REFSPEC` from the consumer clone: git runs the pre-push hook pre-commit installed."""
    return subprocess.run(
        ["git", "push", "origin", refspec],
        cwd=workspace,
        env=_hook_env(shared, tmp, drop=("GIT_",)),
        capture_output=True,
        text=True,
        timeout=600,
    )


def _pin(workspace: Path, bridge_commit: str, message: str) -> str:
    git(workspace, "update-index", "--cacheinfo", f"160000,{bridge_commit},{NEMO_GITLINK}")
    git(workspace, "commit", "-q", "-m", message)
    return git(workspace, "rev-parse", "HEAD")


@pytest.mark.slow
@needs_wheelhouse
def test_the_readme_hook_in_a_nemo_clone_judges_the_pushed_commit(
    tmp_path: Path, shared: Path, hook_repo: Path
) -> None:
    """The README's .pre-commit-config.yaml (its repo, rev and manifest made local), installed as a
    pre-push hook in a NeMo-RL clone while the Bridge's farai/main is broken: a push whose own pins pass
    goes through, one whose pins are wrong is refused, also when it is not the commit checked out."""
    chain = make_fixed_chain(tmp_path)
    bridge = chain.bridge_work
    plain_pin = bridge.head("HEAD~1")  # a Bridge commit pinning plain upstream
    good = commit_index(bridge, "bridge: notes", {"docs/notes.md": "a second good commit\n"})
    bridge.git("push", "-q", "origin", "HEAD:refs/heads/farai/main")
    chain.pin_bridge(chain.base)  # the Bridge's branch head now pins plain upstream: broken
    workspace = tmp_path / "nemo-clone"
    git(tmp_path, "clone", "-q", "--depth", "1", "--branch", "farai/main", url(chain.nemo), str(workspace))

    config = _readme_yaml("# .pre-commit-config.yaml")
    (entry,) = config["repos"]
    (hook,) = entry["hooks"]
    assert hook["id"] == "forkctl-check-pins" and hook["args"][0] == "--manifest", hook
    entry |= {"repo": url(hook_repo), "rev": git(hook_repo, "rev-parse", "HEAD")}
    hook["args"][1] = str(chain.manifest)  # the README's remote spec, as a local manifest
    # The consumer-config test's Python, so both install the hook once into the shared store.
    config["default_language_version"] = {"python": _another_python()[1]}
    (workspace / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))
    git(workspace, "add", ".pre-commit-config.yaml")
    git(workspace, "commit", "-q", "-m", "pre-commit: forkctl-check-pins")
    installed = _pre_commit(workspace, shared, tmp_path, "install", "--hook-type", "pre-push")
    assert installed.returncode == 0, installed.stdout + installed.stderr

    passing = _pin(workspace, good, "pin the Bridge's second good commit")
    pushed = _push(workspace, shared, tmp_path, "HEAD:refs/heads/farai/main")
    assert pushed.returncode == 0, pushed.stdout + pushed.stderr
    assert "forkctl check-pins" in pushed.stdout and "Passed" in pushed.stdout
    assert git(chain.nemo, "rev-parse", "refs/heads/farai/main") == passing

    failing = _pin(workspace, plain_pin, "pin a Bridge commit that pins plain upstream")
    refused = _push(workspace, shared, tmp_path, "HEAD:refs/heads/farai/main")
    assert refused.returncode != 0 and "Failed" in refused.stdout, refused.stdout + refused.stderr
    assert plain_pin[:12] in refused.stdout
    git(workspace, "checkout", "-q", "--detach", passing)  # HEAD passes; the commit pushed does not
    refused = _push(workspace, shared, tmp_path, f"{failing}:refs/heads/farai/main")
    assert refused.returncode != 0 and "Failed" in refused.stdout, refused.stdout + refused.stderr
    assert git(chain.nemo, "rev-parse", "refs/heads/farai/main") == passing


@pytest.mark.slow
@needs_wheelhouse
def test_try_repo_in_a_nemo_clone_judges_the_commit_pushed(tmp_path: Path, shared: Path) -> None:
    """`pre-commit try-repo` at the pre-push stage with the refs a push gives (`--from-ref`, `--to-ref`),
    in a NeMo-RL clone while the Bridge's farai/main is broken: the pushed commit's own pins decide,
    whatever HEAD is (here the failing one, for both pushes)."""
    chain = make_fixed_chain(tmp_path)
    plain_pin = chain.bridge_work.head("HEAD~1")  # a Bridge commit pinning plain upstream
    good = chain.bridge_work.head()
    chain.pin_bridge(chain.base)
    workspace = tmp_path / "nemo-clone"
    git(tmp_path, "clone", "-q", "--depth", "1", "--branch", "farai/main", url(chain.nemo), str(workspace))
    published = git(workspace, "rev-parse", "HEAD")
    (workspace / "3rdparty" / "README.md").write_text("the submodules this repository pins\n")
    git(workspace, "add", "3rdparty/README.md")
    passing = _pin(workspace, good, "3rdparty: a README")  # the same good pin, a file under 3rdparty/
    failing = _pin(workspace, plain_pin, "pin a Bridge commit that pins plain upstream")
    hook = ("try-repo", str(ROOT), "forkctl-check-pins", "--hook-stage", "pre-push")
    env = {"FORKCTL_MANIFEST": str(chain.manifest)}
    ok = _pre_commit(
        workspace, shared, tmp_path, *hook, "--from-ref", published, "--to-ref", passing, env=env
    )
    assert ok.returncode == 0 and "Passed" in ok.stdout, ok.stdout + ok.stderr
    bad = _pre_commit(workspace, shared, tmp_path, *hook, "--from-ref", passing, "--to-ref", failing, env=env)
    assert bad.returncode == 1 and "Failed" in bad.stdout, bad.stdout + bad.stderr
    assert plain_pin[:12] in bad.stdout and "under test" in bad.stdout
