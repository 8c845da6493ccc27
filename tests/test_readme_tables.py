"""The README's generated tables say what their sources say: the GPU tables the committed evidence
(scripts/gpu_tables.py), the CPU table what `make bench` last measured (scripts/cpu_tables.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# script, its block's marker, a row of the block to change (a changed figure must be caught)
TABLES = [
    ("gpu_tables.py", "<!-- gpu-tables:begin", "| fork head | "),
    ("cpu_tables.py", "<!-- cpu-tables:begin", "| `forkctl lint` start-up | "),
]


def check(script: str, readme: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / script), "--check", "--readme", str(readme)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(("script", "marker", "row"), TABLES)
def test_the_readme_table_matches_its_source(script: str, marker: str, row: str) -> None:
    result = check(script, ROOT / "README.md")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(("script", "marker", "row"), TABLES)
def test_a_changed_figure_in_the_readme_is_caught(script: str, marker: str, row: str, tmp_path: Path) -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split(marker, 1)[1].split("-end -->", 1)[0]
    assert row in block
    edited = tmp_path / "README.md"
    edited.write_text(text.replace(row, row + "1", 1), encoding="utf-8")
    result = check(script, edited)
    assert result.returncode == 1 and script in result.stdout
