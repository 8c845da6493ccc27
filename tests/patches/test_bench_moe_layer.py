"""bench/moe_layer.py runs end to end on CPU in --smoke mode at EP=1, on the patched copy of megatron-core.

Like test_bench_grouped_gemm.py it runs the script's `main` in this process, beside the patch tests (torch
and usually the patched megatron are imported already). The smoke run compiles nothing (its squared ReLU is
eager on the CPU), so it costs about 2 s of CPU here.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from types import ModuleType

import pytest

from tests import _patched
from tests.patches import _scripts

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench/moe_layer.py"
ARM_FIELDS = {"median_ms", "min_ms", "step_peak_mib", "resident_mib"}

pytestmark = pytest.mark.slow


def load_script() -> ModuleType:
    return _scripts.load_script("bench/moe_layer.py", "moe_layer_bench")


def test_smoke_run_times_both_arms_and_they_agree(
    megatron_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = megatron_tree
    assert (site / _patched.SERIES_MARKER).is_file()
    out = tmp_path / "moe.json"
    argv = ["--smoke", "--out", str(out), "--megatron", str(site)]
    assert load_script().main(argv) == 0
    stdout = capsys.readouterr().out
    result = json.loads(out.read_text())
    assert result["status"] == "ok" and result["smoke"] is True and result["ep"] == 1
    assert result["lora"]["on"] == ["linear_fc1", "linear_fc2"] and result["lora"]["rank"] > 0
    env = result["environment"]
    assert Path(env["megatron_site"]).resolve() == site.resolve()  # the patched copy, not site-packages
    assert {"python", "torch", "device", "multicast_env"} <= env.keys()
    assert [s["routed_rows_per_rank"] for s in result["sizes"]] == [64, 256]
    for size in result["sizes"]:
        assert size["received_rows_per_rank"] == [size["routed_rows_per_rank"]]  # one rank gets every row
        arms = size["arms"]
        assert set(arms) == {"default", "torch"}
        for figures in arms.values():
            assert figures.keys() >= ARM_FIELDS
            assert {f"{key}_max_over_ranks" for key in ("median_ms", "step_peak_mib", "resident_mib")} <= (
                figures.keys()
            )
            assert figures["median_ms"] > 0 and figures["min_ms"] <= figures["median_ms"]
            assert math.isnan(figures["step_peak_mib"])  # no allocator statistics on the CPU
        # The torch arm packs its experts into one buffer the weights point into: no second copy.
        assert arms["torch"]["resident_mib"] == pytest.approx(arms["default"]["resident_mib"])
        assert size["speedup_torch_vs_default"] == pytest.approx(
            arms["default"]["median_ms"] / arms["torch"]["median_ms"]
        )
        parity = size["parity_max_over_ranks"]
        assert parity["torch_arm_packed"] and parity["routing_matches"]
        errors = {key: value for key, value in parity.items() if key.startswith("rel_l2")}
        assert len([key for key in errors if key.startswith("rel_l2_grad.")]) == 4  # A and B of fc1, fc2
        assert all(value < 1e-2 for value in errors.values()), errors
        assert size["parity_ok"] is True
    assert "torch" in stdout and "default" in stdout and "parity" in stdout  # the printed table


def test_ranks_aggregate_to_rank_0_figures_and_the_max_over_ranks(
    megatron_tree: Path, tmp_path: Path
) -> None:
    # What --ep N reports from its ranks' files (the launch itself needs N GPUs): rank 0's figures, the
    # maximum over the ranks beside them, the parity of the worst rank. Rank 1 here is rank 0's record
    # with its step times doubled, a larger peak and a worse (still passing) parity.
    script = load_script()
    args = script.parse_args(
        ["--smoke", "--routed", "64", "--out", str(tmp_path / "moe.json"), "--megatron", str(megatron_tree)]
    )
    rank0 = script.run_rank(args, 0, 1, 0)
    rank1 = copy.deepcopy(rank0)
    rank1["rank"] = 1
    size1 = rank1["sizes"][0]
    for figures in size1["arms"].values():
        figures["median_ms"] *= 2
        figures["step_peak_mib"] = 123.0
    size1["arms"]["default"]["median_ms"] *= 3  # the torch arm gains more on the slow rank
    size1["parity"]["rel_l2_out"] = 5e-3
    size1["received_rows"] = 0

    result = script.aggregate([rank0, rank1], args)
    assert result["ep"] == 2
    (size,) = result["sizes"]
    arms0 = rank0["sizes"][0]["arms"]
    for arm, figures in size["arms"].items():
        assert figures["median_ms"] == arms0[arm]["median_ms"]
        assert figures["median_ms_max_over_ranks"] == size1["arms"][arm]["median_ms"]
        assert figures["step_peak_mib_max_over_ranks"] == 123.0
    assert size["speedup_torch_vs_default"] == pytest.approx(
        arms0["default"]["median_ms"] / arms0["torch"]["median_ms"]
    )
    assert size["speedup_torch_vs_default_max_over_ranks"] == pytest.approx(
        3 * size["speedup_torch_vs_default"]
    )
    assert size["received_rows_per_rank"] == [64, 0]
    assert size["parity_max_over_ranks"]["rel_l2_out"] == 5e-3 and size["parity_ok"] is True
    size1["parity"]["torch_arm_packed"] = False
    assert script.aggregate([rank0, rank1], args)["sizes"][0]["parity_ok"] is False
    assert "EP=2" in script.table(result)
