"""A session's sampling chain, keyed by the sampling settings of the turn that uses it.

Each request carries its own settings (engine/turn_settings.py), and a request is a value: the
same request on the same conversation gives the same reply. So every turn starts its chain
afresh from its seed (a fixed seed replays; -1 draws a new random one each turn) and its
penalties from the turn's own tokens. The chain is kept while the sampling settings stay the
same (a reset is cheaper than a rebuild) and built anew when a turn asks for others (a server
request, a title, a conversation's own). Greedy without penalties is no chain at all: a bare
argmax, byte-identical to before.
"""

from __future__ import annotations

from collections.abc import Sequence

from workbench.backend import llama
from workbench.engine.turn_settings import TurnSettings


class SamplerChain:
    """The chain for the current turn's sampling settings (None: greedy argmax)."""

    def __init__(self, n_vocab: int) -> None:
        self._n_vocab = n_vocab
        self.current: llama.Sampler | None = None
        self._key: tuple[object, ...] | None = None  # the settings `current` was built for

    def for_turn(self, cfg: TurnSettings, continued: Sequence[int] = ()) -> llama.Sampler | None:
        """The chain for a turn run with `cfg`, at the start of its seed sequence. A turn that
        continues an answer passes that answer's tokens: its penalties see them, as they did
        while it was generated (without them a continued story repeats its first half)."""
        if cfg.sampling != self._key:
            self._build(cfg)
        else:
            self.reset()
        if self.current is not None and continued:
            self.current.accept([t for t in continued if t >= 0])
        return self.current

    def reset(self) -> None:
        """The chain restarts its seed sequence and forgets the tokens it penalises."""
        if self.current is not None:
            self.current.reset()

    def close(self) -> None:
        if self.current is not None:
            self.current.close()
        self.current, self._key = None, None

    def _build(self, cfg: TurnSettings) -> None:
        self.close()
        self._key = cfg.sampling
        penalties = llama.Penalties(last_n=cfg.repeat_last_n, repeat=cfg.repeat_penalty,
                                    presence=cfg.presence_penalty,
                                    frequency=cfg.frequency_penalty)
        if cfg.temp > 0 or penalties.active:
            self.current = llama.Sampler(
                temp=cfg.temp, top_k=cfg.top_k, top_p=cfg.top_p, seed=cfg.seed,
                min_p=cfg.min_p, penalties=penalties, n_vocab=self._n_vocab)
