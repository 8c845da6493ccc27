"""`forkctl ARGS` in a child Python that reports on itself when it exits: what it had imported, how many
objects it had frozen, which files it opened. The report is written by an atexit handler registered
before forkctl starts (so it runs after forkctl's own ending) to a file the test reads back."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_TEMPLATE = """
import atexit, sys
report = sys.argv[1]
{before}
atexit.register(lambda: open(report, "w").write({at_exit}))
from forkctl.cli import main
sys.argv = ["forkctl", *sys.argv[2:]]
main()
"""
# Newline-separated, not JSON: the probe itself must not import what a test checks forkctl leaves out.
MODULES = '"\\n".join(sorted(sys.modules))'


def probe(
    tmp_path: Path, at_exit: str, *args: str, before: str = "", env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], str]:
    """Run `forkctl ARGS` (from the repository root, this checkout first on the path); `at_exit` is the
    expression whose text the child writes when it exits, after `before` ran. (the process, the text)."""
    report = tmp_path / "probe-report.txt"
    report.unlink(missing_ok=True)
    script = _TEMPLATE.format(before=before, at_exit=at_exit)
    proc = subprocess.run(
        [sys.executable, "-c", script, str(report), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        check=False,
    )
    return proc, report.read_text()


def imported(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """(the process, the modules it had imported when it exited)."""
    proc, text = probe(tmp_path, MODULES, *args, env=env)
    return proc, set(text.splitlines())
