"""bench/grouped_gemm.py runs end to end on CPU in --smoke mode, on the patched copy of megatron-core.

It runs in this process (its `main`, with the argv of a command line) beside the patch tests: the
worker usually has torch and the patched megatron imported already (this folder's tests sit next to each
other, so xdist hands them to one worker), so the smoke run does not import them again. `forkctl validate` runs the script as a child process on the GPU.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from tests import _patched
from tests.patches import _scripts

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench/grouped_gemm.py"

pytestmark = pytest.mark.slow


def load_script() -> ModuleType:
    return _scripts.load_script("bench/grouped_gemm.py", "grouped_gemm_bench")


def test_smoke_run_writes_json_with_all_arms_and_targets(
    megatron_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The patched copy the patch tests use (made once per run by `forkctl apply --tree`), imported
    # before the script could import megatron; --megatron names it as validate's run would.
    site = megatron_tree
    assert (site / _patched.SERIES_MARKER).is_file()
    out = tmp_path / "bench.json"
    argv = ["--smoke", "--out", str(out), "--megatron", str(site), "--plot", str(tmp_path / "bench.png")]
    assert load_script().main(argv) == 0
    stdout = capsys.readouterr().out
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
    assert "torch_grouped" in stdout  # the printed table
    assert (tmp_path / "bench.png").is_file() or result.get("plot_skipped")
