"""The perf(moe) patch: TEGroupedMLP with moe_expert_gemm_backend="torch", on CPU.

Every test runs against the installed megatron-core with the series applied (see conftest). The
patch's own unit tests (config guards, parity, empty experts, state dicts, packing, re-packing,
trainable weights refused, adapters) run in test_in_patch_units.py; what stays here is what they do
not cover.
"""

from __future__ import annotations

import pytest

from tests import _moe, _patched

E, H, FFN = 4, 32, 48


@pytest.fixture(scope="module", autouse=True)
def single_rank(megatron_tree):
    _patched.init_single_rank()


def cfg(**overrides):
    return _moe.make_config(E, H, FFN, **overrides)


def test_grouped_gemm_float32_operands():
    import torch
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


def test_load_state_dict_after_prepare_reaches_the_packed_weights():
    import torch

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


def test_the_skewed_routing_depends_on_its_seed_alone():
    """The GPU suite's routing (tests/_moe.skewed_tokens) is a function of its seed: the counts, and
    so which experts are empty, must not change with what drew from torch's global RNG before (they
    did: the draw ignored the seeded generator, and the CPU parity check below once saw 3 empty experts
    where it asked for 2)."""
    import torch

    from tests import _moe

    torch.manual_seed(1)
    first = _moe.skewed_tokens(64, 8, seed=11, empty=2)
    torch.manual_seed(2)
    torch.rand(1000)
    assert _moe.skewed_tokens(64, 8, seed=11, empty=2) == first
    assert sum(first) == 64 and sum(1 for n in first if n == 0) == 2


@pytest.mark.parametrize("variant", ["shared", "per_expert"])
def test_the_gpu_suites_lora_parity_check_holds_on_cpu_at_small_shapes(variant: str):
    """tests/gpu/_lora.py's whole check (both arms with adapters, the float64 reference it shares with
    tests/_moe.py, one SGD step) at 8 experts of 32 -> 48 on CPU (torch._grouped_mm runs there): the GPU
    suite's model code is run by every `make test`, not only on the GPU host."""
    from tests.gpu import _lora

    figures = _lora.check_parity(variant, device="cpu", experts=8, hidden=H, ffn=FFN, num_tokens=64, empty=2)
    assert figures["empty_experts"] == 2
    assert figures["adapter_share_of_out"] > 0.1, "the adapters barely change the output"
    checked = {k: v for k, v in figures.items() if "rel_l2" in k and k != "adapter_share_of_out"}
    assert len([k for k in checked if k.startswith("ref_rel_l2_grad.")]) == 4
    failed = {k: v for k, v in checked.items() if not v < _lora.TOLERANCE}
    assert not failed, f"relative L2 over {_lora.TOLERANCE}: {failed}"
