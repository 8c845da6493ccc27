"""The model side of test_lora_adapter_parity_gpu.py: LoRA adapters on the grouped experts, the two
arms, the float64 reference and the parity check (see that file for what is checked and why).

A module of its own so that collecting the test imports no torch: on a CPU host the test only skips.
"""

from __future__ import annotations

import contextlib
import math

import torch
import torch.nn.functional as F

from tests import _moe

EXPERTS, HIDDEN, FFN = _moe.SUPER
NUM_TOKENS = 8192
LORA_RANK, LORA_ALPHA = 16, 32
B_INIT_SCALE = 0.5  # adapter output about as large as the base output
TOLERANCE = 1e-2  # relative L2, as in the rest of the GPU suite
SGD_LR = 0.05
LINEARS = ("linear_fc1", "linear_fc2")


class GroupedLoRA(torch.nn.Module):
    """Low-rank adapter over the routed rows of a grouped linear: `scale * (x @ A.T) @ B.T`.

    `groups` is 1 (one adapter for every row) or the number of local experts (expert e's rows use A[e],
    B[e]). Parameters are BF16 like the model (Bridge's default lora_dtype).
    """

    def __init__(self, groups: int, in_features: int, out_features: int, device, seed: int) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        a = torch.randn(groups, LORA_RANK, in_features, generator=gen) / math.sqrt(in_features)
        b = torch.randn(groups, out_features, LORA_RANK, generator=gen) * (
            B_INIT_SCALE / math.sqrt(LORA_RANK)
        )
        self.lora_a = torch.nn.Parameter(a.to(device, torch.bfloat16))
        self.lora_b = torch.nn.Parameter(b.to(device, torch.bfloat16))
        self.scale = LORA_ALPHA / LORA_RANK
        self.groups = groups

    def forward(self, x: torch.Tensor, m_splits) -> torch.Tensor:
        if isinstance(m_splits, torch.Tensor):
            m_splits = m_splits.tolist()
        if self.groups == 1:
            return F.linear(F.linear(x, self.lora_a[0]), self.lora_b[0]) * self.scale
        assert len(m_splits) == self.groups, (len(m_splits), self.groups)
        outs = [
            F.linear(F.linear(rows, self.lora_a[e]), self.lora_b[e])
            for e, rows in enumerate(torch.split(x, list(m_splits)))
        ]
        return torch.cat(outs) * self.scale


class LoRAGroupedLinear(torch.nn.Module):
    """Bridge's LoRALinear shape around a frozen grouped linear: base output + adapter output. Like
    Bridge's wrapper it holds the linear as `to_wrap` and does not expose its `weight{i}`."""

    def __init__(self, to_wrap: torch.nn.Module, adapter: GroupedLoRA) -> None:
        super().__init__()
        self.to_wrap = to_wrap
        self.adapter = adapter
        self.enabled = True
        self.adapter_calls = 0

    def forward(self, x: torch.Tensor, m_splits):
        out, bias = self.to_wrap(x, m_splits)
        if not self.enabled:
            return out, bias
        self.adapter_calls += 1
        return out + self.adapter(x, m_splits), bias


def build_arms(device, experts: int = EXPERTS, hidden: int = HIDDEN, ffn: int = FFN):
    """(torch backend, default backend) TEGroupedMLPs on the torch grouped linears, identical frozen weights."""
    torch_arm = _moe.build_grouped(_moe.squared_relu_config(experts, hidden, ffn), device, seed=2026)
    default_arm = _moe.build_grouped(
        _moe.squared_relu_config(experts, hidden, ffn, moe_expert_gemm_backend="transformer_engine"),
        device,
        seed=7,
    )
    default_arm.load_state_dict(torch_arm.state_dict())
    default_arm.requires_grad_(False)
    assert torch_arm._torch_expert_gemm and not default_arm._torch_expert_gemm
    for name in LINEARS:
        for e in range(experts):
            ours = getattr(getattr(torch_arm, name), f"weight{e}")
            theirs = getattr(getattr(default_arm, name), f"weight{e}")
            assert torch.equal(ours, theirs) and not ours.requires_grad and not theirs.requires_grad
    return torch_arm, default_arm


