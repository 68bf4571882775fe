"""What makes a synthetic model's spec valid: the common rules, then its architecture's own."""

from __future__ import annotations

from workbench.moe.synth.arch import ARCHES, ARCHITECTURES, moe_layers
from workbench.moe.synth.spec import WEIGHT_TYPES, SynthSpec


def _validate(spec: SynthSpec) -> None:
    problems: list[str] = []
    if spec.arch not in ARCHES:
        problems.append(f"arch must be one of {', '.join(ARCHES)}, not {spec.arch!r}")
    for label, t in (("expert_type", spec.expert_type), ("dense_type", spec.dense_type)):
        if t not in WEIGHT_TYPES:
            problems.append(f"{label} must be one of {', '.join(WEIGHT_TYPES)}, not {t!r}")
    for label, v in (("n_layer", spec.n_layer), ("n_embd", spec.n_embd), ("n_head", spec.n_head),
                     ("n_head_kv", spec.n_head_kv), ("head_dim", spec.head_dim),
                     ("n_expert", spec.n_expert), ("n_expert_used", spec.n_expert_used),
                     ("n_ff_exp", spec.n_ff_exp), ("n_ctx_train", spec.n_ctx_train)):
        if v < 1:
            problems.append(f"{label} must be at least 1")
    if spec.n_expert_used > spec.n_expert:
        problems.append("n_expert_used cannot exceed n_expert")
    if spec.n_head % max(spec.n_head_kv, 1):
        problems.append("n_head must be a multiple of n_head_kv")
    if spec.head_dim % 2:
        problems.append("head_dim must be even (rope)")
    arch = ARCHITECTURES.get(spec.arch)
    if spec.churn and arch is not None and not arch.churns:
        churning = ", ".join(a.name for a in ARCHITECTURES.values() if a.churns)
        problems.append(f"the churning recipe (churn) is built for {churning} only")
    if spec.churn and spec.n_head_kv * spec.head_dim > spec.n_embd:
        problems.append("churn needs n_head_kv * head_dim <= n_embd (the token subspace)")
    if not spec.router_norm and arch is not None and not arch.reads_weights_norm:
        readers = ", ".join(a.name for a in ARCHITECTURES.values() if a.reads_weights_norm)
        problems.append(f"router_norm=False needs an arch whose loader reads "
                        f"expert_weights_norm ({readers}); llama.cpp always normalises "
                        f"{spec.arch}'s router")
    if arch is not None:
        problems += arch.problems(spec)
    quantized = [t for t in (spec.expert_type, spec.dense_type) if t.startswith("Q")]
    rows = (spec.n_embd, spec.n_ff_exp, spec.n_ff_shared, spec.n_head * spec.head_dim)
    if quantized and any(r % 32 for r in rows):
        problems.append("quantized types need n_embd, n_ff_exp, n_ff_shared and n_head*head_dim "
                        "divisible by 32")
    if spec.corrupt_expert is not None:
        il, e = spec.corrupt_expert
        if not (il in moe_layers(spec) and 0 <= e < spec.n_expert):
            problems.append(f"corrupt_expert {spec.corrupt_expert} is outside the expert layers "
                            f"{moe_layers(spec)} x {spec.n_expert} experts")
    if spec.split_max_tensors < 0:
        problems.append("split_max_tensors must be 0 (no split) or positive")
    if problems:
        raise ValueError("invalid synthetic model: " + "; ".join(problems))
