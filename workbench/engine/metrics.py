"""Per-token and per-turn telemetry records.

Names, units and definitions follow the upstream engine's `bmoe_metrics v2` schema so that files
stay comparable (docs/telemetry.md). The rule that matters most: a value that was not measured is
``UNMEASURED`` (-1) or empty, never 0. The streaming fields keep that sentinel until the streamer
fills them.

`TokenMetrics` is declared column by column in metric_columns.py (unit, format, who fills it);
its fields are spelled out here for speed and typing, and checked against that table on import.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from workbench.engine.metric_columns import check_record

UNMEASURED = -1.0
"""Sentinel for a figure that was not measured (never 0)."""


@dataclass(slots=True)
class TokenMetrics:
    """One generated token. Times in ms, sizes in bytes or MiB as the name says."""

    step: int  # 1-based token index in this generation
    steps: int  # tokens-to-generate target of this generation
    turn: int  # 0-based generate() index within the session
    wall_ms: float  # wall time of llama_decode only (the decode bracket)
    cpu_ms: float  # process CPU time delta around that same decode (all threads)
    majflt: int  # major page faults delta around the decode
    majflt_mib: float  # majflt x page size, in MiB (a floor: kernels fault clusters)
    loop_overhead_ms: float  # previous decode's end (or prefill end) to this decode's start
    # Memory probes, read after a decode, outside the bracket, at most
    # metric_columns.MEMORY_MAX_AGE_MS old (MiB).
    rss_mib: float = UNMEASURED
    rss_anon_mib: float = UNMEASURED
    rss_file_mib: float = UNMEASURED
    swap_mib: float = UNMEASURED
    mem_available_mib: float = UNMEASURED
    mem_free_mib: float = UNMEASURED
    swap_free_mib: float = UNMEASURED
    # Expert streaming (filled by the streamer; unmeasured until it runs).
    io_ms: float = UNMEASURED
    mgmt_ms: float = UNMEASURED
    stall_ms: float = UNMEASURED
    compute_ms: float = UNMEASURED  # residual wall - io - mgmt (clamped); = wall_ms resident
    read_bytes: int = -1
    cache_hit_pct: float = UNMEASURED  # cumulative since the cache was created
    cache_budget_mib: float = UNMEASURED
    dense_resident_frac: float = UNMEASURED
    experts_routed: int = -1  # while dropping is on: slots routed / dropped this decode
    experts_dropped: int = -1
    # While substitution is on: slots of the rows it examined / experts it brought in.
    experts_reranked: int = -1
    experts_substituted: int = -1
    # Speculative decoding (engine/speculation): tokens confirmed by this row's decode, its drafting
    # time, and what was drafted and kept; -1 while speculation is off.
    mtp_batch: int = 1
    mtp_draft_ms: float = UNMEASURED
    drafted: int = -1
    draft_len: int = -1
    draft_kept: int = -1
    # A grammar's time for this token's pick (engine/constrain.py), outside the decode
    # bracket; -1 when the turn ran no grammar.
    grammar_ms: float = UNMEASURED
    # Overlap/route-ahead columns of the upstream schema, which this engine does not have.
    drain_ms: float = UNMEASURED
    adopt_ms: float = UNMEASURED
    ra_issue_ms: float = UNMEASURED
    ra_wd_ms: float = UNMEASURED
    # Text: this token's piece, and the parsed answer and reasoning so far.
    token_id: int = -1
    piece: str = ""
    text: str = ""
    reasoning: str = ""


check_record(TokenMetrics)


@dataclass(slots=True)
class RunSummary:
    """One generate() call, generation phase only (prefill is reported separately)."""

    turn: int
    n_generated: int
    gen_seconds: float  # sum of decode wall over generated tokens
    n_prompt: int  # tokens prefilled this turn (after KV reuse)
    n_reused: int  # prompt tokens served from the KV cache
    n_past: int  # context position after the turn
    n_ctx: int
    load_seconds: float
    prefill_seconds: float
    ttft_seconds: float  # request start to the first generated token being available
    majflt_per_token: float
    cpu_s_per_token: float
    loop_overhead_s_per_token: float  # includes the tail after the last token
    stop_reason: str  # "eos", "length", "stopped", "error"
    # Streaming figures: unmeasured until the streamer runs.
    moe_read_mib: float = UNMEASURED
    moe_io_s_per_token: float = UNMEASURED
    moe_mgmt_s_per_token: float = UNMEASURED
    moe_stall_s_per_token: float = UNMEASURED
    moe_compute_s_per_token: float = UNMEASURED
    cache_hit_pct: float = UNMEASURED
    cache_resident_mib: float = UNMEASURED
    cache_budget_mib: float = UNMEASURED
    cache_resizes: int = -1
    cache_evictions: int = -1
    cache_rereads: int = -1
    token_demand_mib: float = UNMEASURED
    layer_demand_mib: float = UNMEASURED
    experts_routed: int = -1
    experts_dropped: int = -1
    experts_reranked: int = -1  # while substitution is on (the upstream engine's names)
    experts_substituted: int = -1
    drop_weight_pct: float = UNMEASURED  # weight dropped, % of the router's whole decode weight
    # How the prompt was served: "fresh" (all prefilled), "memory" (the KV in the context or
    # restored from the pool), "disk" (restored from a spill file); the restore's time, which
    # TTFT includes (unmeasured when nothing was restored).
    kv_source: str = ""
    kv_restore_seconds: float = UNMEASURED
    # Images (engine/images.py): -1 when the session has no image projector. TTFT includes
    # the encode time.
    n_images: int = -1  # images in the prompt
    images_encoded: int = -1  # of those, encoded this turn (the others were reused from the KV)
    image_tokens: int = -1  # embeddings of the images encoded this turn
    image_encode_seconds: float = UNMEASURED
    # Speculative decoding (engine/speculation): -1 / "off" while it is off for the turn.
    spec: str = "off"  # "ngram", "draft", or why it is off ("off", "off: sampling")
    spec_decodes: int = -1  # generation decodes, plain and verify
    spec_drafted_steps: int = -1  # verify steps (a draft was proposed)
    spec_drafted: int = -1  # tokens drafted
    spec_accepted: int = -1  # of those, kept
    spec_draft_seconds: float = UNMEASURED  # drafting time (inside the loop overhead)
    # A grammar's time over the turn (engine/constrain.py): its mask and accept per token,
    # outside the decode bracket (inside the loop overhead); -1 when no grammar ran.
    grammar_seconds: float = UNMEASURED
    # The settings the turn ran with (turn_settings.RECORDED_PER_TURN: its sampling, length,
    # thinking, speculation). The metrics file writes them on a line of their own before the
    # turn's summary (`wb_turn_settings`); {} when unknown (an older record).
    turn_settings: dict[str, object] = field(default_factory=dict)

    @property
    def s_per_token(self) -> float:
        return self.gen_seconds / self.n_generated if self.n_generated else UNMEASURED

    @property
    def tokens_per_second(self) -> float:
        """Aggregate decode rate: tokens / sum of decode wall (never a mean of rates)."""
        return self.n_generated / self.gen_seconds if self.gen_seconds > 0 else UNMEASURED

    @property
    def spec_accept_pct(self) -> float:
        """Drafted tokens verification kept, % (unmeasured when nothing was drafted)."""
        if self.spec_drafted <= 0:
            return UNMEASURED
        return 100.0 * self.spec_accepted / self.spec_drafted

    @property
    def tokens_per_decode(self) -> float:
        """Generated tokens per generation decode: 1 without speculation, more when it pays."""
        if self.spec_decodes <= 0:
            return UNMEASURED
        return self.n_generated / self.spec_decodes

    @property
    def spec_draft_s_per_token(self) -> float:
        if self.spec_draft_seconds < 0 or not self.n_generated:
            return UNMEASURED
        return self.spec_draft_seconds / self.n_generated

    @property
    def moe_io_seconds(self) -> float:
        """The turn's total expert I/O time (unmeasured when the per-token figure is)."""
        if self.moe_io_s_per_token < 0:
            return UNMEASURED
        return self.moe_io_s_per_token * self.n_generated

    @property
    def prefill_tokens_per_second(self) -> float:
        if self.n_prompt <= 0 or self.prefill_seconds <= 0:
            return UNMEASURED
        return self.n_prompt / self.prefill_seconds


@dataclass(slots=True)
class ModelIdentity:
    path: str
    name: str
    size_bytes: int
    fast_hash: str  # hash of size + head + middle + tail blocks; cheap enough for every load


@dataclass(slots=True)
class RunInfo:
    """What produced a run: written once as the preamble of a metrics file."""

    engine_version: str
    llama_cpp_python_version: str
    model: ModelIdentity
    arch: str
    n_layer: int
    n_expert: int  # 0 for a dense model
    n_expert_used: int  # effective top-k; 0 for a dense model
    n_vocab: int
    n_ctx_train: int
    chat_template: bool  # the model's own template is rendered (else raw text)
    settings: dict[str, object] = field(default_factory=dict)  # every resolved setting
