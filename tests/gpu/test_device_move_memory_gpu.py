"""The perf(moe) patch's memory promise on a GPU: building the experts on the CPU, moving them with
`.cuda()` (as Megatron does after building a model) and running the first forward and backward peaks
at the default path's allocated memory, not at two or three copies of the frozen experts.

Shapes: Nemotron-Super's MoE layer, 128 experts, hidden 1024, expert ffn 2688, squared ReLU, BF16; the
frozen expert weights are 1.41 GB, so one extra copy of them is ~90% over the default path's peak.
"""

from __future__ import annotations

import pytest

from tests import _cuda, _moe, _patched

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not _cuda.available(), reason="needs a CUDA GPU"),
]

EXPERTS, HIDDEN, FFN = _moe.SUPER
ROWS = 8192
# Activations and workspaces differ a little between one grouped kernel and a loop of GEMMs.
TOLERANCE = 0.05


def peak_of_build_move_and_step(backend: str) -> tuple[int, int]:
    """(peak allocated bytes above the start, distinct fc1 expert storages after the move)."""
    import torch

    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    start = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    config = _moe.squared_relu_config(moe_expert_gemm_backend=backend)
    module = _moe.build_grouped(config, "cpu", seed=7).cuda()
    storages = {getattr(module.linear_fc1, f"weight{e}").untyped_storage().data_ptr() for e in range(EXPERTS)}
    tokens_per_expert = [ROWS // EXPERTS] * EXPERTS
    x, tokens, probs, grad = _moe.routed_inputs(tokens_per_expert, HIDDEN, "cuda", seed=3)
    _moe.run(module, x, tokens, probs, grad)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - start
    del module, x, tokens, probs, grad
    torch.cuda.empty_cache()
    return peak, len(storages)


def test_build_move_and_first_step_peak_like_the_default_path(megatron_tree, record_property):
    _patched.init_single_rank()
    default_peak, default_storages = peak_of_build_move_and_step("transformer_engine")
    torch_peak, torch_storages = peak_of_build_move_and_step("torch")
    record_property("peak_mib_default", round(default_peak / 2**20, 1))
    record_property("peak_mib_torch", round(torch_peak / 2**20, 1))
    record_property("peak_ratio", round(torch_peak / default_peak, 4))
    print(
        f"peak after build + .cuda() + fwd/bwd: default {default_peak / 2**20:.0f} MiB, torch {torch_peak / 2**20:.0f} MiB"
    )
    assert default_storages == EXPERTS  # one Parameter each on the default path
    assert torch_storages == 1, f"after .cuda() the torch path's experts live in {torch_storages} storages"
    assert torch_peak <= default_peak * (1 + TOLERANCE), (torch_peak, default_peak)
