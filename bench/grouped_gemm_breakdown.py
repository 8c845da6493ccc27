"""Where the grouped expert GEMMs lose to the dense ceiling: each of the four GEMMs alone, two routings.

torch._grouped_mm at the Nemotron-3-Super expert shapes (128 experts, 1024 <-> 2688, bf16), one kernel
per GEMM: fc1 forward, fc2 forward, fc2 input gradient, fc1 input gradient, with the weight operand laid
out as the patch keeps it ([E, out, in] contiguous: transposed views forward, plain backward). Routings:
the Zipf skew of bench/grouped_gemm.py (with empty experts) and a uniform split, same row count. Also a
dense matmul of the same FLOPs as the reference. CUDA events, median of --iters after warm-up, inputs
rotated among --sets fresh random sets. Needs only torch and a CUDA GPU.

    python bench/grouped_gemm_breakdown.py [--rows 131072] [--out breakdown.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

EXPERTS, HIDDEN, FFN = 128, 1024, 2688


def zipf_counts(rows: int, empty: int, gen: torch.Generator) -> list[int]:
    order = torch.randperm(EXPERTS, generator=gen).tolist()
    live = order[empty:]
    weights = torch.tensor([1.0 / (rank + 1) for rank in range(len(live))], dtype=torch.float64)
    shares = (weights / weights.sum() * rows).floor().long()
    shares[0] += rows - int(shares.sum())
    counts = [0] * EXPERTS
    for expert, share in zip(live, shares.tolist(), strict=True):
        counts[expert] = share
    return counts


def uniform_counts(rows: int) -> list[int]:
    counts = [rows // EXPERTS] * EXPERTS
    counts[0] += rows - sum(counts)
    return counts


def median_ms(fn, iters: int, warmup: int) -> float:  # type: ignore[no-untyped-def]
    for i in range(warmup):
        fn(i)
    torch.cuda.synchronize()
    events = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)
    ]
    for i, (start, end) in enumerate(events):
        start.record()
        fn(i)
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in events)


def measure(counts: list[int], args: argparse.Namespace) -> dict[str, float]:
    rows = sum(counts)
    offs = torch.tensor(counts, device="cuda").cumsum(0).to(torch.int32)
    w1 = torch.randn(EXPERTS, FFN, HIDDEN, device="cuda", dtype=torch.bfloat16)  # fc1 [E, out, in]
    w2 = torch.randn(EXPERTS, HIDDEN, FFN, device="cuda", dtype=torch.bfloat16)  # fc2 [E, out, in]
    xs = [torch.randn(rows, HIDDEN, device="cuda", dtype=torch.bfloat16) for _ in range(args.sets)]
    hs = [torch.randn(rows, FFN, device="cuda", dtype=torch.bfloat16) for _ in range(args.sets)]
    # The same dgrad operand stored column-major (what a second, transposed copy of the weights would
    # give): tells whether the weight layout the patch keeps costs kernel speed.
    w1_col = w1.transpose(1, 2).contiguous().transpose(1, 2)
    gemms = {
        "fc1_fwd": lambda i: torch._grouped_mm(xs[i % args.sets], w1.transpose(1, 2), offs=offs),
        "fc2_fwd": lambda i: torch._grouped_mm(hs[i % args.sets], w2.transpose(1, 2), offs=offs),
        "fc2_dgrad": lambda i: torch._grouped_mm(xs[i % args.sets], w2, offs=offs),
        "fc1_dgrad": lambda i: torch._grouped_mm(hs[i % args.sets], w1, offs=offs),
        "fc1_dgrad_colmajor_copy": lambda i: torch._grouped_mm(hs[i % args.sets], w1_col, offs=offs),
    }
    flops = 2 * rows * HIDDEN * FFN
    out: dict[str, float] = {}
    for name, fn in gemms.items():
        ms = median_ms(fn, args.iters, args.warmup)
        out[f"{name}_ms"] = ms
        out[f"{name}_tflops"] = flops / (ms * 1e-3) / 1e12
    total = sum(out[f"{name}_ms"] for name in ("fc1_fwd", "fc2_fwd", "fc2_dgrad", "fc1_dgrad"))
    out["all_four_ms"] = total
    out["all_four_tflops"] = 4 * flops / (total * 1e-3) / 1e12
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=131072)
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--sets", type=int, default=4)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    dense_ms = median_ms(lambda _: a @ b, args.iters, args.warmup)
    dense = 2 * 8192**3 / (dense_ms * 1e-3) / 1e12
    x = torch.randn(args.rows, HIDDEN, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(HIDDEN, FFN, device="cuda", dtype=torch.bfloat16)
    same_flops_ms = median_ms(lambda _: x @ w, args.iters, args.warmup)
    result = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "rows": args.rows,
        "dense_8192_tflops": dense,
        "dense_same_shape_tflops": 2 * args.rows * HIDDEN * FFN / (same_flops_ms * 1e-3) / 1e12,
        "zipf": measure(zipf_counts(args.rows, 21, gen), args),
        "uniform": measure(uniform_counts(args.rows), args),
    }
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)
    print(f"{'gemm':<10} {'zipf TFLOP/s':>13} {'uniform TFLOP/s':>16}  (dense 8192^3: {dense:.0f})")
    for name in ("fc1_fwd", "fc2_fwd", "fc2_dgrad", "fc1_dgrad", "fc1_dgrad_colmajor_copy", "all_four"):
        z, u = result["zipf"][f"{name}_tflops"], result["uniform"][f"{name}_tflops"]
        print(f"{name:<10} {z:>13.0f} {u:>16.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
