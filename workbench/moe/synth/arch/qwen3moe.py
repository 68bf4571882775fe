"""qwen3moe: plain GQA attention and routed experts (split gate/up/down) in every layer; the
churning recipe (SynthSpec.churn, the bench default) is built for it."""

from __future__ import annotations

from gguf import GGUFWriter

from workbench.moe.synth.architecture import Architecture
from workbench.moe.synth.plans import (
    _attention,
    _common_head,
    _common_tail,
    _experts,
    _norm,
    _Plan,
    _router,
)
from workbench.moe.synth.spec import SynthSpec


def _qwen3moe_plans(spec: SynthSpec) -> list[_Plan]:
    plans = _common_head(spec)
    for il in range(spec.n_layer):
        plans.append(_Plan(f"blk.{il}.attn_norm.weight", (spec.n_embd,), "F32", fill=1.0))
        plans += _attention(spec, il)
        plans.append(_norm(spec, f"blk.{il}.ffn_norm.weight"))
        plans.append(_router(spec, il))
        plans += _experts(spec, il, fused_gate_up=False)
    return plans + _common_tail(spec)


def _head_metadata(w: GGUFWriter, spec: SynthSpec) -> None:
    w.add_feed_forward_length(spec.n_ff_exp * spec.n_expert_used)


ARCH = Architecture("qwen3moe", rank=0, plans=_qwen3moe_plans, head_metadata=_head_metadata,
                    churns=True)