def attach_adapters(module, variant: str, device) -> None:
    groups = module.num_local_experts if variant == "per_expert" else 1
    for index, name in enumerate(LINEARS):
        base = getattr(module, name)
        adapter = GroupedLoRA(groups, base.in_features, base.out_features, device, seed=100 + index)
        setattr(module, name, LoRAGroupedLinear(base, adapter))


def base_weights(module) -> dict[str, torch.nn.Parameter]:
    return {
        f"{name}.weight{e}": getattr(getattr(module, name).to_wrap, f"weight{e}")
        for name in LINEARS
        for e in range(module.num_local_experts)
    }


def adapter_params(module) -> dict[str, torch.nn.Parameter]:
    return {
        f"{name}.{p}": getattr(getattr(module, name).adapter, p)
        for name in LINEARS
        for p in ("lora_a", "lora_b")
    }


@contextlib.contextmanager
def grouped_mm_calls():
    """Count the calls of torch._grouped_mm while the block runs (a spy: each call goes to torch's own
    kernel), so a test can tell which arm ran its base GEMMs as grouped kernels."""
    original, calls = torch._grouped_mm, [0]

    def counted(*args, **kwargs):
        calls[0] += 1
        return original(*args, **kwargs)

    torch._grouped_mm = counted
    try:
        yield calls
    finally:
        torch._grouped_mm = original


def run_arm(module, x, tokens, probs, grad):
    """Forward and backward of one arm: (output, input gradient, adapter gradients, grouped GEMM calls)."""
    for name in LINEARS:
        getattr(module, name).adapter_calls = 0
    with grouped_mm_calls() as grouped:
        out, dx = _moe.run(module, x, tokens, probs, grad)
    calls = {name: getattr(module, name).adapter_calls for name in LINEARS}
    assert calls == dict.fromkeys(LINEARS, 1), f"adapters ran {calls} times in one forward"
    grads = {}
    for key, param in adapter_params(module).items():
        assert param.grad is not None, f"{key} got no gradient"
        grads[key] = param.grad.detach().clone()
    return out, dx, grads, grouped[0]


def reference(module, x, tokens, probs, grad):
    """Float64 forward and gradients (input, every adapter parameter) on the module's own weights: the
    experts' reference of tests/_moe.py with each linear's adapter term added."""
    params = {key: p.detach().double().requires_grad_() for key, p in adapter_params(module).items()}
    scale = LORA_ALPHA / LORA_RANK

    def with_adapter(module, name: str, expert: int, rows: torch.Tensor) -> torch.Tensor:
        a, b = params[f"{name}.lora_a"], params[f"{name}.lora_b"]
        g = expert if a.shape[0] > 1 else 0
        base = getattr(getattr(module, name).to_wrap, f"weight{expert}").detach().double()
        return rows @ base.t() + (rows @ a[g].t()) @ b[g].t() * scale

    out, dx = _moe.reference(module, x, tokens, probs, grad, linear=with_adapter)
    return out, dx, {key: p.grad for key, p in params.items()}


def rel_l2_or_zero(value: torch.Tensor, ref: torch.Tensor) -> float:
    """rel L2, or exactly 0.0 when both are all zeros (an expert without rows)."""
    if ref.abs().max() == 0:
        return 0.0 if value.abs().max() == 0 else math.inf
    return _moe.rel_l2(value, ref)


