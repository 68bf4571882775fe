"""`bench overhead`: what the engine's telemetry and bookkeeping cost against a bare decode loop.

Arm A is a `Session` generating greedily with everything on (per-token probes, reasoning parser,
a CSV sink). Arm B is the smallest loop the low-level API allows: decode one token, argmax, repeat.
Both use the same model file, prompt tokens, threads and token count, run interleaved (ABAB...,
order alternating every repeat) in one process, and are timed the same way: from the end of the
prefill to the end of the last decode, so everything the engine adds between decodes counts.
Both arms' llama.cpp objects live on the bench engine thread (bench/engine.py), chat's
arrangement: one OpenMP pool for both.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from workbench.backend import llama
from workbench.bench.engine import close_session, on_engine, open_session
from workbench.bench.stats import Interval, paired_ratio_ci
from workbench.config import Config
from workbench.engine.requests import GenerateRequest
from workbench.engine.sinks import CsvMetricsSink

DEFAULT_PROMPT = "Write a long, detailed story about a lighthouse keeper who finds a map."


@dataclass(frozen=True, slots=True)
class ArmTiming:
    tokens: int
    seconds: float  # prefill end to last decode end
    gap_seconds: float = 0.0  # of that, outside llama_decode: the loop's own Python (and argmax)

    @property
    def tok_s(self) -> float:
        return self.tokens / self.seconds


@dataclass(frozen=True, slots=True)
class OverheadReport:
    engine: list[ArmTiming]
    raw: list[ArmTiming]
    ratio: Interval  # engine tok/s / raw tok/s

    def last_line(self) -> str:
        eng = sum(a.tokens for a in self.engine) / sum(a.seconds for a in self.engine)
        raw = sum(a.tokens for a in self.raw) / sum(a.seconds for a in self.raw)
        return (
            f"overhead ratio={self.ratio.estimate:.4f} ci95=[{self.ratio.low:.4f}, "
            f"{self.ratio.high:.4f}] engine_tok_s={eng:.2f} raw_tok_s={raw:.2f} "
            f"repeats={len(self.engine)} tokens={self.engine[0].tokens} "
            f"engine_loop_ms_per_token={_gap_ms(self.engine):.4f} "
            f"raw_loop_ms_per_token={_gap_ms(self.raw):.4f} "
            f"engine_decode_ms_per_token={_decode_ms(self.engine):.4f} "
            f"raw_decode_ms_per_token={_decode_ms(self.raw):.4f}"
        )


def _decode_ms(runs: list[ArmTiming]) -> float:
    """Inside llama_decode, per token: where the ratio moves with the loop's gap unchanged, the
    decodes themselves differ (another thread took a core from the team, say)."""
    decoding = sum(a.seconds - a.gap_seconds for a in runs)
    return 1e3 * decoding / sum(a.tokens for a in runs)


def _gap_ms(runs: list[ArmTiming]) -> float:
    """Time between decodes per token (issue 38's goal for the engine: <= 0.1 ms)."""
    return 1e3 * sum(a.gap_seconds for a in runs) / sum(a.tokens for a in runs)


class RawLoop:
    """The baseline: a bare greedy loop over the low-level API, no telemetry at all."""

    def __init__(self, model_path: Path, config: Config) -> None:
        self.model = llama.Model(model_path, llama.ModelParams())
        self.ctx = llama.Context(
            self.model,
            llama.ContextParams(n_ctx=config.n_ctx, n_batch=min(config.n_batch, config.n_ctx),
                                n_ubatch=0, n_threads=config.n_threads),
        )

    def run(self, prompt_tokens: list[int], n_tokens: int) -> tuple[ArmTiming, list[int]]:
        ctx = self.ctx
        ctx.clear()
        if ctx.decode(prompt_tokens) != 0:
            raise RuntimeError("raw loop: prefill failed")
        out: list[int] = []
        decoding = 0
        start = time.perf_counter_ns()
        tok = ctx.argmax()
        while len(out) < n_tokens and not self.model.is_eog(tok):
            t0 = time.perf_counter_ns()
            if ctx.decode_one(tok) != 0:
                raise RuntimeError("raw loop: decode failed")
            decoding += time.perf_counter_ns() - t0
            out.append(tok)
            if len(out) < n_tokens:
                tok = ctx.argmax()
        seconds = (time.perf_counter_ns() - start) / 1e9
        return ArmTiming(len(out), seconds, seconds - decoding / 1e9), out

    def close(self) -> None:
        self.ctx.close()
        self.model.close()


def run_overhead(
    config: Config, *, prompt: str = DEFAULT_PROMPT, repeats: int = 5, warmup: int = 1,
    log=print,
) -> OverheadReport:
    config = config.replace(chat_template=False, temp=0.0)  # raw text: same tokens in both arms
    with tempfile.TemporaryDirectory() as tmp:
        sink = CsvMetricsSink(Path(tmp) / "overhead.csv")
        session = open_session(config, sink=sink)
        raw = on_engine(lambda: RawLoop(Path(session.config.model), session.config))
        try:
            prompt_tokens = raw.model.tokenize(prompt, add_special=True, parse_special=True)
            engine_runs: list[ArmTiming] = []
            raw_runs: list[ArmTiming] = []
            for i in range(warmup + repeats):
                order = ("engine", "raw") if i % 2 == 0 else ("raw", "engine")
                timings: dict[str, ArmTiming] = {}
                for arm in order:
                    if arm == "engine":
                        result = on_engine(lambda: session.generate(
                            GenerateRequest(text=prompt, new_chat=True)))
                        s = result.summary
                        assert s is not None
                        # Decode wall plus every gap between decodes (loop overhead incl. tail).
                        gap = s.loop_overhead_s_per_token * s.n_generated
                        timings[arm] = ArmTiming(s.n_generated, s.gen_seconds + gap, gap)
                    else:
                        timings[arm], _ = on_engine(
                            lambda: raw.run(prompt_tokens, config.n_predict))
                if timings["engine"].tokens != timings["raw"].tokens:
                    raise RuntimeError(
                        f"arms generated different token counts ({timings['engine'].tokens} vs "
                        f"{timings['raw'].tokens}): greedy decoding should make them equal"
                    )
                if i >= warmup:
                    engine_runs.append(timings["engine"])
                    raw_runs.append(timings["raw"])
                    eng, raw_t = timings["engine"], timings["raw"]
                    log(f"repeat {i - warmup + 1}/{repeats}: engine {eng.tok_s:.2f} tok/s, "
                        f"raw {raw_t.tok_s:.2f} tok/s")
        finally:
            on_engine(raw.close)
            close_session(session)
            sink.close()
    ratio = paired_ratio_ci([r.seconds for r in raw_runs], [e.seconds for e in engine_runs])
    return OverheadReport(engine=engine_runs, raw=raw_runs, ratio=ratio)
