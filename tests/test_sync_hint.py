"""The dashboard sync keeps on a conflict says how to resolve it locally with commands that work as
printed: the port and its --continue / --skip carry the same `--repo` (the upstream clone sync was lent
with --upstream-repo), and the step that stops names the upstream commit that first breaks the patch
(issue 34, item 6)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.chain import make_chain
from tests.onpath import forkctl_env
from tests.test_sync import HELPER_HELLO, FakeGh, bridge_upstream_pins, sync, upstream_commit

RESOLVED = "def a():\n    return 10\n\n\ndef helper():\n    return 'HELLO hi'\n"


def _commands(body: str) -> list[str]:
    """The lines of the dashboard's "To resolve it locally" block."""
    block = body.split("To resolve it locally", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    return block.splitlines()


def test_the_dashboard_resolve_commands_work_as_printed_and_name_the_breaking_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chain = make_chain(tmp_path)
    gh = FakeGh(tmp_path, monkeypatch)
    breaking = upstream_commit(chain, "refactor: helper shouts (#42)", {"megatron/core/a.py": HELPER_HELLO})
    target = upstream_commit(chain, "upstream: unrelated 2", {"megatron/core/sub/f.py": "F = 1\n"})
    bridge_upstream_pins(chain, target)
    code, done = sync(chain, "--upstream-repo", str(chain.upstream))
    assert code == 1, done
    (issue,) = gh.items("issue")
    commands = _commands(issue["body"])
    where = f"--repo {chain.upstream.absolute()}"
    port = next(line for line in commands if line.startswith("forkctl port --onto"))
    resume = next(line for line in commands if line.startswith("forkctl port --continue"))
    assert port == f"forkctl port --onto {target} {where}", commands
    assert resume.split("  #")[0].strip() == f"forkctl port --continue {where}", commands
    assert f"forkctl port --skip {where}" in resume, commands
    stop = commands[commands.index(resume) - 1]
    assert stop.startswith("#") and breaking[:12] in stop and "helper shouts" in stop, commands
    assert "0004" in stop and target[:12] in stop, commands

    env = forkctl_env(tmp_path / "forkctl-bin")
    ran = subprocess.run(port, shell=True, cwd=chain.toolkit, env=env, capture_output=True, text=True)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    shown = subprocess.run(
        "forkctl status --json", shell=True, cwd=chain.toolkit, env=env, capture_output=True, text=True
    )
    worktree = Path(json.loads(shown.stdout)["in_progress"]["worktree"])
    (worktree / "megatron/core/a.py").write_text(RESOLVED)
    command = resume.split("  #")[0].strip()
    ran = subprocess.run(command, shell=True, cwd=chain.toolkit, env=env, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert yaml.safe_load(chain.manifest.read_text())["upstream"]["base"] == target
