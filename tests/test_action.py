"""action.yml (the composite GitHub Action) and examples/: linted, and the action's steps run here.

actionlint and shellcheck come from the dev group's PyPI wheels. actionlint lints workflows, not action
metadata, so action.yml's steps are linted inside a small workflow_call workflow made from them (same
steps, same `inputs`), and each `run:` script also goes through shellcheck directly.

The local run plays the runner for the `run:` steps (env expressions resolved, $GITHUB_OUTPUT,
$RUNNER_TEMP, $GITHUB_ACTION_PATH) in a shallow, submodule-less clone of a Bridge-shaped consumer built in
tmp, and reads $GITHUB_OUTPUT as the runner does (both `name=value` and `name<<DELIMITER`). It plays the
install step itself (that step needs the network): its output is a venv that sees this checkout's
forkctl and this environment's dependencies. The action has no variable that would skip the install.
The install step runs for real on its own, offline (uv from a local wheel, the locked wheels of
.wheelhouse/ as an index), in a NeMo-RL-like checkout with its own [tool.uv] and pip settings.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from tests.chain import NEMO_GITLINK, Chain, make_chain, make_fixed_chain, url
from tests.gitrepos import git

ROOT = Path(__file__).resolve().parent.parent
ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
STEPS = ACTION["runs"]["steps"]
ALL_EXAMPLES = sorted((ROOT / "examples").glob("*.yml"))
EXAMPLES = sorted((ROOT / "examples").glob("*-check-pins.yml"))  # the consumers' check-pins workflows
SYNC_EXAMPLE = ROOT / "examples" / "fork-sync.yml"
BIN = Path(sys.executable).parent
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def _tool(name: str) -> str:
    path = BIN / name
    assert path.exists(), f"{name} is missing from {BIN}: run `make setup` (the dev group installs it)"
    return str(path)


def _lint(*files: Path) -> subprocess.CompletedProcess[str]:
    # shellcheck on PATH: actionlint runs it on every `run:` script.
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(
        [_tool("actionlint"), "-no-color", *map(str, files)], capture_output=True, text=True, env=env
    )


def _action_as_workflow(tmp_path: Path) -> Path:
    """The action's steps as one job of a workflow_call workflow with the action's inputs."""
    inputs = {
        name: {"type": "string", "required": bool(spec.get("required")), **_default(spec)}
        for name, spec in ACTION["inputs"].items()
    }
    workflow = {
        "name": "action-steps",
        "on": {"workflow_call": {"inputs": inputs}},
        "permissions": {"contents": "read"},
        "jobs": {"steps": {"runs-on": "ubuntu-latest", "steps": STEPS}},
    }
    path = tmp_path / "action-steps.yml"
    path.write_text(yaml.safe_dump(workflow, sort_keys=False))
    return path


def _default(spec: dict) -> dict:
    return {"default": str(spec["default"])} if "default" in spec else {}


def test_action_metadata_has_the_inputs_and_pinned_steps() -> None:
    assert ACTION["name"] and ACTION["description"]
    assert ACTION["runs"]["using"] == "composite"
    inputs = ACTION["inputs"]
    assert inputs["manifest"]["required"] is True
    assert {k: inputs[k]["default"] for k in ("command", "args", "python-version", "cache")} == {
        "command": "check-pins",
        "args": "--github",
        "python-version": "3.12",
        "cache": "true",
    }
    used = [step["uses"] for step in STEPS if "uses" in step]
    assert [u.split("@")[0] for u in used] == ["actions/setup-python", "actions/cache"]
    assert all(re.fullmatch(r"[\w./-]+@[0-9a-f]{40}", u) for u in used), used  # pinned by commit
    assert all(step.get("shell") == "bash" for step in STEPS if "run" in step)


def test_run_scripts_take_inputs_only_through_env() -> None:
    """No `${{ }}` inside a script: a manifest spec or argument is data, never shell code."""
    runs = [step for step in STEPS if "run" in step]
    assert len(runs) == 3
    for step in runs:
        assert "${{" not in step["run"], step["name"]
    env_inputs = {
        m.group(1)
        for step in runs
        for value in step.get("env", {}).values()
        for m in EXPRESSION.finditer(value)
    }
    assert {"inputs.manifest", "inputs.args", "inputs.command"} <= env_inputs


def test_uv_in_the_action_is_the_version_bootstrap_pins() -> None:
    install = next(step["run"] for step in STEPS if step.get("id") == "install")
    bootstrap = (ROOT / "scripts" / "bootstrap.sh").read_text()
    pinned = re.search(r'^UV_VERSION="([^"]+)"', bootstrap, re.M).group(1)
    assert f"uv_version={pinned} " in install
    assert "--frozen --no-dev --no-default-groups" in install


def test_actionlint_passes_on_the_examples_and_the_action_steps(tmp_path: Path) -> None:
    assert len(EXAMPLES) == 2 and SYNC_EXAMPLE in ALL_EXAMPLES and len(ALL_EXAMPLES) == 3
    result = _lint(*ALL_EXAMPLES, _action_as_workflow(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_and_shellcheck_catch_a_bad_step(tmp_path: Path) -> None:
    """The linters are not vacuous here: an unquoted variable and an expression in a script fail."""
    bad = yaml.safe_load(EXAMPLES[0].read_text())
    bad["jobs"]["check-pins"]["steps"].append(
        {"run": 'cp $HOME/x y\necho "${{ github.event.pull_request.title }}"', "shell": "bash"}
    )
    path = tmp_path / "bad.yml"
    path.write_text(yaml.safe_dump(bad, sort_keys=False))
    result = _lint(path)
    assert result.returncode == 1
    assert "SC2086" in result.stdout and "potentially untrusted" in result.stdout


@pytest.mark.parametrize("index", range(3))
def test_shellcheck_passes_on_each_run_script(index: int, tmp_path: Path) -> None:
    step = [s for s in STEPS if "run" in s][index]
    script = tmp_path / "step.sh"
    # As the runner runs it: bash -e -o pipefail.
    script.write_text("#!/usr/bin/env bash\nset -eo pipefail\n" + step["run"])
    result = subprocess.run([_tool("shellcheck"), "-s", "bash", str(script)], capture_output=True, text=True)
    assert result.returncode == 0, f"{step['name']}:\n{result.stdout}"


def test_examples_use_the_action_on_a_shallow_checkout_without_submodules() -> None:
    for path in EXAMPLES:
        workflow = yaml.safe_load(path.read_text())
        assert "pull_request" in workflow[True]  # PyYAML reads the key `on` as True
        steps = workflow["jobs"]["check-pins"]["steps"]
        checkout = next(s for s in steps if s["uses"].startswith("actions/checkout@"))
        assert checkout["with"]["submodules"] is False and checkout["with"]["fetch-depth"] == 1
        action = next(s for s in steps if s["uses"].startswith("AlignmentResearch/forkctl@"))
        assert action["with"]["manifest"]


# --- the action's steps, run here -------------------------------------------------------------------


def _run_action(workspace: Path, inputs: dict[str, str], tmp: Path) -> subprocess.CompletedProcess[str]:
    """Run the action's `run:` steps in `workspace` as the runner would; the last step's process."""
    values = {f"inputs.{k}": str(v.get("default", "")) for k, v in ACTION["inputs"].items()}
    values |= {f"inputs.{k}": v for k, v in inputs.items()}
    values |= {"steps.python.outputs.python-path": sys.executable, "runner.temp": str(tmp / "runner")}
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("FORKCTL_", "GITHUB_", "PYTEST_"))}
    base_env |= {
        "RUNNER_TEMP": str(tmp / "runner"),
        "RUNNER_OS": "Linux",
        "GITHUB_ACTION_PATH": str(ROOT),
        "GITHUB_WORKSPACE": str(workspace),
        "GITHUB_STEP_SUMMARY": str(tmp / "summary.md"),
    }
    (tmp / "runner").mkdir(exist_ok=True)
    result = None
    for step in STEPS:
        if "run" not in step:
            continue
        if step.get("id") == "install":
            values["steps.install.outputs.python"] = str(_installed_python(tmp))
            continue
        output = tmp / f"output-{step.get('id', 'last')}"
        output.write_text("")

        def resolve(match: re.Match[str]) -> str:
            return values[match.group(1)]  # an expression this runner does not know fails the test

        env = base_env | {k: EXPRESSION.sub(resolve, v) for k, v in step.get("env", {}).items()}
        env["GITHUB_OUTPUT"] = str(output)
        result = run_script(step["run"], tmp / "step.sh", workspace, env)
        if "id" in step:
            assert result.returncode == 0, f"{step['name']}: {result.stderr}"
            for key, value in read_outputs(output.read_text()).items():
                values[f"steps.{step['id']}.outputs.{key}"] = value
    assert result is not None
    return result


def run_script(
    text: str, script: Path, workspace: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """A step's `run:` script as the runner runs it (bash, -e, pipefail) in the workspace."""
    script.write_text(text)
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
    )


