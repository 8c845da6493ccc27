"""Frozen-expert MoE layer at the Nemotron-3-Super expert shapes: per-expert GEMMs vs one grouped GEMM.

Two levels, both forward plus the input gradient only (frozen weights: no wgrad), same weights and inputs:

The expert layer (fc1, squared ReLU, times the routing probability, fc2), three arms, four with TE:
  per_expert      TEGroupedMLP on its default path over the torch grouped linears, which launch one GEMM
                  per expert: TE's grouped-linear launch pattern when it has no grouped kernel, with the
                  layer's activation code unchanged, so only the GEMM strategy differs from torch_grouped;
  sequential_mlp  megatron's SequentialMLP (one MLP module per expert);
  te_grouped      where Transformer Engine imports: TEGroupedMLP on megatron's TE grouped linears
                  (TEColumnParallelGroupedLinear / TERowParallelGroupedLinear), the path production runs
                  and the feature replaces: then the baseline the speedups are quoted against;
  torch_grouped   TEGroupedMLP with moe_expert_gemm_backend="torch": one torch._grouped_mm per linear.
  Peak memory counts each arm's own weights (and packed buffer) plus the step's peak, so a packed buffer
  that duplicated the weights would show here.

The expert GEMMs alone (fc1, fc2 forward and their input gradients; no activation), two arms, three
with TE:
  gemm_per_expert one torch.matmul per expert and linear;
  gemm_te         where Transformer Engine imports: two frozen te.pytorch.GroupedLinear (fc1, fc2);
  gemm_grouped    the patch's frozen_grouped_gemm (torch._grouped_mm) on the packed weights.
  The ceiling and roofline targets are judged here: they are statements about GEMMs.

FLOPs counted: 4 GEMMs per step (fc1 and fc2 forward, fc1 and fc2 dgrad), each 2 * rows * K * N.
Ceilings measured in the same run: dense bf16 matmul 8192^3 (TFLOP/s) and device-to-device copy
bandwidth (read + write bytes per second). Roofline time = max(FLOPs / dense ceiling, bytes of the
expert weights read (once forward, once backward) / copy bandwidth).

Needs the patched megatron-core first on sys.path (PYTHONPATH, --megatron DIR, or the folder in
$FORKCTL_PATCHED_MEGATRON, as `forkctl validate` sets it). `--smoke` runs tiny shapes on CPU.

    python bench/grouped_gemm.py --out bench.json [--rows 8192,32768,131072] [--plot bench.png]
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

ARMS = ("per_expert", "sequential_mlp", "te_grouped", "torch_grouped")
GEMM_ARMS = ("gemm_per_expert", "gemm_te", "gemm_grouped")
TARGETS = {"speedup": 2.0, "speedup_vs_te": 1.0, "pct_dense_ceiling": 75.0, "pct_roofline": 85.0}
# Both layer arms run the same TEGroupedMLP code around the GEMMs; the grouped path adds only small
# bookkeeping tensors (the int32 offsets), far below 1 MiB. A duplicated weight buffer would add
# hundreds of MiB (704 MiB per linear at the Super shapes), so this slack cannot hide one.
MEMORY_SLACK_MIB = 1.0


@dataclass(frozen=True)
class Shape:
    experts: int
    hidden: int
    ffn: int
    empty_range: tuple[int, int]  # how many experts get no tokens, drawn in this closed range


SUPER = Shape(experts=128, hidden=1024, ffn=2688, empty_range=(15, 27))
SMOKE = Shape(experts=4, hidden=64, ffn=96, empty_range=(1, 1))


def squared_relu(x: torch.Tensor) -> torch.Tensor:
    return torch.pow(torch.relu(x), 2)


# --- routing and data ---------------------------------------------------------------------------


def skewed_counts(rows: int, shape: Shape, gen: torch.Generator) -> list[int]:
    """Zipf-like token counts over a random order of the experts, with a random number left empty."""
    low, high = shape.empty_range
    empty = int(torch.randint(low, high + 1, (1,), generator=gen))
    order = torch.randperm(shape.experts, generator=gen).tolist()
    live = order[empty:]
    weights = torch.tensor([1.0 / (rank + 1) for rank in range(len(live))], dtype=torch.float64)
    shares = (weights / weights.sum() * rows).floor().long()
    shares[0] += rows - int(shares.sum())  # the busiest expert takes the rounding remainder
    counts = [0] * shape.experts
    for expert, share in zip(live, shares.tolist(), strict=True):
        counts[expert] = share
    return counts


@dataclass
class Inputs:
    x: torch.Tensor
    probs: torch.Tensor
    grad: torch.Tensor


def make_inputs(rows: int, shape: Shape, sets: int, device: torch.device, seed: int) -> list[Inputs]:
    """Several fresh random input sets (drawn on the device), rotated between timed runs so that L2
    holds none of them."""
    gen = torch.Generator(device=device).manual_seed(seed)
    return [
        Inputs(
            x=torch.randn(rows, shape.hidden, generator=gen, device=device, dtype=torch.bfloat16),
            probs=torch.rand(rows, generator=gen, device=device, dtype=torch.float32) + 0.5,
            grad=torch.randn(rows, shape.hidden, generator=gen, device=device, dtype=torch.bfloat16),
        )
        for _ in range(sets)
    ]


# --- the arms -------------------------------------------------------------------------------------

Step = Callable[[Inputs], torch.Tensor]  # forward + backward; returns the output (for parity checks)
ArmBuilder = Callable[[list[int]], Step]  # builds an arm (its module and weights) for one routing


def gemm_per_expert_arm(fc1: torch.Tensor, fc2: torch.Tensor, counts: list[int]) -> Step:
    """The four expert GEMMs, one torch.matmul per expert and linear (fc1/fc2: [E, out, in], frozen)."""

    def step(inputs: Inputs) -> torch.Tensor:
        x = inputs.x.detach().requires_grad_()
        outs = [
            torch.matmul(torch.matmul(rows, fc1[expert].t()), fc2[expert].t())
            for expert, rows in enumerate(torch.split(x, counts))
        ]
        out = torch.cat(outs)
        out.backward(inputs.grad)
        return out.detach()

    return step


def gemm_grouped_arm(fc1: torch.Tensor, fc2: torch.Tensor, counts: list[int]) -> Step:
    """The same four GEMMs through the patch's frozen_grouped_gemm: one grouped kernel each."""
    from megatron.core.transformer.moe.torch_grouped_linear import frozen_grouped_gemm, grouped_gemm_offsets

    offs = grouped_gemm_offsets(counts, fc1.device)

    def step(inputs: Inputs) -> torch.Tensor:
        x = inputs.x.detach().requires_grad_()
        out = frozen_grouped_gemm(frozen_grouped_gemm(x, fc1, counts, offs), fc2, counts, offs)
        out.backward(inputs.grad)
        return out.detach()

    return step


