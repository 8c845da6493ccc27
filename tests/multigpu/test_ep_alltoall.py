"""The perf(moe) patch under expert parallelism: the torch expert backend behind the all-to-all
token dispatcher.

Launches tests/multigpu/ep_worker.py on FORKCTL_EP GPUs (default 4; 1 runs the same check on one GPU)
with torchrun, then checks every rank's figures: forward output and input gradient of a full MoELayer
with moe_expert_gemm_backend="torch" against the default backend, relative L2 < 1e-2, including a batch
that leaves rank 1's experts without tokens. `forkctl validate --ep N` runs this folder with
FORKCTL_EP=N and records it as the environment `sm90-epN`.

When torchrun fails, the assertion message (and the JUnit properties `rank<R>.error` and `torchrun.logs`)
carry each failing rank's traceback (<out>/rank<R>.error.txt, written by the worker) and the tail of
every rank's own stdout/stderr (torchrun --log-dir ... --tee 3).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import _cuda, _patched

EP = int(os.environ.get("FORKCTL_EP", "4"))
WORKER = Path(__file__).with_name("ep_worker.py")
TOLERANCE = 1e-2
LAUNCH_TIMEOUT_S = 480
RANK_LOG_TAIL = 3000  # characters kept from each rank's stdout/stderr log
ERROR_TAIL = 6000  # characters kept from each rank's traceback
# NVLink multicast stays off for NCCL, torch symmetric memory and NVSHMEM (the worker forces it too).
MULTICAST_OFF = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
CASES = ("balanced", "empty_rank")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.multigpu,
    pytest.mark.skipif(
        _cuda.device_count() < EP,
        reason=f"needs {EP} CUDA GPUs (FORKCTL_EP={EP}), this host has {_cuda.device_count()}",
    ),
]


@pytest.fixture(scope="module")
def patched_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder holding the patched `megatron/`: validate's copy when it made one (checked to carry the
    series), else our own."""
    return _patched.patched_tree(tmp_path_factory)


def torchrun_command(out: Path, log_dir: Path, nproc: int = EP) -> list[str]:
    """torchrun over the worker; every rank's stdout/stderr is also kept under `log_dir`."""
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={nproc}",
        f"--log-dir={log_dir}",
        "--tee=3",
        str(WORKER),
        "--out",
        str(out),
    ]


def launch(site: Path, out: Path, log_dir: Path) -> subprocess.CompletedProcess[str]:
    env = _patched.subprocess_env(site)
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(_patched.REPO_ROOT)])
    env.update(MULTICAST_OFF)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return subprocess.run(
        torchrun_command(out, log_dir),
        cwd=_patched.REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=LAUNCH_TIMEOUT_S,
    )


def rank_errors(out: Path) -> dict[str, str]:
    """rank<R>.error.txt of every rank that raised: {'rank<R>': traceback tail}."""
    errors = {}
    for path in sorted(out.glob("rank*.error.txt")):
        errors[path.name.removesuffix(".error.txt")] = path.read_text(errors="replace")[-ERROR_TAIL:]
    return errors


def rank_logs(log_dir: Path) -> dict[str, str]:
    """Tails of torchrun's per-rank logs: {'<local rank>/stderr.log': text}, empty logs left out."""
    logs = {}
    for path in sorted(log_dir.rglob("*.log")):
        text = path.read_text(errors="replace").strip()
        if text:
            logs[f"{path.parent.name}/{path.name}"] = text[-RANK_LOG_TAIL:]
    return logs


def failure_report(proc: subprocess.CompletedProcess[str], out: Path, log_dir: Path) -> str:
    """What to show when the launch failed: each failing rank's traceback, each rank's log, torchrun's tail."""
    parts = [f"torchrun exit code {proc.returncode}"]
    errors = rank_errors(out)
    if errors:
        for name, text in errors.items():
            parts.append(f"--- {name} raised:\n{text.rstrip()}")
    else:
        parts.append("--- no rank wrote a traceback (rank*.error.txt)")
    for name, text in rank_logs(log_dir).items():
        parts.append(f"--- rank log {name}:\n{text}")
    parts.append(f"--- torchrun output (tail):\n{(proc.stdout + proc.stderr)[-4000:]}")
    return "\n".join(parts)


def test_torch_backend_matches_default_across_all_to_all(
    patched_site: Path, tmp_path: Path, record_property
) -> None:
    out = tmp_path / "ranks"
    log_dir = tmp_path / "torchrun-logs"
    proc = launch(patched_site, out, log_dir)
    log = (proc.stdout + proc.stderr)[-6000:]
    for name, text in rank_errors(out).items():
        record_property(f"{name}.error", text)
    if proc.returncode != 0:
        record_property("torchrun.logs", failure_report(proc, out, log_dir))
    records = {}
    for path in sorted(out.glob("rank*.json")):
        record = json.loads(path.read_text())
        records[record["rank"]] = record
    record_property("ep", EP)
    for rank, record in sorted(records.items()):
        for case in record["cases"]:
            prefix = f"rank{rank}.{case['case']}"
            record_property(f"{prefix}.tokens_received", case["tokens_received"])
            record_property(f"{prefix}.rel_l2_out", case["rel_l2_out"])
            record_property(f"{prefix}.rel_l2_dgrad", case["rel_l2_dgrad"])
    assert proc.returncode == 0, failure_report(proc, out, log_dir)
    assert sorted(records) == list(range(EP)), f"rank files {sorted(records)}:\n{log}"

    for rank, record in records.items():
        assert record["world_size"] == EP
        assert record["multicast_env"] == MULTICAST_OFF, record["multicast_env"]
        by_case = {case["case"]: case for case in record["cases"]}
        assert sorted(by_case) == sorted(CASES)
        for name, case in by_case.items():
            where = f"rank {rank} {name}"
            assert case["finite"], f"{where}: non-finite output or gradient"
            assert case["routing_matches"], f"{where}: the two layers routed differently"
            assert case["rel_l2_out"] < TOLERANCE, f"{where}: rel L2 out {case['rel_l2_out']:.3e}"
            assert case["rel_l2_dgrad"] < TOLERANCE, f"{where}: rel L2 dgrad {case['rel_l2_dgrad']:.3e}"
            assert case["starved_tokens"] == 0, f"{where}: starved experts got {case['starved_tokens']} rows"
        assert by_case["balanced"]["tokens_received"] > 0, f"rank {rank} got no token in the balanced case"
        empty = by_case["empty_rank"]
        assert empty["starved_experts"], "the empty case starved no expert"
        if EP > 1 and rank == 1:
            assert empty["tokens_received"] == 0, f"rank 1 received {empty['tokens_received']} rows"
        else:
            assert empty["tokens_received"] > 0, f"rank {rank} received no token in the empty-rank case"
