"""bench/grouped_gemm.py runs end to end on CPU in --smoke mode, on a patched copy of megatron-core."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests import _patched

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def test_smoke_run_writes_json_with_all_arms_and_targets(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # The same patched copy the patch tests use (made once per session by `forkctl apply --tree`).
    site = _patched.patched_tree(tmp_path_factory)
    assert (site / _patched.SERIES_MARKER).is_file()
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench/grouped_gemm.py"),
            "--smoke",
            "--out",
            str(out),
            "--megatron",
            str(site),
            "--plot",
            str(tmp_path / "bench.png"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["status"] == "ok" and result["smoke"] is True
    assert [s["routed_rows"] for s in result["sizes"]] == [64, 256]
    for size in result["sizes"]:
        assert set(size["arms"]) == {"per_expert", "sequential_mlp", "torch_grouped"}
        assert size["empty_experts"] >= 1
        # Same weights, same inputs: every arm computes the same function.
        assert all(err < 1e-2 for err in size["rel_l2_vs_per_expert"].values()), size["rel_l2_vs_per_expert"]
        assert all(arm["median_ms"] > 0 for arm in size["arms"].values())
        assert set(size["gemm_arms"]) == {"gemm_per_expert", "gemm_grouped"}
        errors = size["rel_l2_vs_gemm_per_expert"]
        assert all(err < 1e-2 for err in errors.values()), errors
    names = [t["name"] for t in result["targets"]]
    assert any("speedup" in n for n in names) and any("roofline" in n for n in names)
    assert "torch_grouped" in proc.stdout  # the printed table
    assert (tmp_path / "bench.png").is_file() or result.get("plot_skipped")