def megatron_step(module: torch.nn.Module, counts: list[int]) -> Step:
    tokens = torch.tensor(counts, dtype=torch.long)

    def step(inputs: Inputs) -> torch.Tensor:
        x = inputs.x.detach().requires_grad_()
        out, _ = module(x, tokens, inputs.probs)
        out.backward(inputs.grad)
        return out.detach()

    return step


def init_megatron(megatron_dir: str | None) -> None:
    """Put the patched package first and set up single-rank model parallelism (gloo, no NCCL)."""
    folder = megatron_dir or os.environ.get("FORKCTL_PATCHED_MEGATRON")
    if folder:
        sys.path.insert(0, folder)
    import torch.distributed as dist
    from megatron.core import parallel_state

    if not dist.is_initialized():
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    if not parallel_state.model_parallel_is_initialized():
        parallel_state.initialize_model_parallel(1, 1)


def make_config(shape: Shape, grouped: bool, fused: bool, backend: str = "transformer_engine"):
    from megatron.core.transformer.transformer_config import TransformerConfig

    extra: dict[str, Any] = {"moe_expert_gemm_backend": backend} if grouped else {}
    return TransformerConfig(
        num_layers=1,
        hidden_size=shape.hidden,
        num_attention_heads=4,
        num_moe_experts=shape.experts,
        moe_ffn_hidden_size=shape.ffn,
        ffn_hidden_size=shape.ffn,
        moe_grouped_gemm=grouped,
        add_bias_linear=False,
        bf16=True,
        params_dtype=torch.bfloat16,
        use_cpu_initialization=True,
        perform_initialization=False,
        gated_linear_unit=False,
        activation_func=squared_relu_megatron(),
        bias_activation_fusion=False,
        # Megatron's fused weighted squared ReLU (a torch.compile kernel, no TE needed): the activation
        # path a Nemotron-style squared-ReLU MoE trains with. Off: TEGroupedMLP's unfused path, whose
        # fp32 probability multiply costs as much as the grouped GEMMs at 128k rows.
        use_fused_weighted_squared_relu=fused,
        **extra,
    )


