"""A full MoE layer with LoRA on the frozen experts, forward + backward: default expert path vs torch.

What a LoRA fine-tuning step of a Nemotron-3-Super MoE layer spends, end to end: megatron's `MoELayer`
(router, token dispatcher, experts, token combine) with the expert base weights and the router frozen,
Megatron-Bridge-shaped LoRA adapters (rank 16, alpha 32, trainable) around the experts' linear_fc1 and
linear_fc2, BF16, forward and backward (input gradient and adapter gradients). Two arms, same weights,
same adapters, same inputs:

  default  TEGroupedMLP over the torch grouped linears on its default path (one GEMM per expert: what
           the layer runs without a grouped kernel);
  torch    the same layer with moe_expert_gemm_backend="torch" (patch 0001: one torch._grouped_mm per
           linear over the packed frozen weights; the adapters run inside the wrappers as before).

Shapes (the suite's Super shapes): 128 experts in total (128 / EP local), hidden 1024, expert ffn 2688,
non-gated squared ReLU (megatron's fused weighted squared ReLU unless --unfused-activation), top-k 2 as
tests/multigpu uses, random router (no load balancing, fp32 router). `--routed` counts the routed rows
each rank sends into the dispatcher (tokens per rank times top-k). EP=1 runs in this process; --ep N>1
launches this script on N GPUs under torchrun (all-to-all dispatcher, NVLink multicast off) and reports
rank 0's figures and the maximum over the ranks (the slowest rank sets the step time).

Timing: CUDA events around each step, warm-ups first, median of --iters steps over --sets input sets
rotated between steps. Peak memory: the step's own peak above what was allocated before it, and the
bytes each arm's layer holds (parameters and buffers, a shared storage counted once: a packed buffer
that duplicated the weights would show). Parity: the torch arm's output, input gradient and adapter
gradients against the default arm's, relative L2.

Needs the patched megatron-core first on sys.path (--megatron DIR, PYTHONPATH, or the folder in
$FORKCTL_PATCHED_MEGATRON). `--smoke` runs tiny shapes on CPU (gloo, all-gather dispatcher).

    python bench/moe_layer.py --megatron SITE --out moe.json [--ep 2] [--routed 8192,32768]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

REPO_ROOT = Path(__file__).resolve().parents[1]
ARMS = {"default": "transformer_engine", "torch": "torch"}  # arm -> moe_expert_gemm_backend
# NVLink multicast stays off for NCCL, torch symmetric memory and NVSHMEM on the lent machines.
MULTICAST_OFF = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
PARITY_TOLERANCE = 1e-2  # relative L2, as in the GPU suite
LAUNCH_TIMEOUT_S = 1200
LORA_VARIANTS = ("shared", "per_expert")


@dataclass(frozen=True)
class Shape:
    experts: int  # in total, over all EP ranks
    hidden: int
    ffn: int
    topk: int


SUPER = Shape(experts=128, hidden=1024, ffn=2688, topk=2)
SMOKE = Shape(experts=4, hidden=64, ffn=96, topk=2)


@dataclass
class Inputs:
    x: torch.Tensor  # [tokens, 1, hidden]
    grad: torch.Tensor


Step = Callable[[Inputs], torch.Tensor]


# --- megatron and the shared test builders ------------------------------------------------------


def put_megatron_first(folder: str | None) -> None:
    """The patched package first on sys.path; the repository root last, for the tests' builders."""
    folder = folder or os.environ.get("FORKCTL_PATCHED_MEGATRON")
    if folder and str(Path(folder).resolve()) not in sys.path:
        sys.path.insert(0, str(Path(folder).resolve()))
    if str(REPO_ROOT) not in sys.path:
        sys.path.append(str(REPO_ROOT))


def init_parallel(world_size: int, rank: int, device: torch.device, seed: int) -> None:
    """torch.distributed (gloo on CPU, NCCL on a GPU) and megatron's parallel state at EP=world_size."""
    from megatron.core import parallel_state

    if not dist.is_initialized():
        if "MASTER_ADDR" in os.environ:  # under torchrun
            dist.init_process_group(
                "nccl" if device.type == "cuda" else "gloo",
                device_id=device if device.type == "cuda" else None,
            )
        elif device.type == "cuda":
            dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1, device_id=device)
        else:
            dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    if parallel_state.model_parallel_is_initialized():
        parallel_state.destroy_model_parallel()  # another EP size may be set up (tests share a process)
    parallel_state.initialize_model_parallel(1, 1, expert_model_parallel_size=world_size)
    if device.type == "cuda":
        from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed

        model_parallel_cuda_manual_seed(seed)


