"""Every key of a ``# summary`` line, declared once: the writer and the docs follow it.

Each `SummaryKey` names the key as written, its printf format, the `RunSummary` attribute (a
field or a property) it comes from, whether upstream's trailer has it, and its meaning. `KEYS`
holds them in line order: the upstream keys that apply to this engine, in upstream's order, then
ours. From it come `summary_pairs` (metrics_writer.py) and the summary table of
docs/telemetry.md (metric_docs.py). The reader keeps every key it finds, so it needs no table.

Regenerate the docs after changing a declaration:  python -m workbench.engine.metric_docs --write
"""

from __future__ import annotations

from dataclasses import dataclass

_TEXT = ""  # free text, percent-encoded (metrics_syntax.encode_value), not printf-formatted
_S_PER_TOKEN = "%.6f"  # more decimals than upstream's: a small model decodes in milliseconds


@dataclass(frozen=True, slots=True)
class SummaryKey:
    key: str  # as written in the file
    fmt: str  # printf format; "" for text
    source: str  # the RunSummary attribute the value is read from
    doc: str  # its meaning, one line of Markdown
    upstream: bool = True  # upstream's summary trailer has this key


KEYS: tuple[SummaryKey, ...] = (
    SummaryKey("tokens", "%d", "n_generated", "tokens generated this turn"),
    SummaryKey("s/tok", _S_PER_TOKEN, "s_per_token", "`gen_seconds / n_generated`"),
    SummaryKey("tok/s", "%.3f", "tokens_per_second", "`n_generated / gen_seconds`"),
    SummaryKey("read_MiB", "%.1f", "moe_read_mib", "expert bytes read this turn, in MiB"),
    SummaryKey("io_s", "%.3f", "moe_io_seconds", "`moe_io_s_per_token × n_generated`"),
    SummaryKey("compute_s/tok", _S_PER_TOKEN, "moe_compute_s_per_token",
               "s/tok − io − mgmt, at least 0"),
    SummaryKey("io_s/tok", _S_PER_TOKEN, "moe_io_s_per_token",
               "time blocked on expert reads per token"),
    # %.1f as upstream: its bench script compares the text "-1.0" for "no cache".
    SummaryKey("cache_hit_pct", "%.1f", "cache_hit_pct",
               "cumulative hit rate at the end of the turn"),
    SummaryKey("n_prompt", "%d", "n_prompt", "prompt tokens prefilled this turn (after KV reuse)"),
    SummaryKey("load_s", "%.3f", "load_seconds", "model load time (repeated on every turn)"),
    SummaryKey("prefill_s", "%.3f", "prefill_seconds", "prefill time of this turn"),
    SummaryKey("prefill_tps", "%.2f", "prefill_tokens_per_second", "`n_prompt / prefill_s`"),
    SummaryKey("stall_s/tok", _S_PER_TOKEN, "moe_stall_s_per_token",
               "overlap mode's read stall per token"),
    SummaryKey("mgmt_s/tok", _S_PER_TOKEN, "moe_mgmt_s_per_token",
               "expert-cache bookkeeping per token"),
    SummaryKey("cache_resident_MiB", "%.1f", "cache_resident_mib", "expert cache resident size"),
    SummaryKey("cache_budget_MiB", "%.1f", "cache_budget_mib", "expert cache budget"),
    SummaryKey("cache_resizes", "%d", "cache_resizes", "budget changes (session total)"),
    SummaryKey("majflt/tok", "%.2f", "majflt_per_token", "major page faults per token"),
    SummaryKey("cpu_s/tok", _S_PER_TOKEN, "cpu_s_per_token", "process CPU time per token"),
    SummaryKey("token_demand_MiB", "%.1f", "token_demand_mib",
               "distinct expert bytes one token routes to"),
    SummaryKey("layer_demand_MiB", "%.1f", "layer_demand_mib",
               "expert bytes of the widest single layer"),
    SummaryKey("experts_routed", "%d", "experts_routed", "expert routings this turn"),
    SummaryKey("experts_dropped", "%d", "experts_dropped",
               "routings discarded by dropping this turn (-1 while dropping is off)"),
    SummaryKey("experts_reranked", "%d", "experts_reranked",
               "slots substitution examined this turn (-1 while substitution is off)"),
    SummaryKey("experts_substituted", "%d", "experts_substituted",
               "experts substitution brought into a token's set this turn, in place of the "
               "router's (changed sets only; -1 while substitution is off)"),
    SummaryKey("loop_overhead_s/tok", _S_PER_TOKEN, "loop_overhead_s_per_token",
               "time between decodes per token, including the tail after the last token"),
    SummaryKey("evictions", "%d", "cache_evictions", "expert-cache evictions (session total)"),
    SummaryKey("rereads", "%d", "cache_rereads",
               "evicted experts read again (session total)"),
    SummaryKey("mtp_drafted", "%d", "spec_drafted",
               "tokens drafted this turn (n-gram or draft model); -1 while speculation is off"),
    SummaryKey("mtp_accepted", "%d", "spec_accepted", "of those, kept by verification"),
    SummaryKey("mtp_decodes", "%d", "spec_decodes", "generation decodes (plain and verify)"),
    SummaryKey("mtp_draft_s/tok", _S_PER_TOKEN, "spec_draft_s_per_token",
               "drafting time per token (inside `loop_overhead_s/tok`)"),
    SummaryKey("drafted_steps", "%d", "spec_drafted_steps", "verify steps (a draft was proposed)"),
    # Ours.
    SummaryKey("turn", "%d", "turn", "0-based turn index", upstream=False),
    SummaryKey("n_reused", "%d", "n_reused", "prompt tokens served from the KV cache",
               upstream=False),
    SummaryKey("n_past", "%d", "n_past", "context position after the turn", upstream=False),
    SummaryKey("ttft_s", "%.3f", "ttft_seconds",
               "request start to the first generated token being available (includes any KV "
               "restore and image encoding)", upstream=False),
    SummaryKey("gen_s", _S_PER_TOKEN, "gen_seconds", "the exact denominator of `tok/s`",
               upstream=False),
    SummaryKey("stop_reason", _TEXT, "stop_reason", "`eos`, `length`, `stopped` or `error`",
               upstream=False),
    SummaryKey("kv_source", _TEXT, "kv_source",
               "how the prompt was served: `fresh` (all read), `memory` (the conversation's KV "
               "in the context or restored from the pool) or `disk` (restored from its file)",
               upstream=False),
    SummaryKey("drop_weight_pct", "%.2f", "drop_weight_pct",
               "router weight the drops discarded this turn, as % of the router's whole decode "
               "weight this turn (every generated token's routing; the replay's definition) "
               "(-1 while dropping is off)", upstream=False),
    SummaryKey("kv_restore_s", "%.4f", "kv_restore_seconds",
               "time to restore the conversation's KV state (TTFT includes it); -1 when none "
               "was restored", upstream=False),
    SummaryKey("images", "%d", "n_images", "images in the prompt; -1 without an image projector",
               upstream=False),
    SummaryKey("images_encoded", "%d", "images_encoded",
               "of those, encoded this turn (the others were reused from the KV cache)",
               upstream=False),
    SummaryKey("image_tokens", "%d", "image_tokens",
               "embeddings decoded from the images encoded this turn (part of `n_prompt`)",
               upstream=False),
    SummaryKey("image_encode_s", "%.4f", "image_encode_seconds",
               "vision-encoder time of this turn (TTFT and `prefill_s` include it); -1 without "
               "a projector", upstream=False),
    SummaryKey("spec", _TEXT, "spec",
               "speculation in force this turn: `off`, `ngram`, `draft`, or `off: ...` with why",
               upstream=False),
    SummaryKey("accept_pct", "%.1f", "spec_accept_pct",
               "`mtp_accepted / mtp_drafted × 100`; -1 when nothing was drafted", upstream=False),
    SummaryKey("tok/decode", "%.3f", "tokens_per_decode",
               "`tokens / mtp_decodes`: 1 without speculation", upstream=False),
    SummaryKey("grammar_s", "%.4f", "grammar_seconds",
               "a grammar's time this turn (structured output: its mask and accept per token, "
               "inside `loop_overhead_s/tok`, never in the decode time): the sum of the "
               "`grammar_ms` column, plus the pick of an end token (which has no row); -1 "
               "without a grammar",
               upstream=False),
)

BY_KEY: dict[str, SummaryKey] = {k.key: k for k in KEYS}

# Upstream trailer keys for features this engine lacks, left out rather than written as fake
# zeros. Upstream files may have all of them; the reader keeps every key.
LEFT_OUT_UPSTREAM: tuple[str, ...] = (
    "spec_read_MiB", "spec_experts", "spec_useful", "ra_committed", "ra_passthrough",
    "ra_agree_pct",
    "ra_gemv_ms/tok", "ra_issue_ms/tok", "ra_wd_ms/tok", "drain_s/tok", "adopt_s/tok",
)

# RunSummary fields no summary key writes, and why (a test keeps this list complete).
NOT_WRITTEN: dict[str, str] = {"n_ctx": "the preamble's n_ctx says it once per session",
                               "spec_draft_seconds": "written per token, as mtp_draft_s/tok",
                               "turn_settings": "its own line before the summary, "
                                                "wb_turn_settings"}
