"""What a server request tells about itself: the `x_workbench` figures, and the observer hooks
the CLI's log line and the window's live plots follow.

The figures keep the engine's rule: unmeasured is -1, never 0 (a model that does not stream its
experts has no hit rate and reads no expert bytes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from workbench.engine.metrics import UNMEASURED, RunSummary
from workbench.engine.requests import GenerateResult, TokenEvent


@dataclass(frozen=True, slots=True)
class RequestInfo:
    id: str  # the response id the client sees ("chatcmpl-...", "cmpl-...")
    kind: str  # "chat" or "completion"
    client: str  # who sent it: its `user` field or User-Agent, and its address


class ServerObserver(Protocol):
    """Called on the engine thread, in order, for every request the engine runs."""

    def request_started(self, request: RequestInfo) -> None: ...

    def token(self, request: RequestInfo, event: TokenEvent) -> None: ...

    def request_ended(self, request: RequestInfo, result: GenerateResult) -> None: ...


def x_workbench(summary: RunSummary | None) -> dict[str, Any]:
    """The workbench's own figures for one request (docs/server.md lists them)."""
    if summary is None:
        return {"tokens_per_second": UNMEASURED, "cache_hit_pct": UNMEASURED, "read_bytes": -1,
                "ttft_seconds": UNMEASURED, "prefill_seconds": UNMEASURED, "kv_source": "",
                "n_reused": 0, "grammar_ms_per_token": UNMEASURED}
    read = summary.moe_read_mib
    grammar = summary.grammar_seconds
    return {
        "tokens_per_second": round(summary.tokens_per_second, 3),
        "cache_hit_pct": round(summary.cache_hit_pct, 3),
        "read_bytes": int(read * (1 << 20)) if read != UNMEASURED else -1,
        "ttft_seconds": round(summary.ttft_seconds, 4),
        "prefill_seconds": round(summary.prefill_seconds, 4),
        "kv_source": summary.kv_source,
        "n_reused": summary.n_reused,
        # The grammar's mask and accept per generated token, outside the decode time.
        "grammar_ms_per_token": (round(grammar * 1e3 / summary.n_generated, 4)
                                 if grammar != UNMEASURED and summary.n_generated else UNMEASURED),
    }


def usage(summary: RunSummary | None) -> dict[str, Any]:
    n_prompt = summary.n_prompt + summary.n_reused if summary else 0
    n_generated = summary.n_generated if summary else 0
    return {"prompt_tokens": n_prompt, "completion_tokens": n_generated,
            "total_tokens": n_prompt + n_generated,
            "prompt_tokens_details": {"cached_tokens": summary.n_reused if summary else 0}}