def eager_squared_relu(x: torch.Tensor) -> torch.Tensor:
    return torch.pow(torch.relu(x), 2)


def make_config(shape: Shape, backend: str, world_size: int, device: torch.device, fused: bool):
    from megatron.core.activations import squared_relu

    from tests import _moe

    # megatron's squared_relu is a torch.compile kernel, whose CPU compile costs more than the whole smoke
    # run: on the CPU the same function runs eagerly (TEGroupedMLP then takes its unfused path).
    activation = squared_relu if device.type == "cuda" else eager_squared_relu

    return _moe.make_config(
        shape.experts,
        shape.hidden,
        shape.ffn,
        expert_model_parallel_size=world_size,
        # The all-to-all dispatcher makes a CUDA stream when built: the CPU smoke run uses all-gather.
        moe_token_dispatcher_type="alltoall" if device.type == "cuda" else "allgather",
        moe_router_topk=shape.topk,
        moe_router_load_balancing_type="none",
        moe_aux_loss_coeff=0.0,
        moe_router_dtype="fp32",
        use_cpu_initialization=device.type == "cpu",
        moe_expert_gemm_backend=backend,
        gated_linear_unit=False,
        activation_func=activation,
        bias_activation_fusion=False,
        use_fused_weighted_squared_relu=fused and device.type == "cuda",
    )


def fill_weights(layer, shape: Shape, rank: int, seed: int) -> None:
    """Router the same on every rank; expert g's weights depend on g only (same model at any EP)."""
    device = layer.router.weight.device
    with torch.no_grad():
        gen = torch.Generator(device=device).manual_seed(seed)
        router = torch.randn(layer.router.weight.shape, generator=gen, device=device) / shape.hidden**0.5
        layer.router.weight.copy_(router)
        experts = layer.experts
        for local in range(experts.num_local_experts):
            expert = rank * experts.num_local_experts + local
            for index, linear in enumerate((experts.linear_fc1, experts.linear_fc2)):
                weight = getattr(linear, f"weight{local}")
                gen = torch.Generator(device=device).manual_seed(seed + 1000 * (expert + 1) + index)
                fresh = torch.randn(weight.shape, generator=gen, device=device) / weight.shape[1] ** 0.5
                weight.copy_(fresh)


def build_arms(args: argparse.Namespace, shape: Shape, world_size: int, rank: int, device: torch.device):
    """Both layers with identical frozen weights and identical trainable LoRA adapters on the experts."""
    from tests.gpu._lora import attach_adapters
    from tests.multigpu import ep_worker

    fused = not args.unfused_activation
    layers = {
        arm: ep_worker.build_layer(make_config(shape, backend, world_size, device, fused), device.type)
        for arm, backend in ARMS.items()
    }
    fill_weights(layers["torch"], shape, rank, args.seed)
    layers["default"].load_state_dict(layers["torch"].state_dict())
    for layer in layers.values():
        if device.type == "cpu":
            gate_on_cpu(layer.router)
        layer.requires_grad_(False)  # LoRA fine-tuning: the base model (router and experts) is frozen
        attach_adapters(layer.experts, args.lora_variant, device)
    return layers


def gate_on_cpu(router) -> None:
    """The smoke run's one departure from megatron's code: the router's gate moves a CPU weight to the GPU
    before use, so on the CPU this instance computes the same gate (router_gating_linear, fp32 logits as
    configured) where its weight is."""
    from megatron.core.transformer.moe.moe_utils import router_gating_linear

    assert router.config.moe_router_dtype == "fp32", router.config.moe_router_dtype

    def gating(hidden: torch.Tensor) -> torch.Tensor:
        return router_gating_linear(hidden, router.weight, router.bias, torch.float32)

    router.gating = gating


def adapter_parameters(layer) -> dict[str, torch.nn.Parameter]:
    from tests.gpu._lora import adapter_params

    return adapter_params(layer.experts)


