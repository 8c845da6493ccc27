"""Standalone check run in a child interpreter by test_recompute_guard_gpu.py.

Builds a 2-layer TransformerBlock (local spec) with full activation recompute, freezes it and
its input (as with a frozen embedding), wraps each layer's mlp.linear_fc1 in a trainable
low-rank adapter, runs backward and checks that every adapter parameter gets a nonzero gradient.

Exit codes: 0 all adapters got gradients; 3 some adapter got none (the bug); anything else is a
crash. The megatron copy to test is whatever PYTHONPATH puts first; it is printed.
"""

from __future__ import annotations

import sys

import torch

MISSING = 3


class LowRankAdapter(torch.nn.Module):
    def __init__(self, base, rank=4):
        super().__init__()
        self.base = base
        out_features, in_features = base.weight.shape
        gen = torch.Generator(device=base.weight.device).manual_seed(17)
        kw = dict(dtype=base.weight.dtype, device=base.weight.device)
        # both factors random, so each one gets a nonzero gradient
        self.lora_a = torch.nn.Parameter(torch.randn(rank, in_features, generator=gen, **kw) * 0.1)
        self.lora_b = torch.nn.Parameter(torch.randn(out_features, rank, generator=gen, **kw) * 0.1)

    def forward(self, x):
        out, bias = self.base(x)
        return out + (x @ self.lora_a.t()) @ self.lora_b.t(), bias


def main(recompute_method: str) -> int:
    import megatron.core
    import torch.distributed as dist
    from megatron.core import parallel_state
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed
    from megatron.core.transformer.transformer_block import TransformerBlock
    from megatron.core.transformer.transformer_config import TransformerConfig

    print("megatron.core from", megatron.core.__file__)
    torch.cuda.set_device(0)
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    parallel_state.initialize_model_parallel(1, 1)
    model_parallel_cuda_manual_seed(123)
    torch.manual_seed(0)
    config = TransformerConfig(
        num_layers=2,
        hidden_size=64,
        num_attention_heads=4,
        use_cpu_initialization=True,
        recompute_granularity="full",
        recompute_method=recompute_method,
        recompute_num_layers=1 if recompute_method == "uniform" else 2,
        # float32: the local spec's norms keep float32 weights, and the bug does not depend on dtype.
        params_dtype=torch.float32,
    )
    block = TransformerBlock(config, get_gpt_layer_local_spec()).cuda()
    block.requires_grad_(False)
    adapters = []
    for layer in block.layers:
        layer.mlp.linear_fc1 = LowRankAdapter(layer.mlp.linear_fc1)
        adapters.append(layer.mlp.linear_fc1)
    block.train()
    seq, batch = 16, 2
    gen = torch.Generator(device="cuda").manual_seed(5)
    hidden = torch.randn(seq, batch, 64, generator=gen, device="cuda")  # frozen embedding output
    assert not hidden.requires_grad
    mask = torch.ones((1, 1, seq, seq), dtype=torch.bool, device="cuda")
    out = block(hidden_states=hidden, attention_mask=mask)
    if not out.requires_grad:
        print("ADAPTER_GRAD_MISSING: block output does not require grad")
        return MISSING
    out.float().pow(2).mean().backward()
    missing = []
    for i, adapter in enumerate(adapters):
        for name in ("lora_a", "lora_b"):
            grad = getattr(adapter, name).grad
            if grad is None or not torch.isfinite(grad).all() or grad.abs().sum() == 0:
                missing.append(f"layer{i}.{name}")
            else:
                print(f"layer{i}.{name} grad norm {grad.float().norm().item():.4e}")
    if missing:
        print("ADAPTER_GRAD_MISSING:", ", ".join(missing))
        return MISSING
    print("ADAPTER_GRADS_OK")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "uniform"))