def read_outputs(text: str) -> dict[str, str]:
    """$GITHUB_OUTPUT as the runner reads it: `name=value` lines, or `name<<DELIMITER`, the value's
    lines, and the delimiter alone on a line."""
    outputs: dict[str, str] = {}
    lines = iter(text.split("\n"))
    for line in lines:
        if not line:
            continue
        equals, heredoc = line.find("="), line.find("<<")
        if equals >= 0 and (heredoc < 0 or equals < heredoc):
            key, _, value = line.partition("=")
            outputs[key] = value
            continue
        key, _, delimiter = line.partition("<<")
        value_lines = []
        for value_line in lines:
            if value_line == delimiter:
                break
            value_lines.append(value_line)
        else:
            raise AssertionError(f"output {key}: no closing delimiter {delimiter!r}")
        outputs[key] = "\n".join(value_lines)
    return outputs


def _installed_python(tmp: Path) -> Path:
    """The install step's result, played: a venv whose site-packages reaches this checkout's forkctl
    and this environment's dependencies (as plain path entries: the editable install of another
    checkout is not followed)."""
    venv = tmp / "runner" / "played-venv"
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        purelib = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        entries = [str(ROOT), *site.getsitepackages()]
        (Path(purelib) / "forkctl-under-test.pth").write_text("\n".join(entries) + "\n")
    return python


