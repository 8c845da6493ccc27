"""The perf(moe) patch on a GPU: torch._grouped_mm expert path at Nemotron-Super MoE shapes.

Shapes: 128 experts, hidden 1024, expert ffn 2688, non-gated squared-ReLU experts (as in
Nemotron Super): fc1 1024 -> 2688, fc2 2688 -> 1024, BF16 weights and activations.
"""

from __future__ import annotations

import pytest

from tests import _cuda, _moe, _patched

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not _cuda.available(), reason="needs a CUDA GPU"),
]

EXPERTS, HIDDEN, FFN = _moe.SUPER


@pytest.fixture(scope="module")
def super_module(megatron_tree):
    _patched.init_single_rank()
    return _moe.build_grouped(_moe.squared_relu_config(), "cuda", seed=2026)


def test_super_shapes_parity(super_module, record_property):
    import torch

    torch.manual_seed(0)
    tokens_per_expert = _moe.skewed_tokens(8192, EXPERTS, seed=1)
    n_empty = sum(1 for n in tokens_per_expert if n == 0)
    assert 15 <= n_empty <= 27, n_empty
    x, tokens, probs, grad = _moe.routed_inputs(tokens_per_expert, HIDDEN, "cuda", seed=3)
    out, dx = _moe.run(super_module, x, tokens, probs, grad)
    torch.cuda.synchronize()
    packed_fc1 = super_module.packed_expert_weights()[0]
    assert packed_fc1.is_cuda
    assert tuple(packed_fc1.shape) == (EXPERTS, FFN, HIDDEN)
    ref, ref_dx = _moe.reference(super_module, x, tokens, probs, grad)
    err_out, err_dx = _moe.rel_l2(out, ref), _moe.rel_l2(dx, ref_dx)
    record_property("empty_experts", n_empty)
    record_property("rel_l2_out", err_out)
    record_property("rel_l2_dgrad", err_dx)
    print(f"super shapes: empty experts {n_empty}, rel L2 out {err_out:.3e}, dgrad {err_dx:.3e}")
    assert err_out < 1e-2 and err_dx < 1e-2


def test_super_shapes_matches_default_backend(super_module, record_property):
    """Same weights through the default (per-expert linear) path: only summation order differs."""
    config = _moe.squared_relu_config(moe_expert_gemm_backend="transformer_engine")
    default = _moe.build_grouped(config, "cuda", seed=1)
    default.load_state_dict(super_module.state_dict())
    tokens_per_expert = _moe.skewed_tokens(4096, EXPERTS, seed=2)
    x, tokens, probs, grad = _moe.routed_inputs(tokens_per_expert, HIDDEN, "cuda", seed=4)
    out, dx = _moe.run(super_module, x, tokens, probs, grad)
    out_d, dx_d = _moe.run(default, x, tokens, probs, grad)
    err_out, err_dx = _moe.rel_l2(out, out_d), _moe.rel_l2(dx, dx_d)
    record_property("rel_l2_out_vs_default", err_out)
    record_property("rel_l2_dgrad_vs_default", err_dx)
    print(f"vs default backend: rel L2 out {err_out:.3e}, dgrad {err_dx:.3e}")
    assert err_out < 1e-2 and err_dx < 1e-2
    del default


def test_empty_batch_cuda(super_module):
    import torch

    x = torch.randn(0, HIDDEN, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    out, _ = super_module(x, torch.zeros(EXPERTS, dtype=torch.long), torch.rand(0, device="cuda"))
    assert out.shape == (0, HIDDEN) and out.is_cuda
    out.sum().backward()
    torch.cuda.synchronize()
    assert x.grad is not None and x.grad.shape == (0, HIDDEN)


def test_noncontiguous_grad_and_single_expert_cuda(super_module):
    import torch

    tokens_per_expert = [0] * EXPERTS
    tokens_per_expert[77] = 300
    x, tokens, probs, _ = _moe.routed_inputs(tokens_per_expert, HIDDEN, "cuda", seed=6)
    gen = torch.Generator(device="cuda").manual_seed(8)
    grad = torch.randn(1, HIDDEN, generator=gen, device="cuda").to(torch.bfloat16).expand(300, HIDDEN)
    out, dx = _moe.run(super_module, x, tokens, probs, grad)
    ref, ref_dx = _moe.reference(super_module, x, tokens, probs, grad)
    assert _moe.rel_l2(out, ref) < 1e-2 and _moe.rel_l2(dx, ref_dx) < 1e-2