def make_step(layer) -> Step:
    params = list(adapter_parameters(layer).values())

    def step(inputs: Inputs) -> torch.Tensor:
        for param in params:
            param.grad = None  # one optimizer step's worth of gradients, not an accumulation
        x = inputs.x.detach().requires_grad_()
        out, _ = layer(x)
        out.backward(inputs.grad)
        return out

    return step


def make_inputs(
    tokens: int, shape: Shape, sets: int, rank: int, device: torch.device, seed: int
) -> list[Inputs]:
    gen = torch.Generator(device=device).manual_seed(seed + 7919 * (rank + 1) + tokens)
    return [
        Inputs(
            x=torch.randn(tokens, 1, shape.hidden, generator=gen, device=device).to(torch.bfloat16),
            grad=torch.randn(tokens, 1, shape.hidden, generator=gen, device=device).to(torch.bfloat16),
        )
        for _ in range(sets)
    ]


# --- measuring ------------------------------------------------------------------------------------


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_steps(step: Step, sets: list[Inputs], iters: int, warmup: int, device: torch.device) -> list[float]:
    """Milliseconds of each of `iters` steps after `warmup` untimed ones (CUDA events; perf_counter on CPU)."""
    for i in range(warmup):
        step(sets[i % len(sets)])
    sync(device)
    if dist.get_world_size() > 1:
        dist.barrier()  # the ranks start the timed steps together: each waits on the others' tokens
    if device.type != "cuda":
        times = []
        for i in range(iters):
            start = time.perf_counter()
            step(sets[i % len(sets)])
            times.append((time.perf_counter() - start) * 1e3)
        return times
    events = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)
    ]
    for i, (start, end) in enumerate(events):
        start.record()
        step(sets[i % len(sets)])
        end.record()
    sync(device)
    return [start.elapsed_time(end) for start, end in events]


def step_peak_mib(step: Step, inputs: Inputs, device: torch.device) -> float:
    """The peak one step reaches above what was allocated before it (NaN on CPU)."""
    if device.type != "cuda":
        return float("nan")
    sync(device)
    before = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    step(inputs)
    sync(device)
    return (torch.cuda.max_memory_allocated(device) - before) / 2**20


def resident_mib(module: torch.nn.Module) -> float:
    """Bytes the module's parameters and buffers hold, each storage once (a packed buffer that the expert
    weights point into counts once; one that copied them would count twice)."""
    storages: dict[int, int] = {}
    for tensor in [*module.parameters(), *module.buffers()]:
        storage = tensor.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
    return sum(storages.values()) / 2**20


def parity_run(layer, inputs: Inputs):
    """Output, input gradient, adapter gradients and the rows each local expert got, for one input set."""
    from tests.multigpu import ep_worker

    params = adapter_parameters(layer)
    for param in params.values():
        param.grad = None
    out, dgrad, tokens = ep_worker.run_layer(layer, inputs.x, inputs.grad)
    grads = {key: param.grad.detach().clone() for key, param in params.items()}
    return out, dgrad, grads, tokens


def measure_size(layers, routed: int, shape: Shape, args, rank: int, device: torch.device) -> dict[str, Any]:
    from tests.multigpu import ep_worker

    tokens = routed // shape.topk
    sets = make_inputs(tokens, shape, args.sets, rank, device, args.seed)
    runs = {arm: parity_run(layer, sets[0]) for arm, layer in layers.items()}
    (out, dgrad, grads, per_expert), (ref_out, ref_dgrad, ref_grads, ref_per_expert) = (
        runs["torch"],
        runs["default"],
    )
    parity = {
        # The torch arm really ran its grouped GEMM (it packs the expert weights on its first forward).
        "torch_arm_packed": all(w is not None for w in layers["torch"].experts.packed_expert_weights()),
        "routing_matches": per_expert == ref_per_expert,
        "rel_l2_out": ep_worker.rel_l2(out, ref_out),
        "rel_l2_dgrad": ep_worker.rel_l2(dgrad, ref_dgrad),
        **{f"rel_l2_grad.{key}": ep_worker.rel_l2(grads[key], ref_grads[key]) for key in grads},
    }
    del runs, out, dgrad, grads, ref_out, ref_dgrad, ref_grads
    arms = {}
    for arm, layer in layers.items():
        step = make_step(layer)
        times = time_steps(step, sets, args.iters, args.warmup, device)
        arms[arm] = {
            "median_ms": statistics.median(times),
            "min_ms": min(times),
            "step_peak_mib": step_peak_mib(step, sets[1 % len(sets)], device),
            "resident_mib": resident_mib(layer),
        }
    return {
        "routed_rows": tokens * shape.topk,
        "tokens": tokens,
        "received_rows": sum(per_expert),
        "empty_local_experts": per_expert.count(0),
        "max_rows_per_local_expert": max(per_expert),
        "arms": arms,
        "parity": parity,
    }


