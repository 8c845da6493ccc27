"""The per-Python runs (scripts/test-pythons.sh, which `make test` calls after the main suite) name tests
that exist: a renamed test would otherwise drop out of them without a word."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "test-pythons.sh"


def test_every_test_the_per_python_runs_name_exists() -> None:
    listed = subprocess.run(
        [str(SCRIPT), "--list"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert "tests/test_cli_startup.py" in listed and len(listed) > 4
    for name in listed:
        path, _, function = name.partition("::")
        assert (ROOT / path).is_file(), name
        if function:
            assert re.search(rf"^def {re.escape(function)}\(", (ROOT / path).read_text(), re.M), name


def test_make_test_runs_them_after_the_main_suite() -> None:
    recipe = (ROOT / "Makefile").read_text().split("\ntest:", 1)[1].split("\n\n", 1)[0]
    lines = [line.strip() for line in recipe.splitlines() if line.startswith("\t")]
    assert any("-m pytest" in line for line in lines)
    assert "scripts/test-pythons.sh" in lines
    first_pytest = next(i for i, line in enumerate(lines) if "-m pytest" in line)
    assert first_pytest < lines.index("scripts/test-pythons.sh")
