"""The README's GPU tables are the committed evidence's numbers (scripts/gpu_tables.py writes them)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "gpu_tables.py"


def check(readme: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--check", "--readme", str(readme)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_readme_gpu_tables_match_the_committed_evidence() -> None:
    result = check(ROOT / "README.md")
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_changed_figure_in_the_readme_is_caught(tmp_path: Path) -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("<!-- gpu-tables:begin", 1)[1].split("<!-- gpu-tables:end -->", 1)[0]
    assert "| fork head |" in block
    edited = tmp_path / "README.md"
    edited.write_text(text.replace("| fork head | ", "| fork head | 1", 1), encoding="utf-8")
    result = check(edited)
    assert result.returncode == 1 and "gpu_tables.py" in result.stdout