def _shallow_consumer(chain: Chain, tmp: Path) -> Path:
    clone = tmp / "consumer"
    git(tmp, "clone", "-q", "--depth", "1", "--branch", "farai/main", url(chain.bridge), str(clone))
    assert git(clone, "rev-parse", "--is-shallow-repository") == "true"
    assert not any((clone / "3rdparty" / "Megatron-LM").iterdir())  # submodule not initialised
    return clone


def _plain_cli(
    workspace: Path, manifest: Path, args: list[str], tmp: Path
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FORKCTL_", "GITHUB_", "PYTEST_"))}
    env |= {"FORKCTL_MANIFEST": str(manifest), "FORKCTL_CACHE": str(tmp / "plain-cache")}
    env["GITHUB_STEP_SUMMARY"] = str(tmp / "plain-summary.md")
    return subprocess.run(
        [sys.executable, "-m", "forkctl", "check-pins", *args],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
    )


@pytest.mark.parametrize(("fixed", "expected"), [(True, 0), (False, 1)])
def test_the_action_runs_check_pins_as_the_plain_cli_does(tmp_path: Path, fixed: bool, expected: int) -> None:
    chain = make_fixed_chain(tmp_path) if fixed else make_chain(tmp_path)
    workspace = _shallow_consumer(chain, tmp_path)
    result = _run_action(workspace, {"manifest": str(chain.manifest)}, tmp_path)
    plain = _plain_cli(workspace, chain.manifest, ["--github"], tmp_path)
    assert result.returncode == plain.returncode == expected, result.stdout + result.stderr
    assert result.stdout == plain.stdout
    # The cache went where the cache step keeps it.
    assert any((tmp_path / "runner" / "forkctl-cache").iterdir())
    if not fixed:
        assert "::error ::megatron-bridge@" in result.stdout


def test_args_are_split_into_words_and_inputs_never_run_as_shell(tmp_path: Path) -> None:
    chain = make_fixed_chain(tmp_path)
    workspace = _shallow_consumer(chain, tmp_path)
    marker = tmp_path / "PWNED"
    result = _run_action(workspace, {"manifest": str(chain.manifest), "args": " --json\n"}, tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["ok"] is True
    hostile = f"$(touch {marker}); `touch {marker}`"
    result = _run_action(workspace, {"manifest": str(chain.manifest), "args": hostile}, tmp_path)
    assert result.returncode == 2 and not marker.exists()
    result = _run_action(workspace, {"manifest": hostile}, tmp_path)
    assert result.returncode == 2 and not marker.exists()
    assert "touch" in result.stderr  # the spec was read as a (missing) manifest path


@pytest.mark.parametrize(("fixed", "expected"), [(True, 0), (False, 1)])
def test_the_examples_args_judge_the_commit_under_test(tmp_path: Path, fixed: bool, expected: int) -> None:
    # The example workflows pass `--github --under-test HERE`: in the shallow PR checkout the action
    # judges that commit and what it pins, as the plain CLI does.
    example = yaml.safe_load((ROOT / "examples" / "bridge-check-pins.yml").read_text())
    args = next(
        s["with"]["args"]
        for job in example["jobs"].values()
        for s in job["steps"]
        if "with" in s and "args" in s["with"]
    )
    assert args.split() == ["--github", "--under-test", "HERE"]
    chain = make_fixed_chain(tmp_path) if fixed else make_chain(tmp_path)
    workspace = _shallow_consumer(chain, tmp_path)
    result = _run_action(workspace, {"manifest": str(chain.manifest), "args": args}, tmp_path)
    plain = _plain_cli(workspace, chain.manifest, args.split(), tmp_path)
    assert result.returncode == plain.returncode == expected, result.stdout + result.stderr
    assert result.stdout == plain.stdout and "under test" in result.stdout + result.stderr


def _readme_workflow_args() -> str:
    """The `args` the README's consumer workflow passes to the action."""
    blocks = re.findall(r"^```yaml\n(.*?)^```", (ROOT / "README.md").read_text(), re.S | re.M)
    (block,) = [b for b in blocks if b.startswith("# .github/workflows/check-pins.yml")]
    steps = yaml.safe_load(block)["jobs"]["check-pins"]["steps"]
    (action,) = [s for s in steps if s["uses"].startswith("AlignmentResearch/forkctl@")]
    return action["with"]["args"]


@pytest.mark.slow
def test_in_a_nemo_checkout_the_action_judges_the_commit_under_test(tmp_path: Path) -> None:
    """With its default args and with the README's, while the Bridge's farai/main is broken: the NeMo-RL
    commit checked out passes on its own pins, and one pinning a failing Bridge commit fails."""
    chain = make_fixed_chain(tmp_path)
    plain_pin = chain.bridge_work.head("HEAD~1")  # a Bridge commit pinning plain upstream
    chain.pin_bridge(chain.base)
    workspace = tmp_path / "nemo-checkout"
    git(tmp_path, "clone", "-q", "--depth", "1", "--branch", "farai/main", url(chain.nemo), str(workspace))
    for args in ({}, {"args": _readme_workflow_args()}):
        result = _run_action(workspace, {"manifest": str(chain.manifest), **args}, tmp_path)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "branch farai/main" not in result.stdout and "under test" in result.stdout
    git(workspace, "update-index", "--cacheinfo", f"160000,{plain_pin},{NEMO_GITLINK}")
    git(workspace, "commit", "-q", "-m", "pin a Bridge commit that pins plain upstream")
    result = _run_action(workspace, {"manifest": str(chain.manifest)}, tmp_path)
    assert result.returncode == 1 and "::error ::nemo-rl@" in result.stdout, result.stdout
    assert plain_pin[:12] in result.stdout
    published = _run_action(
        workspace, {"manifest": str(chain.manifest), "args": "--github --branches"}, tmp_path
    )
    assert published.returncode == 1 and "branch farai/main" in published.stdout


# --- nothing from the environment or the workspace steers the action -------------------------------


def _step(step_id: str) -> dict:
    return next(step for step in STEPS if step.get("id") == step_id)


def _run_step(step_id: str, env: dict[str, str], tmp: Path) -> tuple[subprocess.CompletedProcess[str], str]:
    """One `run:` step with `env` (on top of a bare runner's): its process and its $GITHUB_OUTPUT."""
    output = tmp / f"output-{step_id}"
    output.write_text("")
    (tmp / "runner").mkdir(exist_ok=True)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("FORKCTL_", "GITHUB_", "PYTEST_"))}
    base |= {"RUNNER_TEMP": str(tmp / "runner"), "RUNNER_OS": "Linux", "GITHUB_OUTPUT": str(output)}
    base |= {"GITHUB_ACTION_PATH": str(ROOT)}
    script = tmp / f"{step_id}.sh"
    script.write_text(_step(step_id)["run"])
    result = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
        cwd=tmp,
        env=base | env,
        capture_output=True,
        text=True,
    )
    return result, output.read_text()


