"""Patch 0001 (perf(moe)): TEGroupedMLP with moe_expert_gemm_backend="torch", on CPU.

Every test runs against the installed megatron-core with the series applied (see conftest).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tests import _moe, _patched

E, H, FFN = 4, 32, 48


@pytest.fixture(scope="module", autouse=True)
def single_rank(megatron_tree):
    _patched.init_single_rank()


def cfg(**overrides):
    return _moe.make_config(E, H, FFN, **overrides)


@pytest.mark.parametrize(
    ("overrides", "names"),
    [
        (dict(num_moe_experts=None, moe_ffn_hidden_size=None), "num_moe_experts"),
        (dict(moe_grouped_gemm=False), "moe_grouped_gemm"),
        (dict(bf16=False, params_dtype=torch.float32), "BF16"),
        (dict(params_dtype=torch.float32), "BF16"),
        (dict(add_bias_linear=True), "add_bias_linear"),
        (dict(fp8="hybrid"), "fp8"),
        (dict(fp4="e2m1"), "fp4"),
        (dict(use_transformer_engine_op_fuser=True), "use_transformer_engine_op_fuser"),
        (dict(moe_single_grouped_weight=True), "moe_single_grouped_weight"),
        (dict(moe_expert_gemm_backend="cutlass"), "'cutlass'"),
    ],
)
def test_config_rejects(overrides, names):
    with pytest.raises(ValueError) as err:
        cfg(**overrides)
    message = str(err.value)
    assert "moe_expert_gemm_backend" in message and names in message, message


def test_default_backend_unchanged():
    from megatron.core.transformer.transformer_config import TransformerConfig

    assert TransformerConfig(num_layers=1, hidden_size=8, num_attention_heads=1).moe_expert_gemm_backend == (
        "transformer_engine"
    )
    module = _moe.build_grouped(cfg(moe_expert_gemm_backend="transformer_engine"), "cpu", frozen=False)
    x, tokens, probs, grad = _moe.routed_inputs([5, 0, 7, 3], H, "cpu")
    out, dx = _moe.run(module, x, tokens, probs, grad)
    assert not module._torch_expert_gemm and dict(module.named_buffers()) == {}
    ptrs = {module.linear_fc1.get_parameter(f"weight{e}").untyped_storage().data_ptr() for e in range(E)}
    assert len(ptrs) == E  # nothing was packed
    # the default path keeps training the experts
    assert all(module.linear_fc1.get_parameter(f"weight{e}").grad is not None for e in (0, 2, 3))
    ref, ref_dx = _moe.reference(module, x, tokens, probs, grad)
    assert _moe.rel_l2(out, ref) < 1e-2 and _moe.rel_l2(dx, ref_dx) < 1e-2


@pytest.mark.parametrize("gated", [True, False], ids=["swiglu", "gelu"])
def test_parity_with_sequential_mlp(gated, record_property):
    from megatron.core.process_groups_config import ProcessGroupCollection
    from megatron.core.tensor_parallel.layers import ColumnParallelLinear, RowParallelLinear
    from megatron.core.transformer.mlp import MLPSubmodules
    from megatron.core.transformer.moe.experts import SequentialMLP

    config = cfg(gated_linear_unit=gated, activation_func=F.silu if gated else F.gelu)
    module = _moe.build_grouped(config, "cpu", seed=7)
    seq = SequentialMLP(
        E,
        config,
        MLPSubmodules(linear_fc1=ColumnParallelLinear, linear_fc2=RowParallelLinear),
        pg_collection=ProcessGroupCollection.use_mpu_process_groups(),
    ).requires_grad_(False)
    with torch.no_grad():
        for e, expert in enumerate(seq.local_experts):
            expert.linear_fc1.weight.copy_(module.linear_fc1.get_parameter(f"weight{e}"))
            expert.linear_fc2.weight.copy_(module.linear_fc2.get_parameter(f"weight{e}"))
    x, tokens, probs, grad = _moe.routed_inputs([9, 0, 13, 6], H, "cpu")
    out, dx = _moe.run(module, x, tokens, probs, grad)
    seq_out, seq_dx = _moe.run(seq, x, tokens, probs, grad)
    ref, ref_dx = _moe.reference(module, x, tokens, probs, grad)
    errors = {
        "out_vs_fp64": _moe.rel_l2(out, ref),
        "dx_vs_fp64": _moe.rel_l2(dx, ref_dx),
        "seq_out_vs_fp64": _moe.rel_l2(seq_out, ref),
        "out_vs_sequential": _moe.rel_l2(out, seq_out),
        "dx_vs_sequential": _moe.rel_l2(dx, seq_dx),
    }
    for key, value in errors.items():
        record_property(key, value)
    print(f"parity ({'swiglu' if gated else 'gelu'}):", errors)
    assert out.dtype == torch.bfloat16 and dx.dtype == torch.bfloat16
    assert all(value < 1e-2 for value in errors.values()), errors


def test_grouped_gemm_float32_operands():
    from megatron.core.transformer.moe.torch_grouped_linear import frozen_grouped_gemm

    gen = torch.Generator().manual_seed(3)
    packed = torch.randn(3, 24, 16, generator=gen)
    tokens = [5, 0, 11]
    x = torch.randn(16, 16, generator=gen, requires_grad=True)
    grad = torch.randn(16, 24, generator=gen)
    out = frozen_grouped_gemm(x, packed, tokens)
    out.backward(grad)
    x64 = x.detach().double()
    ref = torch.cat([x64[:5] @ packed[0].double().t(), x64[5:] @ packed[2].double().t()])
    ref_dx = torch.cat([grad[:5].double() @ packed[0].double(), grad[5:].double() @ packed[2].double()])
    assert _moe.rel_l2(out.detach(), ref) < 1e-5
    assert _moe.rel_l2(x.grad, ref_dx) < 1e-5


def test_zero_token_experts_and_noncontiguous_grad():
    module = _moe.build_grouped(cfg(), "cpu", seed=11)
    x, tokens, probs, _ = _moe.routed_inputs([0, 8, 0, 0], H, "cpu")
    grad = torch.randn(1, H, generator=torch.Generator().manual_seed(5)).to(torch.bfloat16).expand(8, H)
    assert not grad.is_contiguous()
    out, dx = _moe.run(module, x, tokens, probs, grad)
    ref, ref_dx = _moe.reference(module, x, tokens, probs, grad)
    assert _moe.rel_l2(out, ref) < 1e-2 and _moe.rel_l2(dx, ref_dx) < 1e-2


def test_empty_batch():
    module = _moe.build_grouped(cfg(), "cpu")
    x = torch.randn(0, H, dtype=torch.bfloat16, requires_grad=True)
    out, _ = module(x, torch.zeros(E, dtype=torch.long), torch.rand(0))
    assert out.shape == (0, H) and out.requires_grad
    out.sum().backward()
    assert x.grad is not None and x.grad.shape == (0, H)


def test_state_dict_keys_and_cross_loading():
    torch_module = _moe.build_grouped(cfg(), "cpu", seed=21)
    te_module = _moe.build_grouped(cfg(moe_expert_gemm_backend="transformer_engine"), "cpu", seed=22)
    x, tokens, probs, grad = _moe.routed_inputs([4, 6, 0, 5], H, "cpu")
    out_a, dx_a = _moe.run(torch_module, x, tokens, probs, grad)  # packs
    keys = set(torch_module.state_dict())
    assert keys == set(te_module.state_dict())
    for linear in ("linear_fc1", "linear_fc2"):
        assert {f"{linear}.weight{e}" for e in range(E)} <= keys
    assert not any("packed" in key for key in keys)
    # torch -> default backend -> torch: identical values, identical (same-arithmetic) outputs
    te_module.load_state_dict(torch_module.state_dict())
    out_te, dx_te = _moe.run(te_module, x, tokens, probs, grad)
    again = _moe.build_grouped(cfg(), "cpu", seed=23)
    _moe.run(again, x, tokens, probs, grad)  # packed with its own weights first
    again.load_state_dict(te_module.state_dict())
    for key, value in torch_module.state_dict().items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(again.state_dict()[key], value), key
    out_b, dx_b = _moe.run(again, x, tokens, probs, grad)
    assert torch.equal(out_a, out_b) and torch.equal(dx_a, dx_b)
    assert _moe.rel_l2(out_te, out_a) < 1e-2 and _moe.rel_l2(dx_te, dx_a) < 1e-2


def test_views_share_one_storage():
    module = _moe.build_grouped(cfg(), "cpu", seed=31)
    for index, linear in enumerate(("linear_fc1", "linear_fc2")):
        params = [getattr(module, linear).get_parameter(f"weight{e}") for e in range(E)]
        values = [p.detach().clone() for p in params]
        module.prepare_torch_expert_gemm()
        packed = module.packed_expert_weights()[index]
        buffer = f"{linear}._packed_weight"  # the torch grouped linear holds its packed weights
        assert packed.is_contiguous() and tuple(packed.shape) == (E, *params[0].shape)
        assert buffer in dict(module.named_buffers()) and buffer not in module.state_dict()
        for e, (param, value) in enumerate(zip(params, values, strict=True)):
            assert getattr(module, linear).get_parameter(f"weight{e}") is param
            assert param.untyped_storage().data_ptr() == packed.untyped_storage().data_ptr()
            assert param.data_ptr() == packed[e].data_ptr()
            assert torch.equal(param, value)


def test_reprepare_after_replacing_middle_expert():
    module = _moe.build_grouped(cfg(), "cpu", seed=41)
    x, tokens, probs, grad = _moe.routed_inputs([3, 5, 4, 2], H, "cpu")
    out_before, _ = _moe.run(module, x, tokens, probs, grad)
    packed_before = module.packed_expert_weights()[0]
    middle = E // 2
    weight = module.linear_fc1.get_parameter(f"weight{middle}")
    weight.data = (
        torch.randn(weight.shape, generator=torch.Generator().manual_seed(9)).to(torch.bfloat16) / H**0.5
    )
    out, dx = _moe.run(module, x, tokens, probs, grad)
    packed_after = module.packed_expert_weights()[0]
    assert packed_after is not packed_before
    assert weight.data_ptr() == packed_after[middle].data_ptr()
    rows = slice(8, 12)  # the middle expert's tokens
    assert not torch.equal(out[rows], out_before[rows])
    ref, ref_dx = _moe.reference(module, x, tokens, probs, grad)
    assert _moe.rel_l2(out, ref) < 1e-2 and _moe.rel_l2(dx, ref_dx) < 1e-2


def test_load_state_dict_after_prepare_reaches_the_packed_weights():
    module = _moe.build_grouped(cfg(), "cpu", seed=51)
    module.prepare_torch_expert_gemm()
    packed = module.packed_expert_weights()[1]
    donor = _moe.build_grouped(cfg(), "cpu", seed=52)
    module.load_state_dict(donor.state_dict())
    x, tokens, probs, grad = _moe.routed_inputs([2, 2, 2, 2], H, "cpu")
    out, _ = _moe.run(module, x, tokens, probs, grad)
    assert module.packed_expert_weights()[1] is packed  # in-place load, no re-pack needed
    donor_out, _ = _moe.run(donor, x, tokens, probs, grad)
    assert torch.equal(out, donor_out)


def test_trainable_weights_refused():
    module = _moe.build_grouped(cfg(), "cpu")
    module.linear_fc2.get_parameter("weight1").requires_grad_(True)
    with pytest.raises(RuntimeError, match="frozen expert weights"):
        module.prepare_torch_expert_gemm()
    x, tokens, probs, _ = _moe.routed_inputs([1, 1, 1, 1], H, "cpu")
    with pytest.raises(RuntimeError, match=r"linear_fc2\.weight1"):
        module(x, tokens, probs)