def squared_relu_megatron() -> Callable[[torch.Tensor], torch.Tensor]:
    # The same activation object the GPU parity tests use, so TEGroupedMLP takes the same path.
    from megatron.core.activations import squared_relu as megatron_squared_relu

    return megatron_squared_relu


def sequential_arm(
    shape: Shape, fc1: torch.Tensor, fc2: torch.Tensor, device: torch.device, fused: bool
) -> torch.nn.Module:
    from megatron.core.process_groups_config import ProcessGroupCollection
    from megatron.core.tensor_parallel import ColumnParallelLinear, RowParallelLinear
    from megatron.core.transformer.mlp import MLPSubmodules
    from megatron.core.transformer.moe.experts import SequentialMLP

    submodules = MLPSubmodules(linear_fc1=ColumnParallelLinear, linear_fc2=RowParallelLinear)
    pg = ProcessGroupCollection.use_mpu_process_groups()
    module = SequentialMLP(
        shape.experts, make_config(shape, grouped=False, fused=fused), submodules, pg_collection=pg
    )
    module = module.to(device)
    with torch.no_grad():
        for expert, mlp in enumerate(module.local_experts):
            mlp.linear_fc1.weight.copy_(fc1[expert])
            mlp.linear_fc2.weight.copy_(fc2[expert])
    return module.requires_grad_(False)


def grouped_arm(
    shape: Shape,
    fc1: torch.Tensor,
    fc2: torch.Tensor,
    device: torch.device,
    fused: bool,
    backend: str = "torch",
) -> torch.nn.Module:
    """TEGroupedMLP over the patch's torch grouped linears; `backend` picks its expert GEMM path."""
    from megatron.core.process_groups_config import ProcessGroupCollection
    from megatron.core.transformer.moe.experts import TEGroupedMLP
    from megatron.core.transformer.moe.torch_grouped_linear import get_torch_grouped_mlp_submodules

    pg = ProcessGroupCollection.use_mpu_process_groups()
    config = make_config(shape, grouped=True, fused=fused, backend=backend)
    module = TEGroupedMLP(shape.experts, config, get_torch_grouped_mlp_submodules(), pg_collection=pg)
    module = module.to(device)
    with torch.no_grad():
        for expert in range(shape.experts):
            getattr(module.linear_fc1, f"weight{expert}").copy_(fc1[expert])
            getattr(module.linear_fc2, f"weight{expert}").copy_(fc2[expert])
    return module.requires_grad_(False)


def transformer_engine_version() -> tuple[str | None, str]:
    """(TE's version, "") where its PyTorch part imports, else (None, why not)."""
    try:
        import transformer_engine
        import transformer_engine.pytorch
    except Exception as error:  # an ImportError, or TE's own check of its library failing at import
        return None, f"Transformer Engine is not importable ({type(error).__name__}: {error})"
    return str(transformer_engine.__version__), ""


