"""The routing probe behind `advise`: a short greedy decode with the experts streamed and no
cache (so it needs no more memory than the dense part), its routing recorded and replayed at
the planned budget by the engine's own LRU rules (moe/replay.py)."""

from __future__ import annotations

from pathlib import Path

from workbench.bench.advise import MIB, DropOption, ProbeResult
from workbench.config import Config
from workbench.engine.requests import GenerateRequest
from workbench.engine.session import Session
from workbench.moe.replay import replay

PROMPT = "Explain, step by step, how a river carves a canyon over a million years."


def probe_routing(model: Path, *, budget_mib: int, tokens: int, threads: int) -> ProbeResult:
    """Decode `tokens` tokens of PROMPT streamed, then replay the routing at `budget_mib`."""
    config = Config().replace(model=str(model), moe_stream=True, cache_mb=0, n_threads=threads,
                              n_predict=tokens, temp=0.0, n_ctx=512)
    with Session.open(config, record_routes=True) as s:
        result = s.generate(GenerateRequest(text=PROMPT, n_predict=tokens, new_chat=True))
        if not result.ok:
            raise RuntimeError(f"the probe's decode failed: {result.error}")
        runtime = s.streaming
        assert runtime is not None  # moe_stream=True on a MoE model
        trace = runtime.route_trace()
        meta = trace.meta
    loads = [(t.turn, t.load) for t in trace.loads]
    report = replay(loads, meta.expert_bytes, meta.n_expert, meta.n_expert_used,
                    [budget_mib * MIB], what_ifs=True)
    (row,) = report.budgets
    drops = [DropOption(float(w.name.split()[1]), w.reads_avoided_pct, w.mass_dropped_pct)
             for w in row.what_ifs if w.name.startswith("drop ")]  # "drop 0.75" (replay_drop)
    return ProbeResult(
        tokens=report.decode_tokens, budget_mib=float(budget_mib),
        lru_hit_pct=row.lru.decode_hit_pct, belady_hit_pct=row.belady.decode_hit_pct,
        mib_per_token=row.lru.decode_mib_per_token,
        token_demand_mib=report.token_demand_bytes / MIB if report.token_demand_bytes >= 0
        else -1.0,
        drops=tuple(drops))
