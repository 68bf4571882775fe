"""Conversation memory: which conversation's KV state the context holds, and the others' kept.

One context serves many conversations (the window's chats, the server's slots). The one whose
turn runs holds the context; switching to another puts the current one's state in the pool
(engine/kv_pool.py: memory, then the disk spill) and restores the other's, if kept. A deleted
conversation is forgotten everywhere; a failed decode discards only its own state. The memory
also remembers the text the context holds after the last completed turn (to explain a re-read)
and the measured prefill rate, so a forecast counts a draft exactly as its turn would.

Used by `Session` on its engine thread only; it owns no model, only the bookkeeping.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from workbench.backend import llama
from workbench.config import Config
from workbench.engine.chat.history import find_divergence
from workbench.engine.chat.template import ChatTemplate
from workbench.engine.images import kv_cells
from workbench.engine.kv_memory import KvMemory, common_prefix
from workbench.engine.kv_pool import KvPool, PooledState, make_spill, pool_budget_bytes
from workbench.engine.metrics import UNMEASURED, RunInfo
from workbench.engine.prompt import Prompt
from workbench.engine.requests import Forecast, StopReason

log = logging.getLogger("workbench.session")

MIN_RATE_TOKENS = 16  # prompt tokens a turn must read to count towards the prefill rate


class ConversationMemory:
    """The context's owner, the kept states of the others, and what a forecast needs."""

    def __init__(self, ctx: llama.Context, kv: KvMemory, pool: KvPool) -> None:
        self._ctx = ctx
        self._kv = kv
        self.pool = pool
        self.owner: str | None = None  # the conversation whose KV the context holds
        self._owner_state: PooledState | None = None  # its pool entry, checked out
        self._prefilled = (0, 0.0)  # prompt tokens read and their seconds (for forecasts)
        # Text the KV memory holds after the last completed chat turn (to explain re-prefills),
        # and whether that turn had reasoning (some templates strip it from the history).
        self.kv_text = ""
        self.kv_text_had_reasoning = False

    def set_budgets(self, config: Config, run_info: RunInfo, kv_dir: Path | None) -> None:
        """The pool's memory and disk budgets from `config` (kv_pool_mb, kv_disk_mb)."""
        self.pool.set_budget(pool_budget_bytes(config.kv_pool_mb))
        if self.pool.spill is not None:
            self.pool.spill.budget_bytes = config.kv_disk_mb << 20
        else:  # kv_disk_mb raised from 0: the states go to disk from now on, no reopen
            self.pool.spill = make_spill(config, run_info, kv_dir)

    def switch_to(self, conversation: str | None) -> tuple[str, float]:
        """Give the context to `conversation`; ("memory"/"disk", seconds) when its state was
        restored from the pool, ("", -1) when it was already there or had none."""
        if conversation == self.owner:
            return "", UNMEASURED
        started = time.perf_counter()
        self.leave()
        self.owner = conversation
        got = self.pool.checkout(conversation) if conversation is not None else None
        if got is None:
            return "", UNMEASURED
        state, where = got
        assert state.data is not None
        if not self._ctx.set_seq_state(state.data):
            log.warning("llama.cpp refused the kept state of conversation %s; re-reading it",
                        conversation)
            self.pool.release(state)
            self.pool.discard(conversation)
            return "", UNMEASURED
        self._kv.tokens[:] = state.tokens
        self._owner_state = state
        return where, time.perf_counter() - started

    def leave(self) -> None:
        """The conversation in the context steps aside: its state goes to the pool."""
        if self.owner is not None and self._kv.tokens:
            self.pool.put(self.owner, self._kv.tokens, self._ctx.seq_state())
        elif self._owner_state is not None:
            self.pool.release(self._owner_state)
        self._owner_state = None
        self._kv.clear()
        self.kv_text = ""

    def forget(self, conversation: str) -> None:
        """A deleted conversation: nothing of its state is kept, in memory or on disk. If the
        context holds it, the context is emptied (the next turn starts fresh)."""
        if conversation == self.owner:
            self._drop_owner_state()
            self.owner = None
            self._kv.clear()  # the context's memory with it
            self.kv_text = ""
        self.pool.forget(conversation)

    def clear_context(self) -> None:
        """A new chat in the same conversation: the context starts empty."""
        self._kv.clear()
        self.kv_text = ""

    def held_tokens(self, conversation: str | None) -> list[int]:
        """The tokens kept for `conversation`: in the context, in the pool or on disk."""
        if conversation == self.owner:
            return self._kv.tokens
        if conversation is None:
            return []
        kept = self.pool.get(conversation)
        if kept is not None:
            return kept.tokens
        return self.pool.spill.peek_tokens(conversation) if self.pool.spill is not None else []

    def n_reused(self, conversation: str | None, tokens: list[int]) -> int:
        """Tokens of a prompt `tokens` long that `conversation`'s kept state would spare."""
        return common_prefix(self.held_tokens(conversation), tokens)

    def forecast(self, conversation: str | None, prompt: Prompt, extra: dict[int, int],
                 n_ctx: int, n_predict: int) -> Forecast:
        """What `prompt` would cost to read in `conversation`, exactly as its turn would count
        it (the same prefix rule), in KV cells (an M-RoPE image takes one per embedding)."""
        n_reused = self.n_reused(conversation, prompt.tokens)
        rate = self.prefill_rate
        total, reused = prompt.kv_cells, kv_cells(prompt.tokens[:n_reused], extra)
        return Forecast(total, reused, (total - reused) / rate if rate > 0 else UNMEASURED,
                        n_ctx=n_ctx, n_predict=n_predict)

    def count_prefill(self, n_prompt: int, seconds: float) -> None:
        """A turn's prompt reading, towards the rate (a few tokens time mostly overhead)."""
        if n_prompt >= MIN_RATE_TOKENS:
            tokens, total = self._prefilled
            self._prefilled = (tokens + n_prompt, total + seconds)

    @property
    def prefill_rate(self) -> float:
        """Prompt tokens per second over the turns that read enough to measure; -1 before."""
        tokens, seconds = self._prefilled
        return tokens / seconds if seconds > 0 else UNMEASURED

    def after_turn(self, stop_reason: StopReason, text: str, had_reasoning: bool) -> None:
        """What a turn leaves in the context: `text` (its prompt and what it generated) when it
        completed. A failed decode discarded the KV: the owner's kept state goes too (the others
        are untouched). A stopped or failed turn leaves less than its text: no explanation of a
        later re-read beats a wrong one."""
        if stop_reason is StopReason.ERROR and self.owner is not None:
            self._drop_owner_state()
            self.pool.discard(self.owner)
        if stop_reason in (StopReason.STOPPED, StopReason.ERROR):
            self.kv_text = ""
        else:
            self.kv_text, self.kv_text_had_reasoning = text, had_reasoning

    def reprefill_reason(self, prompt_text: str, template: ChatTemplate | None) -> str:
        """Why a new prompt does not extend what the context holds ("" when it does)."""
        if template is None or not self.kv_text:
            return ""
        divergence = find_divergence(self.kv_text, prompt_text, template,
                                     last_turn_had_reasoning=self.kv_text_had_reasoning)
        return divergence.reason if divergence else ""

    def close(self) -> None:
        """The session closes: the owner's state goes to the pool (and its disk spill)."""
        self.leave()
        self.pool.close()

    def _drop_owner_state(self) -> None:
        if self._owner_state is not None:
            self.pool.release(self._owner_state)
        self._owner_state = None