def te_grouped_arm(shape: Shape, fc1: torch.Tensor, fc2: torch.Tensor, fused: bool) -> torch.nn.Module:
    """TEGroupedMLP on megatron's TE grouped linears (the default production path), same weights."""
    from megatron.core.extensions.transformer_engine import (
        TEColumnParallelGroupedLinear,
        TERowParallelGroupedLinear,
    )
    from megatron.core.process_groups_config import ProcessGroupCollection
    from megatron.core.transformer.mlp import MLPSubmodules
    from megatron.core.transformer.moe.experts import TEGroupedMLP

    config = make_config(shape, grouped=True, fused=fused, backend="transformer_engine")
    config.use_cpu_initialization = False  # TE allocates its weights on the current CUDA device
    submodules = MLPSubmodules(
        linear_fc1=TEColumnParallelGroupedLinear, linear_fc2=TERowParallelGroupedLinear
    )
    pg = ProcessGroupCollection.use_mpu_process_groups()
    module = TEGroupedMLP(shape.experts, config, submodules, pg_collection=pg).cuda()
    with torch.no_grad():
        for expert in range(shape.experts):
            getattr(module.linear_fc1, f"weight{expert}").copy_(fc1[expert])
            getattr(module.linear_fc2, f"weight{expert}").copy_(fc2[expert])
    return module.requires_grad_(False)


def gemm_te_arm(fc1: torch.Tensor, fc2: torch.Tensor, counts: list[int]) -> Step:
    """The four expert GEMMs through two frozen te.pytorch.GroupedLinear (TE's own grouped launch)."""
    import transformer_engine.pytorch as te

    experts, ffn, hidden = fc1.shape
    linears = []
    for weights, (n_in, n_out) in ((fc1, (hidden, ffn)), (fc2, (ffn, hidden))):
        linear = te.GroupedLinear(
            experts, n_in, n_out, bias=False, params_dtype=torch.bfloat16, device=weights.device
        )
        with torch.no_grad():
            for expert in range(experts):
                getattr(linear, f"weight{expert}").copy_(weights[expert])
        linears.append(linear.requires_grad_(False))

    def step(inputs: Inputs) -> torch.Tensor:
        x = inputs.x.detach().requires_grad_()
        out = linears[1](linears[0](x, counts), counts)
        out.backward(inputs.grad)
        return out.detach()

    return step


# --- measuring ------------------------------------------------------------------------------------


