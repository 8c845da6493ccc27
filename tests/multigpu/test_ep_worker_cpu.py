"""CPU checks of the expert-parallel launch: which experts the empty-rank case starves, and how a failing
rank's traceback reaches the test report. Not GPU-marked: these run everywhere (CI included), while
test_ep_alltoall.py needs FORKCTL_EP GPUs.
"""

from __future__ import annotations

import subprocess

import pytest

from tests.multigpu import ep_worker
from tests.multigpu import test_ep_alltoall as ep_test

DEFAULT_EXPERTS = ep_worker.parse_args(["--out", "unused"]).experts


def owned_by(rank: int, num_experts: int, world_size: int) -> list[int]:
    """The global experts rank `rank` holds under EP = world_size (contiguous blocks, as megatron splits)."""
    per_rank = num_experts // world_size
    return list(range(rank * per_rank, (rank + 1) * per_rank))


@pytest.mark.parametrize("num_experts", [DEFAULT_EXPERTS, 32, 128])
@pytest.mark.parametrize("world_size", [2, 4, 8])
def test_starved_experts_are_exactly_rank_1s(world_size: int, num_experts: int) -> None:
    starved = ep_worker.starved_experts(num_experts, world_size)
    assert starved, "the empty-rank case starves no expert"
    assert starved == owned_by(ep_worker.STARVED_RANK, num_experts, world_size)
    for rank in range(world_size):
        if rank != ep_worker.STARVED_RANK:
            assert not set(starved) & set(owned_by(rank, num_experts, world_size)), rank


@pytest.mark.parametrize("num_experts", [DEFAULT_EXPERTS, 4, 128])
def test_starved_experts_on_one_rank_are_a_block(num_experts: int) -> None:
    starved = ep_worker.starved_experts(num_experts, 1)
    assert starved, "the empty-rank case starves no expert"
    assert starved == list(range(starved[0], starved[-1] + 1)), "not one contiguous block"
    assert len(starved) < num_experts, "every expert starved: no token could be routed"
    assert starved == owned_by(1, num_experts, 4)  # the block rank 1 would hold under EP4


def test_starved_experts_refuses_an_uneven_split() -> None:
    with pytest.raises(ValueError, match="do not split"):
        ep_worker.starved_experts(16, 3)


def test_default_run_starves_rank_1_at_ep2() -> None:
    """The regression: EP=2 used to starve experts 4..7 (rank 0's), so rank 1 still received tokens."""
    assert ep_worker.starved_experts(DEFAULT_EXPERTS, 2) == list(range(8, 16))


def test_worker_records_a_rank_traceback(tmp_path, monkeypatch) -> None:
    def explode(_args):
        raise RuntimeError("NCCL said no")

    monkeypatch.setattr(ep_worker, "run", explode)
    monkeypatch.setenv("RANK", "3")
    out = tmp_path / "ranks"
    with pytest.raises(RuntimeError, match="NCCL said no"):
        ep_worker.main(["--out", str(out)])
    text = (out / "rank3.error.txt").read_text()
    assert "Traceback (most recent call last)" in text
    assert "RuntimeError: NCCL said no" in text and "explode" in text


def test_worker_without_a_failure_writes_no_traceback(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(ep_worker, "run", lambda _args: 1)
    monkeypatch.setenv("RANK", "0")
    out = tmp_path / "ranks"
    assert ep_worker.main(["--out", str(out)]) == 1  # a failed check: exit 1, but nothing raised
    assert not out.exists() or not list(out.glob("*.error.txt"))


def test_failure_report_carries_tracebacks_and_rank_logs(tmp_path) -> None:
    out, log_dir = tmp_path / "ranks", tmp_path / "logs"
    out.mkdir()
    (out / "rank1.error.txt").write_text("Traceback (most recent call last):\nValueError: rank one broke\n")
    rank_dir = log_dir / "run_abc" / "attempt_0" / "1"
    rank_dir.mkdir(parents=True)
    (rank_dir / "stderr.log").write_text("some warning\nValueError: rank one broke\n")
    (rank_dir / "stdout.log").write_text("")
    proc = subprocess.CompletedProcess(["torchrun"], 1, stdout="", stderr="ChildFailedError: rank 1")
    report = ep_test.failure_report(proc, out, log_dir)
    assert "torchrun exit code 1" in report
    assert "--- rank1 raised:" in report and "ValueError: rank one broke" in report
    assert "--- rank log 1/stderr.log:" in report and "some warning" in report
    assert "1/stdout.log" not in report  # empty logs are left out
    assert "ChildFailedError: rank 1" in report
    assert ep_test.rank_errors(out) == {"rank1": (out / "rank1.error.txt").read_text()}


def test_torchrun_keeps_per_rank_logs(tmp_path) -> None:
    cmd = ep_test.torchrun_command(tmp_path / "ranks", tmp_path / "logs", nproc=2)
    assert "--nproc_per_node=2" in cmd and f"--log-dir={tmp_path / 'logs'}" in cmd and "--tee=3" in cmd
    assert cmd[cmd.index(str(ep_test.WORKER)) + 1 :] == ["--out", str(tmp_path / "ranks")]
