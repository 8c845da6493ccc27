"""The perf(moe) patch with trainable LoRA adapters on the frozen experts, on a GPU.

What LoRA fine-tuning of Nemotron-Super needs from moe_expert_gemm_backend="torch": with trainable
low-rank adapters on the grouped experts' fc1 and fc2 and the expert base weights frozen, the torch
backend must give the same output, input gradient and adapter gradients as the default expert path,
and an optimizer step must move the adapters only.

Shapes: Nemotron-Super's MoE layer, 128 experts, hidden 1024, expert ffn 2688, non-gated squared ReLU,
BF16 weights and activations; skewed routing of 8,192 rows with ~20 experts that receive none.

The adapters follow Megatron-Bridge's LoRA for a linear: a wrapper holding the frozen linear (`to_wrap`)
and an adapter, whose output `scale * B(A(x))` (scale = alpha / rank, no dropout) is added to the
frozen base output. Two variants are checked:

- "shared": one adapter per wrapped grouped linear, applied to every routed row, which is what Bridge's
  `LoRALinear(TEGroupedLinear, ParallelLinearAdapter)` does for the experts' linear_fc1/linear_fc2;
- "per_expert": one adapter per local expert, applied to that expert's rows (the same m_splits /
  tokens_per_expert as the base GEMM), so experts without rows get exactly zero adapter gradient.

B starts non-zero (as after some training; Bridge's zero init would give A no gradient).

Where the adapter runs. Both arms call `linear_fc1(x, m_splits)` / `linear_fc2(...)`, i.e. the
wrapper, which runs the frozen base linear and adds the adapter; on the torch backend the base linear
itself runs the frozen experts as one `torch._grouped_mm` (the perf(moe) patch puts the switch in the torch
grouped linears for exactly this reason). Nothing in the code under test is replaced. Each adapter is
checked to run exactly once per forward in both arms.

Compared (relative L2, within the suite's 1e-2): output, input gradient and every adapter gradient,
torch backend against the default backend on identical weights, and the torch backend against a float64
reference; then one SGD step must change every adapter parameter and leave every base expert weight
bit-identical.
"""

from __future__ import annotations

import pytest

from tests import _cuda, _patched

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not _cuda.available(), reason="needs a CUDA GPU"),
]

VARIANTS = ("shared", "per_expert")


@pytest.fixture(scope="module")
def single_rank(megatron_tree):
    _patched.init_single_rank()


@pytest.mark.parametrize("variant", VARIANTS)
def test_adapter_gradients_match_default_backend(single_rank, variant, record_property):
    from tests.gpu import _lora

    figures = _lora.check_parity(variant)
    for key, value in figures.items():
        record_property(key, value)
    print(
        f"{variant}: "
        + ", ".join(f"{k} {v:.3e}" if isinstance(v, float) else f"{k} {v}" for k, v in figures.items())
    )
    assert 15 <= figures["empty_experts"] <= 27, figures["empty_experts"]
    assert figures["adapter_share_of_out"] > 0.1, "the adapters barely change the output"
    checked = {k: v for k, v in figures.items() if "rel_l2" in k and k != "adapter_share_of_out"}
    assert len([k for k in checked if k.startswith("rel_l2_grad.")]) == 4
    failed = {k: v for k, v in checked.items() if not v < _lora.TOLERANCE}
    assert not failed, f"relative L2 over {_lora.TOLERANCE}: {failed}"
