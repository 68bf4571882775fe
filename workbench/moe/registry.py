"""Architectures whose experts can be streamed.

Nothing here is per-model maths: the streamer discovers expert tensors from the graph
(`blk.<il>.ffn_{gate,up,down,gate_up}_exps.weight`). The registry only names the architectures
that use llama.cpp's shared MoE feed-forward (and so the `ffn_moe_topk-<il>` router node), so an
unknown one gets a clear message instead of a silent non-streaming run.
"""

from __future__ import annotations

STREAMABLE_ARCHS: frozenset[str] = frozenset({
    "qwen3moe", "qwen2moe", "qwen35moe", "qwen3next", "gpt-oss", "gemma4", "lfm2moe", "olmoe",
    "granitemoe", "granitehybrid", "deepseek2", "glm4moe", "mixtral", "llama4", "dots1",
    "ernie4_5-moe", "bailingmoe", "bailingmoe2", "hunyuan-moe", "smallthinker", "grovemoe",
    # Both call build_moe_ffn with split gate/up/down _exps tensors. deepseek4's hash-routed
    # layers name their token->expert table lookup `ffn_moe_topk-<il>` too; bailingmoe3's NextN
    # (MTP) block runs only in the MTP graph, which the session never builds.
    "deepseek4", "bailingmoe3",
})


class NotStreamableError(ValueError):
    """Streaming was asked for a model it cannot apply to; the message says why and what to do."""


def check_streamable(arch: str, n_expert: int, model_name: str) -> None:
    if n_expert <= 0:
        raise NotStreamableError(
            f"{model_name} is a dense model ({arch}, no experts): expert streaming only applies to "
            "Mixture-of-Experts models. Turn streaming off to run it resident."
        )
    if arch not in STREAMABLE_ARCHS:
        known = ", ".join(sorted(STREAMABLE_ARCHS))
        raise NotStreamableError(
            f"{model_name} is a MoE model of architecture '{arch}', which the expert streamer does "
            f"not know yet (it knows: {known}). Turn streaming off to run it resident."
        )