def check_parity(
    variant: str,
    device="cuda",
    experts: int = EXPERTS,
    hidden: int = HIDDEN,
    ffn: int = FFN,
    num_tokens: int = NUM_TOKENS,
    empty: int = 20,
) -> dict[str, float | int]:
    """Both arms with adapters: forward/backward parity, the float64 reference, one SGD step. Returns figures."""
    torch_arm, default_arm = build_arms(device, experts, hidden, ffn)
    for module in (torch_arm, default_arm):
        attach_adapters(module, variant, device)
    tokens_per_expert = _moe.skewed_tokens(num_tokens, experts, seed=11, empty=empty)
    idle = [e for e, n in enumerate(tokens_per_expert) if n == 0]
    x, tokens, probs, grad = _moe.routed_inputs(tokens_per_expert, hidden, device, seed=5)
    before = {key: w.detach().clone() for key, w in base_weights(torch_arm).items()}
    adapters_before = {
        arm: {key: p.detach().clone() for key, p in adapter_params(module).items()}
        for arm, module in (("torch", torch_arm), ("default", default_arm))
    }

    out, dx, grads, grouped = run_arm(torch_arm, x, tokens, probs, grad)
    out_d, dx_d, grads_d, grouped_d = run_arm(default_arm, x, tokens, probs, grad)
    # The two arms really run different base GEMMs, so agreement (even 0.0) compares two paths: the
    # torch backend runs fc1 and fc2 forward and their input gradients as grouped kernels, the default
    # path none.
    assert grouped >= 4 and grouped_d == 0, (
        f"torch._grouped_mm calls: torch arm {grouped}, default {grouped_d}"
    )
    if device != "cpu":
        torch.cuda.synchronize()
    packed_fc1 = torch_arm.packed_expert_weights()[0]
    assert packed_fc1 is not None and packed_fc1.device == out.device  # the grouped GEMM really ran
    figures = {
        "empty_experts": len(idle),
        "grouped_mm_calls_torch_arm": grouped,
        "grouped_mm_calls_default_arm": grouped_d,
        "rel_l2_out": _moe.rel_l2(out, out_d),
        "rel_l2_dgrad": _moe.rel_l2(dx, dx_d),
    }
    for key in grads:
        figures[f"rel_l2_grad.{key}"] = _moe.rel_l2(grads[key], grads_d[key])
        if variant == "per_expert":
            per_expert = [rel_l2_or_zero(grads[key][e], grads_d[key][e]) for e in range(experts)]
            figures[f"max_expert_rel_l2_grad.{key}"] = max(per_expert)
            for e in idle:
                assert not grads[key][e].any() and not grads_d[key][e].any(), (
                    f"{key}[{e}] has no rows but a gradient"
                )

    # The adapters matter: without them the output moves far more than the tolerance.
    for name in LINEARS:
        default_arm.get_submodule(name).enabled = False
    with torch.no_grad():
        base_only, _ = default_arm(x, tokens, probs)
    for name in LINEARS:
        default_arm.get_submodule(name).enabled = True
    figures["adapter_share_of_out"] = _moe.rel_l2(base_only, out_d)

    ref_out, ref_dx, ref_grads = reference(default_arm, x, tokens, probs, grad)
    figures["ref_rel_l2_out"] = _moe.rel_l2(out, ref_out)
    figures["ref_rel_l2_dgrad"] = _moe.rel_l2(dx, ref_dx)
    for key in grads:
        figures[f"ref_rel_l2_grad.{key}"] = _moe.rel_l2(grads[key], ref_grads[key])

    # One SGD step over every parameter of each experts module: the frozen base ones have no gradient.
    for module in (torch_arm, default_arm):
        torch.optim.SGD(module.parameters(), lr=SGD_LR).step()
    if device != "cpu":
        torch.cuda.synchronize()
    for arm, module in (("torch", torch_arm), ("default", default_arm)):
        for key, weight in base_weights(module).items():
            assert weight.grad is None, f"{arm}: base {key} got a gradient"
            assert torch.equal(weight, before[key]), f"{arm}: the step changed base {key}"
        for key, param in adapter_params(module).items():
            old = adapters_before[arm][key]
            assert torch.isfinite(param).all(), f"{arm}: {key} is not finite after the step"
            assert not torch.equal(param, old), f"{arm}: the step left {key} unchanged"
            if variant == "per_expert":
                for e in range(experts):
                    moved = not torch.equal(param[e], old[e])
                    assert moved == (e not in idle), (
                        f"{arm}: {key}[{e}] moved={moved}, rows={tokens_per_expert[e]}"
                    )
    packed = torch_arm.packed_expert_weights()
    from megatron.core.transformer.moe.torch_grouped_linear import expert_weights_are_packed

    for name, buffer in zip(LINEARS, packed, strict=True):
        weights = [getattr(getattr(torch_arm, name).to_wrap, f"weight{e}") for e in range(experts)]
        assert expert_weights_are_packed(buffer, weights), (
            f"{name}: experts no longer point into the packed buffer"
        )
    stepped = adapter_params(torch_arm)
    for key, param in adapter_params(default_arm).items():
        figures[f"rel_l2_after_step.{key}"] = _moe.rel_l2(stepped[key], param)
    return figures