class Clock:
    """CUDA events on a GPU, perf_counter on CPU (smoke mode)."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def time(self, fn: Callable[[int], Any], iters: int, warmup: int) -> list[float]:
        """Milliseconds of each of `iters` calls fn(i), after `warmup` untimed calls."""
        for i in range(warmup):
            fn(i)
        self.sync()
        if not self.cuda:
            times = []
            for i in range(iters):
                start = time.perf_counter()
                fn(i)
                times.append((time.perf_counter() - start) * 1e3)
            return times
        events = [
            (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)
        ]
        for i, (start, end) in enumerate(events):
            start.record()
            fn(i)
            end.record()
        self.sync()
        return [start.elapsed_time(end) for start, end in events]


def dense_ceiling_tflops(clock: Clock, device: torch.device, n: int, iters: int) -> float:
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    ms = statistics.median(clock.time(lambda _: torch.matmul(a, b), iters, warmup=3))
    return 2 * n**3 / (ms * 1e-3) / 1e12


def copy_bandwidth_gbs(clock: Clock, device: torch.device, nbytes: int, iters: int) -> float:
    """Device-to-device copy: bytes read plus bytes written, per second."""
    src = torch.randn(nbytes // 2, device=device, dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    ms = statistics.median(clock.time(lambda _: dst.copy_(src), iters, warmup=3))
    return 2 * src.numel() * src.element_size() / (ms * 1e-3) / 1e9


def _settle(device: torch.device) -> int:
    """Free what earlier arms left and return the bytes allocated now (0 on CPU)."""
    if device.type != "cuda":
        return 0
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return torch.cuda.memory_allocated()


def peak_memory_mib(step: Step, inputs: Inputs, device: torch.device, base: int) -> float:
    """Peak bytes one fwd+bwd step reaches above `base` (taken before the arm was built, so the arm's
    weights and any packed buffer count)."""
    if device.type != "cuda":
        return float("nan")
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    step(inputs)
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - base) / 2**20


def rel_l2(out: torch.Tensor, ref: torch.Tensor) -> float:
    return ((out - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def measure_arms(
    arms: dict[str, ArmBuilder],
    counts: list[int],
    sets: list[Inputs],
    device: torch.device,
    args: argparse.Namespace,
) -> tuple[dict[str, dict[str, float]], dict[str, torch.Tensor]]:
    """Build each arm in turn (after freeing the last), check its output, time it, take its peak memory."""
    clock = Clock(device)
    results: dict[str, dict[str, float]] = {}
    outputs: dict[str, torch.Tensor] = {}
    for name, build in arms.items():
        base = _settle(device)
        step = build(counts)
        outputs[name] = step(sets[0]).float()  # also the first call, which prepares (packs) the weights
        times = clock.time(lambda i, step=step: step(sets[i % len(sets)]), args.iters, args.warmup)
        results[name] = {
            "median_ms": statistics.median(times),
            "min_ms": min(times),
            "peak_mem_mib": peak_memory_mib(step, sets[1 % len(sets)], device, base),
        }
        del step
    _settle(device)
    return results, outputs


def derive(
    results: dict[str, dict[str, float]],
    reference: str,
    te_arm: str,
    flops: int,
    roofline_ms: float,
    dense: float,
) -> None:
    for figures in results.values():
        figures["tflops"] = flops / (figures["median_ms"] * 1e-3) / 1e12
        figures["speedup_vs_per_expert"] = results[reference]["median_ms"] / figures["median_ms"]
        if te_arm in results:
            figures["speedup_vs_te"] = results[te_arm]["median_ms"] / figures["median_ms"]
        figures["pct_dense_ceiling"] = 100 * figures["tflops"] / dense
        figures["pct_roofline"] = 100 * roofline_ms / figures["median_ms"]


def measure_size(
    rows: int,
    shape: Shape,
    arms: dict[str, ArmBuilder],
    gemm_arms: dict[str, ArmBuilder],
    ceilings: dict[str, float],
    device: torch.device,
    args: argparse.Namespace,
    gen: torch.Generator,
) -> dict[str, Any]:
    counts = skewed_counts(rows, shape, gen)
    sets = make_inputs(rows, shape, args.sets, device, seed=args.seed + rows)
    flops = 4 * 2 * rows * shape.hidden * shape.ffn
    weight_bytes = 2 * 2 * shape.experts * shape.hidden * shape.ffn * 2  # fc1+fc2, bf16, read fwd and bwd
    roofline_ms = (
        max(flops / (ceilings["dense_tflops"] * 1e12), weight_bytes / (ceilings["copy_gbs"] * 1e9)) * 1e3
    )
    layer, layer_out = measure_arms(arms, counts, sets, device, args)
    gemm, gemm_out = measure_arms(gemm_arms, counts, sets, device, args)
    derive(layer, "per_expert", "te_grouped", flops, roofline_ms, ceilings["dense_tflops"])
    derive(gemm, "gemm_per_expert", "gemm_te", flops, roofline_ms, ceilings["dense_tflops"])
    parity = {}
    for outputs, te_arm, ours in (
        (layer_out, "te_grouped", "torch_grouped"),
        (gemm_out, "gemm_te", "gemm_grouped"),
    ):
        if te_arm in outputs:
            diff = (outputs[ours] - outputs[te_arm]).abs()
            parity[f"{ours}_vs_{te_arm}"] = {
                "rel_l2": rel_l2(outputs[ours], outputs[te_arm]),
                "max_abs": float(diff.max()) if diff.numel() else 0.0,
                "bitwise_equal": bool(torch.equal(outputs[ours], outputs[te_arm])),
            }
    return {
        "routed_rows": rows,
        "empty_experts": counts.count(0),
        "max_rows_per_expert": max(counts),
        "min_nonzero_rows_per_expert": min(c for c in counts if c),
        "flops_per_step": flops,
        "roofline_ms": roofline_ms,
        "rel_l2_vs_per_expert": {
            name: rel_l2(out, layer_out["per_expert"]) for name, out in layer_out.items()
        },
        "rel_l2_vs_gemm_per_expert": {
            name: rel_l2(out, gemm_out["gemm_per_expert"]) for name, out in gemm_out.items()
        },
        "parity_vs_te": parity,  # forward outputs; the input gradients are in tests/gpu (TE parity test)
        "arms": layer,
        "gemm_arms": gemm,
    }


def _target(name: str, value: float, threshold: str, passed: bool) -> dict[str, Any]:
    return {"name": name, "value": value, "threshold": threshold, "passed": passed}


def targets(sizes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found = []
    for size in sizes:
        rows = size["routed_rows"]
        grouped = size["arms"]["torch_grouped"]
        found.append(
            _target(
                f"torch_grouped speedup vs per_expert (layer) at {rows} rows",
                grouped["speedup_vs_per_expert"],
                f">= {TARGETS['speedup']}",
                grouped["speedup_vs_per_expert"] >= TARGETS["speedup"],
            )
        )
        gemm = size["gemm_arms"]["gemm_grouped"]
        found.append(
            _target(
                f"gemm_grouped speedup vs gemm_per_expert (GEMMs alone) at {rows} rows",
                gemm["speedup_vs_per_expert"],
                f">= {TARGETS['speedup']}",
                gemm["speedup_vs_per_expert"] >= TARGETS["speedup"],
            )
        )
        for ours, te_arm, level in (
            ("torch_grouped", "te_grouped", "layer"),
            ("gemm_grouped", "gemm_te", "GEMMs alone"),
        ):
            arms = size["arms"] if level == "layer" else size["gemm_arms"]
            if te_arm in arms:
                value = arms[ours]["speedup_vs_te"]
                found.append(
                    _target(
                        f"{ours} speedup vs {te_arm} (Transformer Engine, {level}) at {rows} rows",
                        value,
                        f">= {TARGETS['speedup_vs_te']}",
                        value >= TARGETS["speedup_vs_te"],
                    )
                )
        peak, base = grouped["peak_mem_mib"], size["arms"]["per_expert"]["peak_mem_mib"]
        found.append(
            _target(
                f"torch_grouped peak memory MiB, weights included, at {rows} rows (per_expert: {base:.3f})",
                peak,
                f"<= per_expert + {MEMORY_SLACK_MIB} MiB",
                bool(math.isnan(peak) or peak <= base + MEMORY_SLACK_MIB),
            )
        )
    largest = max(sizes, key=lambda s: s["routed_rows"])
    grouped = largest["gemm_arms"]["gemm_grouped"]
    for key, label in (
        ("pct_dense_ceiling", "% of the dense ceiling"),
        ("pct_roofline", "% of the roofline"),
    ):
        found.append(
            _target(
                f"gemm_grouped {label} at {largest['routed_rows']} rows",
                grouped[key],
                f">= {TARGETS[key]}",
                grouped[key] >= TARGETS[key],
            )
        )
    return found


# --- output ---------------------------------------------------------------------------------------


def table(result: dict[str, Any]) -> str:
    lines = [
        f"dense bf16 ceiling {result['dense_ceiling_tflops']:.0f} TFLOP/s, "
        f"copy bandwidth {result['copy_bandwidth_gbs']:.0f} GB/s, device {result['device']}",
        f"{'rows':>8} {'arm':<16} {'ms':>8} {'speedup':>8} {'TFLOP/s':>8} {'%dense':>7} {'%roof':>7} {'peakMiB':>8}",
    ]
    for size in result["sizes"]:
        for name, f in {**size["arms"], **size["gemm_arms"]}.items():
            lines.append(
                f"{size['routed_rows']:>8} {name:<16} {f['median_ms']:>8.3f} {f['speedup_vs_per_expert']:>7.2f}x "
                f"{f['tflops']:>8.1f} {f['pct_dense_ceiling']:>6.1f}% {f['pct_roofline']:>6.1f}% "
                f"{f['peak_mem_mib']:>8.0f}"
            )
    lines += [
        f"{'PASS' if t['passed'] else 'FAIL'}  {t['name']}: {t['value']:.3g} ({t['threshold']})"
        for t in result["targets"]
    ]
    return "\n".join(lines)


def plot(result: dict[str, Any], path: Path) -> str | None:
    """Draw median ms per arm and size; return why it was skipped, or None."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not importable"
    sizes = result["sizes"]
    labels = [f"{s['routed_rows']:,}" for s in sizes]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    layer_arms = [arm for arm in ARMS if arm in sizes[0]["arms"]]
    width = 0.8 / len(layer_arms)
    for index, arm in enumerate(layer_arms):
        xs = [i + (index - (len(layer_arms) - 1) / 2) * width for i in range(len(sizes))]
        axes[0].bar(xs, [s["arms"][arm]["median_ms"] for s in sizes], width, label=arm)
    gemm_arms = [arm for arm in GEMM_ARMS if arm in sizes[0]["gemm_arms"]]
    gemm_width = 0.8 / len(gemm_arms)
    for index, arm in enumerate(gemm_arms):
        xs = [i + (index - (len(gemm_arms) - 1) / 2) * gemm_width for i in range(len(sizes))]
        axes[1].bar(xs, [s["gemm_arms"][arm]["pct_roofline"] for s in sizes], gemm_width, label=arm)
    axes[0].set_yscale("log")
    titles = ("expert layer: median ms, fwd + dgrad (log; lower is better)", "expert GEMMs: % of roofline")
    for axis, title in zip(axes, titles, strict=True):
        axis.set_xticks(range(len(sizes)), labels)
        axis.set_xlabel("routed rows")
        axis.set_title(title)
    axes[1].axhline(TARGETS["pct_roofline"], color="grey", linestyle="--", linewidth=1)
    axes[0].legend()
    axes[1].legend()
    shape = result["shape"]
    fig.suptitle(
        f"{shape['experts']} experts, fc1 {shape['hidden']}->{shape['ffn']}, fc2 {shape['ffn']}->"
        f"{shape['hidden']}, bf16, frozen; {result['device']}"
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


def run(args: argparse.Namespace) -> dict[str, Any]:
    fused = not args.unfused_activation
    shape = SMOKE if args.smoke else SUPER
    device = torch.device("cpu" if args.smoke else "cuda")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: run on a GPU host, or pass --smoke for a tiny CPU run")
    init_megatron(args.megatron)
    gen = torch.Generator(device="cpu").manual_seed(args.seed)
    scale = 1 / math.sqrt(shape.hidden), 1 / math.sqrt(shape.ffn)
    fc1 = (torch.randn(shape.experts, shape.ffn, shape.hidden, generator=gen) * scale[0]).to(
        device, torch.bfloat16
    )
    fc2 = (torch.randn(shape.experts, shape.hidden, shape.ffn, generator=gen) * scale[1]).to(
        device, torch.bfloat16
    )
    # Each layer arm is built afresh per size, after the previous one was freed, so that its peak
    # memory includes its own weights: a packed buffer that copied the weights would show.
    arms: dict[str, ArmBuilder] = {
        "per_expert": lambda counts: megatron_step(
            grouped_arm(shape, fc1, fc2, device, fused, backend="transformer_engine"), counts
        ),
        "sequential_mlp": lambda counts: megatron_step(
            sequential_arm(shape, fc1, fc2, device, fused), counts
        ),
        "torch_grouped": lambda counts: megatron_step(grouped_arm(shape, fc1, fc2, device, fused), counts),
    }
    gemm_arms: dict[str, ArmBuilder] = {
        "gemm_per_expert": lambda counts: gemm_per_expert_arm(fc1, fc2, counts),
        "gemm_grouped": lambda counts: gemm_grouped_arm(fc1, fc2, counts),
    }
    te_version, te_absent = transformer_engine_version() if device.type == "cuda" else (None, "CPU run")
    if te_version is not None:
        arms = {
            **{k: v for k, v in arms.items() if k != "torch_grouped"},
            "te_grouped": lambda counts: megatron_step(te_grouped_arm(shape, fc1, fc2, fused), counts),
            "torch_grouped": arms["torch_grouped"],
        }
        gemm_arms = {
            "gemm_per_expert": gemm_arms["gemm_per_expert"],
            "gemm_te": lambda counts: gemm_te_arm(fc1, fc2, counts),
            "gemm_grouped": gemm_arms["gemm_grouped"],
        }
        baseline = {
            "name": "transformer_engine",
            "version": te_version,
            "layer_arm": "te_grouped",
            "gemm_arm": "gemm_te",
        }
    else:
        baseline = {
            "name": "per_expert",
            "layer_arm": "per_expert",
            "gemm_arm": "gemm_per_expert",
            "detail": te_absent,
        }
    clock = Clock(device)
    dense_n = 256 if args.smoke else 8192
    ceilings = {
        "dense_tflops": dense_ceiling_tflops(clock, device, dense_n, args.iters),
        "copy_gbs": copy_bandwidth_gbs(clock, device, 2**20 if args.smoke else 2**30, args.iters),
    }
    rows = (
        [int(r) for r in args.rows.split(",")]
        if args.rows
        else ([64, 256] if args.smoke else [8192, 32768, 131072])
    )
    sizes = [measure_size(r, shape, arms, gemm_arms, ceilings, device, args, gen) for r in rows]
    return {
        "status": "ok",
        "schema": 1,
        "smoke": args.smoke,
        "device": torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        # What the speedups are quoted against: Transformer Engine's grouped linears where TE imports
        # (what production runs), else the per-expert loop.
        "baseline": baseline,
        "shape": {
            "experts": shape.experts,
            "hidden": shape.hidden,
            "ffn": shape.ffn,
            "activation": "squared_relu",
            "fused_weighted_activation": fused,
            "gated": False,
            "dtype": "bfloat16",
            "bias": False,
        },
        "method": {
            "timed": "forward + backward (input gradient only, frozen weights)",
            "flops": "4 GEMMs per step (fc1, fc2 forward; fc1, fc2 dgrad), 2*rows*K*N each",
            "iters": args.iters,
            "warmup": args.warmup,
            "input_sets": args.sets,
            "statistic": "median",
            "roofline": "max(flops / dense ceiling, 2 * expert weight bytes / copy bandwidth)",
            "peak_memory": "layer arms: the arm's weights (and packed buffer) plus the step's peak; "
            "GEMM arms: the step's peak over the shared weights",
            "targets": "speedup and memory on the layer arms; % dense and % roofline on the GEMM arms",
        },
        "dense_ceiling_tflops": ceilings["dense_tflops"],
        "dense_ceiling_shape": [dense_n] * 3,
        "copy_bandwidth_gbs": ceilings["copy_gbs"],
        "sizes": sizes,
        "targets": targets(sizes),
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, required=True, help="write the results here as JSON")
    parser.add_argument("--rows", help="routed-row counts, comma separated (default 8192,32768,131072)")
    parser.add_argument("--plot", type=Path, help="draw a PNG here (needs matplotlib)")
    parser.add_argument("--iters", type=int, default=30, help="timed runs per arm and size (median reported)")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--sets", type=int, default=4, help="input sets rotated between runs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--megatron", help="folder holding the patched megatron/ package (put first on sys.path)"
    )
    parser.add_argument("--smoke", action="store_true", help="tiny shapes on CPU: proves the script runs")
    parser.add_argument(
        "--unfused-activation",
        action="store_true",
        help="layer arms use TEGroupedMLP's unfused activation (default: megatron's fused weighted squared ReLU)",
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.iters, args.warmup, args.sets = min(args.iters, 3), 1, 2
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    result = run(args)
    if args.plot:
        skipped = plot(result, args.plot)
        result["plot"] = None if skipped else str(args.plot)
        if skipped:
            result["plot_skipped"] = skipped
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
