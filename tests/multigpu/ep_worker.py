"""One rank of the expert-parallel MoE check, launched by torchrun (see test_ep_alltoall.py).

Every rank builds the same full MoELayer twice (router + all-to-all token dispatcher, EP = world size,
TP = 1): once with moe_expert_gemm_backend="torch" (frozen experts on one torch._grouped_mm per linear)
and once with the default backend over the same TE-free grouped linears (one F.linear per expert), with
identical weights. Both layers see the same input on a rank; the forward output and the input gradient
of the torch layer are compared with the default layer's. Two cases:

- balanced: random routing, every rank receives tokens;
- empty_rank: the router sends no token to the experts of rank 1 (with one rank: to a block of experts),
  so those experts run on zero rows, across the all-to-all.

Each rank writes its figures to <out>/rank<R>.json and prints one line per case; the exit code is 1 when
a check failed on this rank. A rank that raises writes the traceback to <out>/rank<R>.error.txt before it
exits non-zero, so the test can show why torchrun failed. `--build-only` builds both layers on the CPU
(gloo, one rank; the all-gather dispatcher, as the all-to-all one needs CUDA to be built) and stops: a
quick check that the construction and weight-copying code still fits the installed megatron-core.

megatron must be importable (the patched copy first on PYTHONPATH); the repository root is put on
sys.path here so the shared builders in tests/_moe.py are found.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

# NCCL's NVLink multicast (NVLS) and symmetric-memory multicast stay off on the lent machines. Forced
# before torch is imported and before any communicator exists, whatever the launcher passed.
MULTICAST_OFF = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
os.environ.update(MULTICAST_OFF)

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.append(str(REPO_ROOT))

# torch is imported where a rank needs it, not here: the CPU tests import this module for its torch-free
# parts (the argument parser, the starved experts, the failure record) and then need no torch.
from tests import _moe  # noqa: E402

if TYPE_CHECKING:
    import torch

OUT_ENV_VAR = "FORKCTL_EP_OUT"
TOLERANCE = 1e-2  # relative L2 of the torch backend against the default backend
STARVED_RANK = 1
# The router sends a token away from the starved experts when its feature 0 is set: their router rows
# weigh that feature by STARVE_WEIGHT (every other row ignores it), the input carries STARVE_FEATURE.
STARVE_WEIGHT = -8.0
STARVE_FEATURE = 4.0


@dataclass
class CaseResult:
    rank: int
    world_size: int
    case: str
    tokens_received: int  # rows the local experts processed (torch layer)
    tokens_per_local_expert: list[int]
    starved_experts: list[int]  # global indices the case keeps empty (empty list: none)
    starved_tokens: int  # rows the starved experts on this rank received (must be 0)
    routing_matches: bool  # both layers routed the same token counts to the local experts
    rel_l2_out: float
    rel_l2_dgrad: float
    finite: bool
    ok: bool


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=os.environ.get(OUT_ENV_VAR),
        help=f"folder for rank<R>.json (${OUT_ENV_VAR})",
    )
    parser.add_argument("--experts", type=int, default=16, help="global number of experts")
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--ffn", type=int, default=512, help="expert ffn size (fc1 is twice this: SwiGLU)")
    parser.add_argument("--topk", type=int, default=2)
    parser.add_argument("--seq", type=int, default=128, help="sequence length per rank (batch 2)")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument(
        "--build-only", action="store_true", help="build both layers on the CPU (one rank, gloo) and exit"
    )
    return parser.parse_args(argv)


def starved_experts(num_experts: int, world_size: int) -> list[int]:
    """The global experts the empty-rank case keeps without tokens.

    With EP > 1: exactly the experts of rank STARVED_RANK, i.e. its contiguous block of
    num_experts // world_size (the dispatcher gives rank r experts r * n .. (r + 1) * n - 1).
    With one rank: the block rank 1 would hold under EP4, so a block of experts still runs on zero rows.
    """
    if world_size < 1 or num_experts % world_size:
        raise ValueError(f"{num_experts} experts do not split over {world_size} ranks")
    if world_size > 1:
        per_rank = num_experts // world_size
        start = STARVED_RANK * per_rank
        return list(range(start, start + per_rank))
    block = max(1, num_experts // 4)
    return list(range(block, min(2 * block, num_experts)))


def error_path(out: Path, rank: int | str) -> Path:
    return out / f"rank{rank}.error.txt"


def record_failure(out: Path | None, rank: int | str, text: str) -> Path | None:
    """Write a rank's traceback next to its figures (best effort: never masks the original error)."""
    if out is None:
        return None
    try:
        out.mkdir(parents=True, exist_ok=True)
        path = error_path(out, rank)
        path.write_text(text)
        return path
    except OSError:
        return None