def environment(device: torch.device) -> dict[str, Any]:
    import megatron.core

    found: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "megatron_core": getattr(megatron.core, "__version__", None),
        "megatron_site": str(Path(megatron.core.__file__).resolve().parents[2]),
        "transformer_engine": _has_module("transformer_engine"),
        "multicast_env": {key: os.environ.get(key) for key in MULTICAST_OFF},
    }
    if device.type == "cuda":
        found["blas"] = str(torch.backends.cuda.preferred_blas_library())
        found["gpus"] = torch.cuda.device_count()
        found["capability"] = list(torch.cuda.get_device_capability(device))
    return found


def _has_module(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def run_rank(args: argparse.Namespace, rank: int, world_size: int, local_rank: int) -> dict[str, Any]:
    """Build both arms on this rank and measure every size; this rank's figures."""
    shape = SMOKE if args.smoke else SUPER
    shape = Shape(shape.experts, shape.hidden, shape.ffn, args.topk or shape.topk)
    device = torch.device("cpu") if args.smoke else torch.device("cuda", local_rank)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit("no CUDA device: run on a GPU host, or pass --smoke for a tiny CPU run")
        torch.cuda.set_device(device)
    put_megatron_first(args.megatron)
    init_parallel(world_size, rank, device, args.seed)
    layers = build_arms(args, shape, world_size, rank, device)
    sizes = [measure_size(layers, routed, shape, args, rank, device) for routed in routed_sizes(args)]
    from tests.gpu import _lora as lora

    return {
        "rank": rank,
        "world_size": world_size,
        "shape": shape.__dict__,
        "local_experts": shape.experts // world_size,
        "lora": {
            "variant": args.lora_variant,
            "rank": lora.LORA_RANK,
            "alpha": lora.LORA_ALPHA,
            "on": ["linear_fc1", "linear_fc2"],
            "trainable": "adapters only",
        },
        "environment": environment(device),
        "sizes": sizes,
    }


def routed_sizes(args: argparse.Namespace) -> list[int]:
    if args.routed:
        return [int(r) for r in args.routed.split(",")]
    return [64, 256] if args.smoke else [8192, 32768]


# --- several ranks --------------------------------------------------------------------------------


def launch(args: argparse.Namespace, argv: list[str]) -> list[dict[str, Any]]:
    """This script on --ep ranks under torchrun; each rank's figures (rank<R>.json)."""
    with tempfile.TemporaryDirectory(prefix="moe-layer-bench-") as tmp:
        ranks = Path(tmp) / "ranks"
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc_per_node={args.ep}",
            f"--log-dir={Path(tmp) / 'logs'}",
            "--tee=3",
            str(Path(__file__).resolve()),
            *argv,
            "--rank-dir",
            str(ranks),
        ]
        env = dict(os.environ, **MULTICAST_OFF, PYTHONDONTWRITEBYTECODE="1")
        folder = args.megatron or os.environ.get("FORKCTL_PATCHED_MEGATRON")
        paths = [str(Path(folder).resolve())] if folder else []
        env["PYTHONPATH"] = os.pathsep.join([*paths, *filter(None, [env.get("PYTHONPATH")]), str(REPO_ROOT)])
        # In the caller's folder: relative --megatron and --out name the same paths for every rank.
        proc = subprocess.run(cmd, env=env, timeout=args.timeout)
        errors = {
            p.name: p.read_text(errors="replace")[-4000:] for p in sorted(ranks.glob("rank*.error.txt"))
        }
        if proc.returncode != 0 or errors:
            detail = "\n".join(f"--- {name}:\n{text}" for name, text in errors.items())
            raise SystemExit(f"torchrun exited {proc.returncode}\n{detail}")
        records = [json.loads(p.read_text()) for p in sorted(ranks.glob("rank*.json"))]
    found = sorted(record["rank"] for record in records)
    if found != list(range(args.ep)):
        raise SystemExit(f"expected figures from ranks 0..{args.ep - 1}, got {found}")
    return sorted(records, key=lambda record: record["rank"])