def test_a_newline_in_an_environment_value_stays_one_output(tmp_path: Path) -> None:
    """A job's FORKCTL_CACHE with a newline cannot add or replace step outputs: the delimiter form."""
    cache = f"{tmp_path}/cache\nkey=attacker\nrestore=attacker"
    result, written = _run_step(
        "prepare", {"FORKCTL_ACTION_MANIFEST": "m.yaml", "FORKCTL_CACHE": cache}, tmp_path
    )
    assert result.returncode == 0, result.stderr
    outputs = read_outputs(written)
    assert outputs["dir"] == cache
    assert outputs["key"].startswith("forkctl-cache-Linux-") and outputs["restore"] != "attacker"
    assert re.match(r"dir<<(\S+)\n", written)


def test_no_environment_variable_chooses_the_interpreter(tmp_path: Path) -> None:
    """FORKCTL_ACTION_PYTHON (once a test-only shortcut) in a job's env does not replace forkctl: the
    step installs from setup-python's interpreter (here a stand-in that fails at once, before any
    download), and no `python` output names the planted program."""
    planted = tmp_path / "planted"
    planted.write_text(f"#!/bin/sh\ntouch {tmp_path / 'PWNED'}\n")
    planted.chmod(0o755)
    setup_python = tmp_path / "setup-python"
    setup_python.write_text("#!/bin/sh\necho 'no network here' >&2\nexit 3\n")
    setup_python.chmod(0o755)
    env = {"FORKCTL_ACTION_PYTHON": str(planted), "FORKCTL_ACTION_SETUP_PYTHON": str(setup_python)}
    result, written = _run_step("install", env, tmp_path)
    assert result.returncode == 3 and "no network here" in result.stderr
    assert "python" not in read_outputs(written) and str(planted) not in written
    assert not (tmp_path / "PWNED").exists()


