"""tests/multigpu/ep_worker.py --build-only on the CPU: both MoE layers built on the patched megatron-core.

Its `main` runs in this process, beside the other patch tests (the worker has torch, and usually the
patched megatron, imported already); `python tests/multigpu/ep_worker.py --help` in
tests/test_validate_ep.py checks that the script starts on its own, as torchrun starts it.
"""

from __future__ import annotations

from pathlib import Path

import pytest


def test_worker_builds_both_layers_on_cpu(megatron_tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from megatron.core import parallel_state

    from tests.multigpu import ep_worker

    # --build-only sets up model parallelism itself (expert parallel 1), as a fresh rank would.
    if parallel_state.model_parallel_is_initialized():
        parallel_state.destroy_model_parallel()
    assert ep_worker.main(["--build-only"]) == 0
    stdout = capsys.readouterr().out
    assert "build-only: TEGroupedMLP/" in stdout and "same weights: True" in stdout