def make_config(args: argparse.Namespace, world_size: int, backend: str, device: str):
    # The all-to-all dispatcher makes a CUDA stream when built: the CPU build check uses all-gather.
    dispatcher = "alltoall" if device != "cpu" else "allgather"
    return _moe.make_config(
        args.experts,
        args.hidden,
        args.ffn,
        expert_model_parallel_size=world_size,
        moe_token_dispatcher_type=dispatcher,
        moe_router_topk=args.topk,
        moe_router_load_balancing_type="none",
        moe_aux_loss_coeff=0.0,
        moe_router_dtype="fp32",
        use_cpu_initialization=device == "cpu",
        moe_expert_gemm_backend=backend,
    )


def build_layer(config, device: str):
    from megatron.core.transformer.moe.moe_layer import MoELayer, MoESubmodules
    from megatron.core.transformer.moe.torch_grouped_linear import get_torch_grouped_mlp_spec

    layer = MoELayer(config, MoESubmodules(experts=get_torch_grouped_mlp_spec()))
    return layer.to(device)


def fill_weights(layer, args: argparse.Namespace, world_size: int, rank: int) -> None:
    """Deterministic weights: the router is the same on every rank, expert g's weights depend on g only."""
    import torch

    starved = starved_experts(args.experts, world_size)
    with torch.no_grad():
        gen = torch.Generator().manual_seed(args.seed)
        router = torch.randn(layer.router.weight.shape, generator=gen) / args.hidden**0.5
        router[:, 0] = 0.0
        router[starved, 0] = STARVE_WEIGHT
        layer.router.weight.copy_(router.to(layer.router.weight.dtype))
        experts = layer.experts
        for local in range(experts.num_local_experts):
            expert = rank * experts.num_local_experts + local
            for index, linear in enumerate((experts.linear_fc1, experts.linear_fc2)):
                weight = getattr(linear, f"weight{local}")
                gen = torch.Generator().manual_seed(args.seed + 1000 * (expert + 1) + index)
                fresh = torch.randn(weight.shape, generator=gen) / weight.shape[1] ** 0.5
                weight.copy_(fresh.to(weight.dtype))
    layer.experts.requires_grad_(False)  # the torch backend is for frozen experts


def make_inputs(args: argparse.Namespace, rank: int, case: str, device: str):
    import torch

    gen = torch.Generator().manual_seed(args.seed + 7919 * (rank + 1) + (0 if case == "balanced" else 1))
    x = torch.randn(args.seq, 2, args.hidden, generator=gen)
    x[..., 0] = STARVE_FEATURE if case == "empty_rank" else 0.0
    grad = torch.randn(args.seq, 2, args.hidden, generator=gen)
    return x.to(device, torch.bfloat16), grad.to(device, torch.bfloat16)


