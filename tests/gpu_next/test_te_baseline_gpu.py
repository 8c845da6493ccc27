"""Patch 0002's frozen torch path against Transformer Engine, the path production runs and it replaces.

The same weights in TEGroupedMLP twice, at Nemotron-Super's expert shapes with skewed routing (at least 20
experts without tokens): on megatron's TE grouped linears (`moe_expert_gemm_backend="transformer_engine"`,
TEColumnParallelGroupedLinear / TERowParallelGroupedLinear) and on the patch's one torch grouped GEMM per
linear. Forward output and input gradient are compared with each other and with a float64 reference; the
figures (relative L2, max-abs, bit-equality) go into the evidence. Two different GEMM kernels may round a
bf16 output differently, so the bound is the suite's 1e-2 and, stricter, the torch path may be no less
accurate than TE against float64. Skipped where Transformer Engine does not import (its PyTorch part is
built from source on the GPU host).
"""

from __future__ import annotations

import pytest

from tests import _cuda, _moe, _patched

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not _cuda.available(), reason="needs a CUDA GPU"),
]

EXPERTS, HIDDEN, FFN = _moe.SUPER


def _transformer_engine_version() -> str:
    try:
        import transformer_engine
        import transformer_engine.pytorch
    except Exception as error:
        pytest.skip(f"Transformer Engine is not importable here ({type(error).__name__}: {error})")
    return str(transformer_engine.__version__)


@pytest.fixture(scope="module")
def both_paths(megatron_tree):
    version = _transformer_engine_version()
    import torch
    from megatron.core.extensions.transformer_engine import (
        TEColumnParallelGroupedLinear,
        TERowParallelGroupedLinear,
    )
    from megatron.core.process_groups_config import ProcessGroupCollection
    from megatron.core.transformer.mlp import MLPSubmodules
    from megatron.core.transformer.moe.experts import TEGroupedMLP

    _patched.init_single_rank()
    ours = _moe.build_grouped(_moe.squared_relu_config(), "cuda", seed=2026)
    config = _moe.squared_relu_config(
        moe_expert_gemm_backend="transformer_engine", use_cpu_initialization=False
    )
    submodules = MLPSubmodules(
        linear_fc1=TEColumnParallelGroupedLinear, linear_fc2=TERowParallelGroupedLinear
    )
    pg = ProcessGroupCollection.use_mpu_process_groups()
    te_module = TEGroupedMLP(EXPERTS, config, submodules, pg_collection=pg).cuda()
    with torch.no_grad():
        for name in ("linear_fc1", "linear_fc2"):
            for expert in range(EXPERTS):
                weight = getattr(getattr(te_module, name), f"weight{expert}")
                weight.copy_(getattr(getattr(ours, name), f"weight{expert}"))
    te_module.requires_grad_(False)
    return version, ours, te_module


@pytest.mark.parametrize("rows", [8192, 32768])
def test_torch_path_matches_transformer_engine(both_paths, rows, record_property):
    import torch

    version, ours, te_module = both_paths
    tokens_per_expert = _moe.skewed_tokens(rows, EXPERTS, seed=rows)
    n_empty = tokens_per_expert.count(0)
    assert n_empty >= 20, n_empty  # zero-token experts included
    x, tokens, probs, grad = _moe.routed_inputs(tokens_per_expert, HIDDEN, "cuda", seed=rows + 1)
    out, dx = _moe.run(ours, x, tokens, probs, grad)
    out_te, dx_te = _moe.run(te_module, x, tokens, probs, grad)
    ref, ref_dx = _moe.reference(ours, x, tokens, probs, grad)
    torch.cuda.synchronize()
    figures = {
        "transformer_engine": version,
        "empty_experts": n_empty,
        "rel_l2_out_vs_te": _moe.rel_l2(out, out_te),
        "rel_l2_dgrad_vs_te": _moe.rel_l2(dx, dx_te),
        "max_abs_out_vs_te": (out.float() - out_te.float()).abs().max().item(),
        "max_abs_dgrad_vs_te": (dx.float() - dx_te.float()).abs().max().item(),
        "out_bitwise_equal_te": bool(torch.equal(out, out_te)),
        "dgrad_bitwise_equal_te": bool(torch.equal(dx, dx_te)),
        "rel_l2_out_vs_fp64": _moe.rel_l2(out, ref),
        "rel_l2_out_te_vs_fp64": _moe.rel_l2(out_te, ref),
        "rel_l2_dgrad_vs_fp64": _moe.rel_l2(dx, ref_dx),
        "rel_l2_dgrad_te_vs_fp64": _moe.rel_l2(dx_te, ref_dx),
    }
    for key, value in figures.items():
        record_property(key, value)
    print(f"vs Transformer Engine {version} at {rows} rows: {figures}")
    assert figures["rel_l2_out_vs_te"] < 1e-2 and figures["rel_l2_dgrad_vs_te"] < 1e-2
    # No less accurate than TE against float64 (a 10% margin for rounding luck).
    assert figures["rel_l2_out_vs_fp64"] <= 1.1 * figures["rel_l2_out_te_vs_fp64"] + 1e-6
    assert figures["rel_l2_dgrad_vs_fp64"] <= 1.1 * figures["rel_l2_dgrad_te_vs_fp64"] + 1e-6