def test_a_forkctl_package_in_the_workspace_is_not_run(tmp_path: Path) -> None:
    """A pull request that adds forkctl/ to the consumer's root does not replace the installed forkctl."""
    chain = make_fixed_chain(tmp_path)
    workspace = _shallow_consumer(chain, tmp_path)
    marker = tmp_path / "PWNED"
    (workspace / "forkctl").mkdir()
    (workspace / "forkctl" / "__init__.py").write_text("")
    (workspace / "forkctl" / "__main__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    result = _run_action(workspace, {"manifest": str(chain.manifest)}, tmp_path)
    assert not marker.exists()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "check-pins: OK" in result.stdout


# --- the sync workflow and the action's sync command -------------------------------------------------


def test_the_sync_example_runs_on_a_schedule_and_on_demand_with_its_permissions_written_down() -> None:
    text = SYNC_EXAMPLE.read_text()
    workflow = yaml.safe_load(text)
    triggers = workflow[True]  # PyYAML reads the key `on` as True
    assert triggers["schedule"][0]["cron"] and "workflow_dispatch" in triggers
    assert workflow["permissions"] == {"contents": "read"}  # this repository is only read
    job = workflow["jobs"]["sync"]
    assert job["env"]["GH_TOKEN"] == "${{ secrets.FORK_SYNC_TOKEN }}"
    for permission in ("Contents: read and write", "Pull requests: read and write", "Issues: read and write"):
        assert permission in text  # what the fork token needs, written down
    action = next(s for s in job["steps"] if s.get("uses") == "./")  # this repository's action.yml
    assert action["with"]["command"] == "sync" and action["with"]["manifest"] == "manifest.yaml"
    # The scheduled sync opens its pull request past the gate in the open (a new series has no evidence).
    args = next(s for s in job["steps"] if s.get("id") == "args")
    assert 'args="--github --no-gate"' in args["run"]
    for step in job["steps"]:
        if "run" in step:
            assert "${{" not in step["run"], step.get("name")


def test_the_sync_examples_scripts_pass_shellcheck(tmp_path: Path) -> None:
    steps = yaml.safe_load(SYNC_EXAMPLE.read_text())["jobs"]["sync"]["steps"]
    for step in (s for s in steps if "run" in s):
        script = tmp_path / "step.sh"
        script.write_text("#!/usr/bin/env bash\nset -eo pipefail\n" + step["run"])
        result = subprocess.run(
            [_tool("shellcheck"), "-s", "bash", str(script)], capture_output=True, text=True
        )
        assert result.returncode == 0, f"{step['name']}:\n{result.stdout}"


@pytest.mark.slow
def test_the_action_runs_sync_and_no_other_command(tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    inputs = {"manifest": str(chain.manifest), "command": "sync", "args": "--dry-run --json"}
    result = _run_action(chain.toolkit, inputs, tmp_path)
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["command"] == "sync" and plan["target"] == chain.base and plan["dry_run"] is True
    marker = tmp_path / "PWNED"
    for command in ("lint", f"sync; touch {marker}"):
        result = _run_action(chain.toolkit, {**inputs, "command": command}, tmp_path)
        assert result.returncode == 2 and "must be check-pins or sync" in result.stderr
    assert not marker.exists()


# --- the install step, run for real in a consumer's checkout (offline) ------------------------------

WHEELHOUSE = ROOT / ".wheelhouse"


def _uv_binary() -> Path | None:
    """The uv this checkout was set up with (scripts/bootstrap.sh: .tools/, else the one on PATH)."""
    found = ROOT / ".tools" / "bin" / "uv"
    return found if found.exists() else (Path(p) if (p := shutil.which("uv")) else None)


def _pinned_uv() -> str:
    bootstrap = (ROOT / "scripts" / "bootstrap.sh").read_text()
    return re.search(r'^UV_VERSION="([^"]+)"', bootstrap, re.M).group(1)


def _offline_sources(tmp: Path) -> tuple[Path, Path]:
    """(a find-links folder with a wheel of the pinned uv, made from the uv binary set-up installed; a
    file:// simple index of the locked wheels in .wheelhouse/): what the install step fetches, here."""
    uv, version = _uv_binary(), _pinned_uv()
    if not (WHEELHOUSE / ".stamp").exists() or uv is None:
        pytest.skip(
            ".wheelhouse/ or uv is missing (scripts/bootstrap.sh makes both when the network is there)"
        )
    if subprocess.run([str(uv), "--version"], capture_output=True, text=True).stdout.split()[1] != version:
        pytest.skip(f"the uv set-up installed is not {version}")
    wheels = tmp / "uv-wheel"
    wheels.mkdir()
    files = {
        f"uv-{version}.data/scripts/uv": uv.read_bytes(),
        f"uv-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: uv\nVersion: {version}\n".encode(),
        f"uv-{version}.dist-info/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: py3-none-any\n",
    }
    record = [f"{name},sha256={_record_digest(data)},{len(data)}" for name, data in files.items()]
    files[f"uv-{version}.dist-info/RECORD"] = "\n".join(
        [*record, f"uv-{version}.dist-info/RECORD,,", ""]
    ).encode()
    # Stored, not deflated: a wheel may hold either, and deflating uv's 38 MB binary cost 1.5 s of CPU
    # in each of the three install tests.
    with zipfile.ZipFile(wheels / f"uv-{version}-py3-none-any.whl", "w", zipfile.ZIP_STORED) as wheel:
        for name, data in files.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o100755 << 16  # the script stays executable
            wheel.writestr(info, data, zipfile.ZIP_STORED)
    index = tmp / "locked-index"
    for wheel_file in WHEELHOUSE.glob("*.whl"):
        project = index / re.sub(r"[-_.]+", "-", wheel_file.name.split("-")[0]).lower()
        project.mkdir(parents=True, exist_ok=True)
        shutil.copy(wheel_file, project / wheel_file.name)
    for project in index.iterdir():
        links = [
            f'<a href="{w.name}#sha256={hashlib.sha256(w.read_bytes()).hexdigest()}">{w.name}</a>'
            for w in sorted(project.glob("*.whl"))
        ]
        (project / "index.html").write_text("<html><body>\n" + "\n".join(links) + "\n</body></html>\n")
    return wheels, index


def _record_digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _locked_click() -> str:
    """The click version uv.lock pins (as the wheelhouse's export of it says)."""
    return re.search(r"^click==(\S+)", (WHEELHOUSE / "requirements.txt").read_text(), re.M).group(1)


def _nemo_like_checkout(tmp: Path, setting: str) -> Path:
    """A consumer checkout whose pyproject.toml carries one of NeMo-RL's kinds of uv settings, or
    (`pip`) a pip configuration of the job's, with what each would do to the install."""
    workspace = tmp / "nemo-checkout"
    workspace.mkdir()
    extra = tmp / "nemo-extra-index" / "click"  # an index whose click is not the locked one
    extra.mkdir(parents=True)
    planted = f"click-{_locked_click()}-py3-none-any.whl"
    (extra / planted).write_bytes(b"not the locked click")
    (extra / "index.html").write_text(f'<a href="{planted}">{planted}</a>\n')
    uv_settings = {
        # NeMo-RL's constraints: with hashes required, uv wants every requirement pinned with `==`.
        "constraints": 'constraint-dependencies = ["setuptools>=70", "click==8.1.8"]',
        # The Bridge's extra index, searched before the default one.
        "extra-index": f'extra-index-url = ["{extra.parent.as_uri()}"]',
        "pip": "",
    }[setting]
    (workspace / "pyproject.toml").write_text(
        '[project]\nname = "nemo-rl-like"\nversion = "0.0.0"\nrequires-python = ">=3.10"\n'
        f"dependencies = []\n\n[tool.uv]\n{uv_settings}\n"
    )
    (workspace / "constraints.txt").write_text("uv==0.1.0\n")
    (workspace / "pip.conf").write_text(f"[global]\nconstraint = {workspace / 'constraints.txt'}\n")
    return workspace


@pytest.mark.slow
@pytest.mark.parametrize("setting", ["constraints", "extra-index", "pip"])
def test_the_install_step_installs_in_a_checkout_with_its_own_uv_and_pip_settings(
    tmp_path: Path, setting: str
) -> None:
    """The install step, run for real (offline: uv from a local wheel, the locked wheels from a local
    index, as the job's own PIP_/UV_ variables may point it at a mirror), from a NeMo-RL-like checkout:
    neither the checkout's [tool.uv] constraints or extra index nor a pip configuration change what is
    installed."""
    wheels, index = _offline_sources(tmp_path)
    workspace = _nemo_like_checkout(tmp_path, setting)
    runner = tmp_path / "runner"
    runner.mkdir()
    output = tmp_path / "output-install"
    output.write_text("")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("FORKCTL_", "GITHUB_", "PYTEST_", "PIP_", "UV_"))
    }
    env |= {
        "RUNNER_TEMP": str(runner),
        "GITHUB_OUTPUT": str(output),
        "GITHUB_ACTION_PATH": str(ROOT),
        "GITHUB_WORKSPACE": str(workspace),
        "FORKCTL_ACTION_SETUP_PYTHON": sys.executable,
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(wheels),
        "UV_OFFLINE": "1",
        "UV_DEFAULT_INDEX": index.as_uri(),
        "UV_CACHE_DIR": str(tmp_path / "uv-cache"),
    }
    if setting == "pip":
        env["PIP_CONFIG_FILE"] = str(workspace / "pip.conf")
    result = run_script(_step("install")["run"], tmp_path / "install.sh", workspace, env)
    assert result.returncode == 0, result.stdout + result.stderr
    python = read_outputs(output.read_text())["python"]
    installed = subprocess.run(
        [python, "-I", "-c", "import click, forkctl; print(click.__version__, forkctl.__file__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert installed[0] == _locked_click() and not installed[1].startswith(str(ROOT / "forkctl"))
    assert subprocess.run([python, "-I", "-m", "forkctl", "--version"], capture_output=True).returncode == 0
