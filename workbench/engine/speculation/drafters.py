"""The two draft sources: the context itself (prompt lookup) and a small draft model.

A drafter proposes up to n tokens to follow `context` (the KV's tokens and the token about to be
decoded). It is a guess, never trusted: the target model verifies every drafted token, so a bad
draft costs time, never correctness.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from workbench.backend import llama
from workbench.engine.kv_memory import common_prefix
from workbench.engine.speculation.ngram import MIN_MATCH, ngram_draft


class DraftModelError(ValueError):
    """The draft model cannot draft for this model; the message says why and what to do."""


class Drafter(Protocol):
    kind: str  # "ngram" or "draft"

    def draft(self, context: list[int], n: int) -> list[int]: ...

    def close(self) -> None: ...


class NgramDrafter:
    """Prompt lookup: no second model, drafts only where the context repeats itself."""

    kind = "ngram"

    def __init__(self, min_match: int = MIN_MATCH) -> None:
        self.min_match = min_match

    def draft(self, context: list[int], n: int) -> list[int]:
        return ngram_draft(context, n, min_match=self.min_match)

    def close(self) -> None:
        pass


def vocab_mismatch(target: llama.Model, draft: llama.Model) -> str:
    """Why `draft` cannot draft for `target` ("" when their vocabularies are the same)."""
    if draft.n_vocab != target.n_vocab:
        return (f"its vocabulary has {draft.n_vocab} tokens and {target.path.name}'s has "
                f"{target.n_vocab}")
    for i, (a, b) in enumerate(zip(target.vocab_texts(), draft.vocab_texts(), strict=True)):
        if a != b:
            return (f"token {i} is {b.decode('utf-8', 'replace')!r} in it and "
                    f"{a.decode('utf-8', 'replace')!r} in {target.path.name}")
    return ""


class ModelDrafter:
    """A small model with the target's vocabulary drafts greedily on a context of its own.

    Its KV memory follows the target's by common prefix: each call removes what the target
    rejected and decodes what the target accepted since (its own last draft token is never
    decoded until the target keeps it)."""

    kind = "draft"

    def __init__(self, path: Path, target: llama.Model, *, n_ctx: int, n_threads: int) -> None:
        try:
            self.model = llama.Model(path, llama.ModelParams())
        except llama.LlamaError as exc:
            raise DraftModelError(f"the draft model {path} could not be loaded: {exc}") from exc
        why = vocab_mismatch(target, self.model)
        if why:
            self.model.close()
            raise DraftModelError(
                f"the draft model {path.name} does not share {target.path.name}'s vocabulary "
                f"({why}), so its tokens would mean other text. Choose a draft model of the same "
                "family and tokenizer, or use n-gram drafting (--spec ngram), which needs none")
        n_batch = min(512, n_ctx)
        try:
            self.ctx = llama.Context(self.model, llama.ContextParams(
                n_ctx=n_ctx, n_batch=n_batch, n_ubatch=n_batch, n_threads=n_threads))
        except llama.LlamaError as exc:
            self.model.close()
            raise DraftModelError(f"the draft model's context could not be made: {exc}") from exc
        self.path = path
        self.tokens: list[int] = []  # exactly what the draft context's memory holds

    def draft(self, context: list[int], n: int) -> list[int]:
        ctx = self.ctx
        keep = common_prefix(self.tokens, context)
        if keep < len(self.tokens):
            if not ctx.seq_rm(keep, -1):
                ctx.clear()
                keep = 0
            del self.tokens[keep:]
        pos = keep
        while pos < len(context):
            chunk = context[pos: pos + ctx.n_batch]
            if ctx.decode(chunk) != 0:
                return self._reset()
            self.tokens.extend(chunk)
            pos += len(chunk)
        out: list[int] = []
        for j in range(n):
            tok = ctx.argmax()
            if self.model.is_eog(tok):
                break
            out.append(tok)
            if j + 1 < n:
                if ctx.decode_one(tok) != 0:
                    self._reset()
                    break
                self.tokens.append(tok)
        return out

    def _reset(self) -> list[int]:
        self.ctx.clear()
        self.tokens.clear()
        return []

    def close(self) -> None:
        self.ctx.close()
        self.model.close()
