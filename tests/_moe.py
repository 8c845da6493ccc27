"""Builders and float64 references for the MoE expert-backend tests (CPU and GPU).

megatron is imported inside the functions only: the patched copy must be on sys.path first. So is torch:
importing this module while pytest collects must not import it (seconds per xdist worker).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

# Nemotron-3-Super's MoE layer (FACTS.md): experts, hidden size, expert ffn; its experts are non-gated
# squared ReLU.
SUPER = (128, 1024, 2688)


def make_config(num_experts: int, hidden: int, ffn: int, **overrides):
    import torch
    import torch.nn.functional as F
    from megatron.core.transformer.transformer_config import TransformerConfig

    kwargs = dict(
        num_layers=1,
        hidden_size=hidden,
        num_attention_heads=4,
        num_moe_experts=num_experts,
        moe_ffn_hidden_size=ffn,
        moe_grouped_gemm=True,
        add_bias_linear=False,
        bf16=True,
        params_dtype=torch.bfloat16,
        use_cpu_initialization=True,
        perform_initialization=False,
        gated_linear_unit=True,
        activation_func=F.silu,
        moe_expert_gemm_backend="torch",
    )
    kwargs.update(overrides)
    return TransformerConfig(**kwargs)


def squared_relu_config(experts: int = SUPER[0], hidden: int = SUPER[1], ffn: int = SUPER[2], **overrides):
    """make_config for non-gated squared-ReLU experts, as Nemotron-Super's (its shapes by default)."""
    from megatron.core.activations import squared_relu

    return make_config(
        experts, hidden, ffn, **{"gated_linear_unit": False, "activation_func": squared_relu, **overrides}
    )


def skewed_tokens(num_tokens: int, num_experts: int, seed: int, empty: int = 20) -> list[int]:
    """Zipf-like rows per expert, as a trained router gives; `empty` randomly chosen experts get none."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    idle = set(torch.randperm(num_experts, generator=gen)[:empty].tolist())
    weights = torch.tensor(
        [0.0 if e in idle else (1 + (e * 53) % num_experts) ** -1.1 for e in range(num_experts)],
        dtype=torch.float64,
    )
    # Drawn with the seeded generator (a Multinomial distribution's sample() draws from the global RNG,
    # so the counts, and the experts left empty by chance, changed with whatever ran before).
    rows = torch.multinomial(weights, num_tokens, replacement=True, generator=gen)
    return [int(n) for n in torch.bincount(rows, minlength=num_experts).tolist()]


def build_grouped(config, device, seed: int = 0, frozen: bool = True):
    """TEGroupedMLP on the torch-native grouped linears, with seeded random weights."""
    import torch
    from megatron.core.process_groups_config import ProcessGroupCollection
    from megatron.core.transformer.moe.experts import TEGroupedMLP
    from megatron.core.transformer.moe.torch_grouped_linear import get_torch_grouped_mlp_submodules

    pg = ProcessGroupCollection.use_mpu_process_groups()
    module = TEGroupedMLP(
        config.num_moe_experts, config, get_torch_grouped_mlp_submodules(), pg_collection=pg
    )
    module = module.to(device)
    gen = torch.Generator(device=device).manual_seed(seed)
    with torch.no_grad():
        for linear in (module.linear_fc1, module.linear_fc2):
            for e in range(config.num_moe_experts):
                weight = getattr(linear, f"weight{e}")
                fresh = torch.randn(weight.shape, generator=gen, device=device) / weight.shape[1] ** 0.5
                weight.copy_(fresh.to(weight.dtype))
    module.requires_grad_(not frozen)
    return module


def routed_inputs(tokens_per_expert, hidden: int, device, seed: int = 1234):
    import torch

    gen = torch.Generator(device="cpu").manual_seed(seed)
    n = int(sum(tokens_per_expert))
    x = torch.randn(n, hidden, generator=gen).to(device, torch.bfloat16)
    probs = (torch.rand(n, generator=gen) + 0.5).to(device, torch.float32)
    grad = torch.randn(n, hidden, generator=gen).to(device, torch.bfloat16)
    return x, torch.tensor(list(tokens_per_expert), dtype=torch.long), probs, grad


def run(module, x, tokens, probs, grad):
    """Forward and input gradient of an experts module (TEGroupedMLP or SequentialMLP)."""
    x = x.detach().clone().requires_grad_()
    out, bias = module(x, tokens, probs)
    assert bias is None
    out.backward(grad)
    return out.detach(), x.grad


def expert_linear(module, name: str, expert: int, rows):
    """`rows @ W.T` in float64, W the expert's own weight in `module.<name>` (linear_fc1 or linear_fc2)."""
    return rows @ getattr(getattr(module, name), f"weight{expert}").detach().double().t()


def reference(module, x, tokens, probs, grad, linear=expert_linear):
    """Per-expert float64 forward and input gradient on the module's own weights.

    Mirrors TEGroupedMLP's unfused activation path: fc1, (gated) activation, times the routing
    probability, fc2. `linear(module, name, expert, rows)` computes one linear of one expert (the LoRA
    tests add their adapters' term there, tests/gpu/_lora.py).
    """
    import torch

    config = module.config
    x64 = x.detach().double().requires_grad_()
    splits = tokens.tolist()
    outs = []
    for e, (rows, p) in enumerate(
        zip(torch.split(x64, splits), torch.split(probs.double(), splits), strict=True)
    ):
        h = linear(module, "linear_fc1", e, rows)
        if config.gated_linear_unit:
            gate, lin = torch.chunk(h, 2, dim=-1)
            h = config.activation_func(gate) * lin
        else:
            h = config.activation_func(h)
        h = h * p.unsqueeze(-1)
        outs.append(linear(module, "linear_fc2", e, h))
    out = torch.cat(outs)
    out.backward(grad.double())
    return out.detach(), x64.grad


def rel_l2(value: torch.Tensor, ref: torch.Tensor) -> float:
    """||value - ref|| / ||ref||; fails on NaN/Inf and on an all-zero reference."""
    import torch

    value, ref = value.double().cpu(), ref.double().cpu()
    assert value.shape == ref.shape, (value.shape, ref.shape)
    assert torch.isfinite(value).all(), "non-finite values"
    ref_norm = ref.norm()
    assert ref_norm > 0, "reference is all zeros"
    return ((value - ref).norm() / ref_norm).item()
