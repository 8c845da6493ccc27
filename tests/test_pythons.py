"""The CLI installs and runs on Python 3.10-3.13: its own tests, run under every such Python here.

Only the patch tests need 3.12 (megatron-core 0.19.2); the CLI needs click, msgspec, PyYAML and rich.
`make setup` (scripts/bootstrap.sh) builds a small venv per other Python found on this machine under
`.venv-pythons/<version>` with the locked dependencies; each run below is a real pytest process of that
interpreter over the CLI's tests, with this checkout's `forkctl` first on its path.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OTHER_VERSIONS = [
    v for v in ("3.10", "3.11", "3.12", "3.13") if v != f"{sys.version_info[0]}.{sys.version_info[1]}"
]

# Every verb's entry and the error contract, the manifest, series reading, apply and export on real
# repositories, a bump through the chain with its check, and a consumer's CI (the commit under test
# judged alone, the action's steps run as the examples do): what a consumer's CI or a maintainer runs.
# Of the chain's test files only the tests of those paths (the main suite runs the rest): about 20 s of
# CPU per Python here. Nothing here imports torch.
UNDER_TEST = "tests/test_check_pins_under_test.py::test_a_nemo_commit_pinning"
CLI_TESTS = [
    "tests/test_cli_startup.py",
    "tests/test_options.py",
    "tests/test_manifest.py",
    "tests/test_series.py",
    "tests/test_lint_status.py",
    "tests/test_apply.py",
    "tests/test_export.py",
    "tests/test_bump_bridge.py::test_bump_through_nemo_rl_then_check_pins_passes",
    f"{UNDER_TEST}_a_good_bridge_passes_though_the_bridge_branch_is_broken",
    f"{UNDER_TEST}_a_failing_bridge_fails_on_its_own_finding",
    "tests/test_action.py::test_the_examples_args_judge_the_commit_under_test",
]
# Every verb's entry point, the option table, the manifest and the series: what the newer Pythons run. Code
# that runs on the oldest (3.10) and on 3.12 (the main suite) can break on a newer one only where the
# newer one removed or changed something, which shows on import (every verb is imported here) or in
# parsing; the full set costs 20 s of CPU per Python on this 2-core machine.
ENTRY_TESTS = [
    "tests/test_cli_startup.py",
    "tests/test_options.py",
    "tests/test_manifest.py",
    "tests/test_series.py",
]


@functools.cache  # asked for every parameter: one bash probe per version is enough
def _interpreter_on_this_machine(version: str) -> bool:
    # The same places scripts/bootstrap.sh looks; a version the machine lacks is not a failure.
    probe = subprocess.run(
        [
            "bash",
            "-c",
            f'source <(sed -n "/^find_python()/,/^}}/p" scripts/bootstrap.sh); find_python {version}',
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    return probe.returncode == 0


def _tests_for(version: str) -> list[str]:
    """The full CLI set under the oldest other Python this machine has, the entry set under the rest."""
    present = [v for v in OTHER_VERSIONS if _interpreter_on_this_machine(v)]
    oldest = min(present, key=lambda v: tuple(map(int, v.split("."))))
    return CLI_TESTS if version == oldest else ENTRY_TESTS


@pytest.mark.slow
@pytest.mark.parametrize("version", OTHER_VERSIONS)
def test_the_cli_suite_passes_under(version: str, tmp_path: Path) -> None:
    if not _interpreter_on_this_machine(version):
        pytest.skip(f"no Python {version} on this machine")
    python = ROOT / ".venv-pythons" / version / "bin" / "python"
    assert python.exists(), f"Python {version} is here but has no CLI environment: run `make setup`"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "GIT_"))}
    env["PYTHONPATH"] = str(ROOT)
    # Bytecode is written (tagged per version, so the Pythons never share a .pyc): without it every
    # forkctl process the tests start would compile forkctl again, 20 s of a 25 s run under 3.10.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    result = subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", *_tests_for(version)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, f"Python {version}:\n{result.stdout[-6000:]}\n{result.stderr[-2000:]}"
    reported = subprocess.run(
        [str(python), "-c", "import sys, forkctl; print('%d.%d' % sys.version_info[:2], forkctl.__file__)"],
        env=env,
        capture_output=True,
        text=True,
    )
    version_seen, module_file = reported.stdout.split()
    assert version_seen == version and Path(module_file).is_relative_to(ROOT / "forkctl")