def run_layer(layer, x: torch.Tensor, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """Forward and backward through the whole layer; also the token counts its experts received."""
    seen: list[list[int]] = []

    def record_tokens(_module, args):
        seen.append([int(n) for n in args[1].tolist()])

    handle = layer.experts.register_forward_pre_hook(record_tokens)
    try:
        x = x.detach().clone().requires_grad_()
        out, bias = layer(x)
        assert bias is None, "the experts returned a bias"
        out.backward(grad)
    finally:
        handle.remove()
    assert len(seen) == 1, f"the experts ran {len(seen)} times"
    return out.detach(), x.grad.detach(), seen[0]


def rel_l2(value: torch.Tensor, ref: torch.Tensor) -> float:
    value, ref = value.double().cpu(), ref.double().cpu()
    if value.shape != ref.shape:
        return float("inf")
    norm = ref.norm()
    return ((value - ref).norm() / norm).item() if norm > 0 else float("inf")


def run_case(args, torch_layer, default_layer, rank: int, world_size: int, case: str) -> CaseResult:
    import torch

    x, grad = make_inputs(args, rank, case, "cuda")
    out, dgrad, tokens = run_layer(torch_layer, x, grad)
    ref_out, ref_dgrad, ref_tokens = run_layer(default_layer, x, grad)
    torch.cuda.synchronize()
    num_local = torch_layer.experts.num_local_experts
    starved = starved_experts(args.experts, world_size) if case == "empty_rank" else []
    local = {rank * num_local + i: n for i, n in enumerate(tokens)}
    starved_tokens = sum(local.get(e, 0) for e in starved)
    finite = bool(torch.isfinite(out).all() and torch.isfinite(dgrad).all())
    err_out, err_dgrad = rel_l2(out, ref_out), rel_l2(dgrad, ref_dgrad)
    ok = finite and tokens == ref_tokens and starved_tokens == 0
    ok = ok and err_out < TOLERANCE and err_dgrad < TOLERANCE
    if case == "empty_rank" and world_size > 1 and rank == STARVED_RANK:
        ok = ok and sum(tokens) == 0
    return CaseResult(
        rank=rank,
        world_size=world_size,
        case=case,
        tokens_received=sum(tokens),
        tokens_per_local_expert=tokens,
        starved_experts=starved,
        starved_tokens=starved_tokens,
        routing_matches=tokens == ref_tokens,
        rel_l2_out=err_out,
        rel_l2_dgrad=err_dgrad,
        finite=finite,
        ok=ok,
    )


def build_pair(args: argparse.Namespace, world_size: int, rank: int, device: str):
    torch_layer = build_layer(make_config(args, world_size, "torch", device), device)
    default_layer = build_layer(make_config(args, world_size, "transformer_engine", device), device)
    fill_weights(torch_layer, args, world_size, rank)
    default_layer.load_state_dict(torch_layer.state_dict())
    default_layer.experts.requires_grad_(False)
    return torch_layer, default_layer


def build_only(args: argparse.Namespace) -> int:
    import torch
    import torch.distributed as dist
    from megatron.core import parallel_state

    if not dist.is_initialized():
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    parallel_state.initialize_model_parallel(1, 1, expert_model_parallel_size=1)
    torch_layer, default_layer = build_pair(args, 1, 0, "cpu")
    ours, theirs = torch_layer.state_dict(), default_layer.state_dict()
    tensors = [key for key, value in ours.items() if isinstance(value, torch.Tensor)]
    same = ours.keys() == theirs.keys() and all(torch.equal(ours[key], theirs[key]) for key in tensors)
    kinds = f"{type(torch_layer.experts).__name__}/{type(torch_layer.token_dispatcher).__name__}"
    print(f"build-only: {kinds}, {torch_layer.experts.num_local_experts} local experts, same weights: {same}")
    return 0 if same else 1


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.build_only:
        return build_only(args)
    if args.out is None:
        print(f"ep_worker: give --out or ${OUT_ENV_VAR}", file=sys.stderr)
        return 2
    rank = os.environ.get("RANK", "0")
    try:
        return run(args)
    except BaseException as exc:
        if isinstance(exc, SystemExit) and exc.code in (0, None):
            raise
        where = record_failure(args.out, rank, traceback.format_exc())
        print(
            f"ep_worker: rank {rank} failed ({type(exc).__name__}: {exc}); traceback in {where}",
            file=sys.stderr,
        )
        raise


def run(args: argparse.Namespace) -> int:
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    if args.experts % world_size:
        print(f"ep_worker: {args.experts} experts do not split over {world_size} ranks", file=sys.stderr)
        return 2
    import torch
    import torch.distributed as dist

    device = torch.device("cuda", local_rank)
    torch.cuda.set_device(device)

    from megatron.core import parallel_state
    from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed

    dist.init_process_group("nccl", device_id=device)
    try:
        parallel_state.initialize_model_parallel(1, 1, expert_model_parallel_size=world_size)
        model_parallel_cuda_manual_seed(args.seed)
        torch_layer, default_layer = build_pair(args, world_size, rank, "cuda")
        results = [
            run_case(args, torch_layer, default_layer, rank, world_size, case)
            for case in ("balanced", "empty_rank")
        ]
    finally:
        parallel_state.destroy_model_parallel()
        dist.destroy_process_group()
    args.out.mkdir(parents=True, exist_ok=True)
    record = {
        "rank": rank,
        "world_size": world_size,
        "device": torch.cuda.get_device_name(device),
        "multicast_env": {key: os.environ.get(key) for key in MULTICAST_OFF},
        "tolerance": TOLERANCE,
        "cases": [asdict(result) for result in results],
    }
    (args.out / f"rank{rank}.json").write_text(json.dumps(record, indent=2) + "\n")
    for r in results:
        print(
            f"rank {rank}/{world_size} {r.case}: tokens {r.tokens_received} {r.tokens_per_local_expert}, "
            f"rel L2 out {r.rel_l2_out:.3e}, dgrad {r.rel_l2_dgrad:.3e}, {'ok' if r.ok else 'FAILED'}",
            flush=True,
        )
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