def worker(args: argparse.Namespace) -> int:
    """One torchrun rank: measure, write rank<R>.json (or rank<R>.error.txt) under --rank-dir."""
    os.environ.update(MULTICAST_OFF)  # before the first communicator, whatever the launcher passed
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    args.rank_dir.mkdir(parents=True, exist_ok=True)
    try:
        record = run_rank(args, rank, world_size, local_rank)
    except BaseException:
        (args.rank_dir / f"rank{rank}.error.txt").write_text(traceback.format_exc())
        raise
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    (args.rank_dir / f"rank{rank}.json").write_text(json.dumps(record, indent=2) + "\n")
    return 0


# --- the result -----------------------------------------------------------------------------------


def max_known(values: Iterable[float]) -> float:
    """The maximum of the values that are numbers (NaN: not measured here); NaN when none is."""
    known = [value for value in values if not math.isnan(value)]
    return max(known) if known else math.nan


def aggregate(records: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    """Rank 0's figures, plus the maximum over the ranks of each (the slowest rank sets the step)."""
    first = records[0]
    sizes = []
    for index, size in enumerate(first["sizes"]):
        per_rank = [record["sizes"][index] for record in records]
        arms = {}
        for arm, figures in size["arms"].items():
            arms[arm] = dict(figures)
            for key in ("median_ms", "step_peak_mib", "resident_mib"):
                arms[arm][f"{key}_max_over_ranks"] = max_known(r["arms"][arm][key] for r in per_rank)
        parity = {
            key: (
                all(r["parity"][key] for r in per_rank)
                if isinstance(value, bool)
                else max(r["parity"][key] for r in per_rank)
            )
            for key, value in size["parity"].items()
        }
        sizes.append(
            {
                "routed_rows_per_rank": size["routed_rows"],
                "tokens_per_rank": size["tokens"],
                "received_rows_per_rank": [r["received_rows"] for r in per_rank],
                "empty_local_experts_per_rank": [r["empty_local_experts"] for r in per_rank],
                "max_rows_per_local_expert": max(r["max_rows_per_local_expert"] for r in per_rank),
                "arms": arms,
                "speedup_torch_vs_default": arms["default"]["median_ms"] / arms["torch"]["median_ms"],
                "speedup_torch_vs_default_max_over_ranks": arms["default"]["median_ms_max_over_ranks"]
                / arms["torch"]["median_ms_max_over_ranks"],
                "parity_max_over_ranks": parity,
                "parity_ok": parity["routing_matches"]
                and parity["torch_arm_packed"]
                and all(v < PARITY_TOLERANCE for k, v in parity.items() if k.startswith("rel_l2")),
            }
        )
    return {
        "status": "ok",
        "schema": 1,
        "smoke": args.smoke,
        "ep": len(records),
        "shape": {
            **first["shape"],
            "local_experts": first["local_experts"],
            "activation": "squared_relu (eager)" if args.smoke else "squared_relu",
            "fused_weighted_activation": not args.unfused_activation,
            "gated": False,
            "dtype": "bfloat16",
            "bias": False,
        },
        "lora": first["lora"],
        "dispatcher": "alltoall" if not args.smoke else "allgather",
        "method": {
            "timed": "MoELayer forward + backward (input and adapter gradients; router and expert base "
            "weights frozen)",
            "arms": {arm: f'moe_expert_gemm_backend="{backend}"' for arm, backend in ARMS.items()},
            "iters": args.iters,
            "warmup": args.warmup,
            "input_sets": args.sets,
            "statistic": "median (per rank; CUDA events)",
            "ranks": "figures are rank 0's; *_max_over_ranks is the maximum over the ranks",
            "step_peak_mib": "peak allocated during one step above what was allocated before it",
            "resident_mib": "the arm's layer: parameters and buffers, each storage once",
            "parity_tolerance": PARITY_TOLERANCE,
        },
        "environment": first["environment"],
        "sizes": sizes,
    }


def table(result: dict[str, Any]) -> str:
    env = result["environment"]
    shape = result["shape"]
    lines = [
        f"MoELayer + LoRA (rank {result['lora']['rank']}, {result['lora']['variant']}), EP={result['ep']}, "
        f"{shape['experts']} experts ({shape['local_experts']} local), {shape['hidden']}->{shape['ffn']}"
        f"->{shape['hidden']}, top-{shape['topk']}, {result['dispatcher']}; {env['device']}, torch {env['torch']}",
        f"{'routed/rank':>11} {'arm':<8} {'median ms':>10} {'max ranks':>10} {'speedup':>8} "
        f"{'stepMiB':>8} {'residMiB':>9}",
    ]
    for size in result["sizes"]:
        for arm, f in size["arms"].items():
            speedup = size["speedup_torch_vs_default"] if arm == "torch" else 1.0
            lines.append(
                f"{size['routed_rows_per_rank']:>11} {arm:<8} {f['median_ms']:>10.3f} "
                f"{f['median_ms_max_over_ranks']:>10.3f} {speedup:>7.2f}x {f['step_peak_mib']:>8.0f} "
                f"{f['resident_mib']:>9.1f}"
            )
        parity = size["parity_max_over_ranks"]
        worst = max(v for k, v in parity.items() if k.startswith("rel_l2"))
        lines.append(
            f"{'':>11} parity torch vs default: worst rel L2 {worst:.2e} "
            f"({'ok' if size['parity_ok'] else 'FAILED'}), received rows per rank "
            f"{size['received_rows_per_rank']}"
        )
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, help="write the results here as JSON")
    parser.add_argument(
        "--ep", type=int, default=1, help="expert-parallel ranks (>1: torchrun, one GPU each)"
    )
    parser.add_argument("--routed", help="routed rows per rank, comma separated (default 8192,32768)")
    parser.add_argument("--topk", type=int, help=f"router top-k (default {SUPER.topk})")
    parser.add_argument(
        "--iters", type=int, default=30, help="timed steps per arm and size (median reported)"
    )
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--sets", type=int, default=4, help="input sets rotated between steps")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument(
        "--lora-variant",
        choices=LORA_VARIANTS,
        default="shared",
        help="one adapter per linear (Bridge's LoRA) or one per local expert",
    )
    parser.add_argument(
        "--megatron", help="folder holding the patched megatron/ package (put first on sys.path)"
    )
    parser.add_argument("--smoke", action="store_true", help="tiny shapes on CPU: proves the script runs")
    parser.add_argument(
        "--unfused-activation",
        action="store_true",
        help="TEGroupedMLP's unfused squared ReLU (default: megatron's fused weighted one)",
    )
    parser.add_argument("--timeout", type=float, default=LAUNCH_TIMEOUT_S, help="torchrun time limit, s")
    parser.add_argument("--rank-dir", type=Path, help=argparse.SUPPRESS)  # set by launch() for the ranks
    args = parser.parse_args(argv)
    if args.rank_dir is None and args.out is None:
        parser.error("--out is required")
    experts = (SMOKE if args.smoke else SUPER).experts
    if args.ep < 1 or experts % args.ep:
        parser.error(f"--ep {args.ep} does not split {experts} experts")
    if args.smoke and args.ep > 1:
        # megatron's token gathers allocate on the current CUDA device: several ranks need GPUs.
        parser.error("--smoke runs one rank on the CPU; --ep > 1 needs one GPU per rank")
    if args.smoke:
        args.iters, args.warmup, args.sets = min(args.iters, 3), 1, 2
        args.unfused_activation = True  # the CPU run's squared ReLU is eager (see make_config)
    return args


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    if args.rank_dir is not None:
        return worker(args)
    records = launch(args, argv) if args.ep > 1 else [run_rank(args, 0, 1, 0)]
    result = aggregate(records, args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(table(result))
    return 0 if all(size["parity_ok"] for size in result["sizes"]) else 1


if __name__ == "__main__":
    sys.exit(main())
