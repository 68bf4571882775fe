"""The token view (issue 36): each answer token's probability and its likeliest alternatives,
read beside its cost in the plots' readout (a plot hovered, or a token of the chat's Tokens
view hovered or clicked). Qt-free.

Off by default, and then it costs nothing: the request carries no `Decoding`, so the turn picks
its tokens as any other (in C, speculation allowed) and no log-probability is computed. On (the
`token_alternatives` setting, a conversation's own), the turn runs on the engine's picker
(engine/constrain.py), which computes each token's `TokenChoice` from the distribution it was
drawn from, exactly as the server's `top_logprobs`; the choice travels with the token's
`TokenEvent` and the plots keep it by token (QtTelemetryPanel.choices). The price, said in the
setting's help: the pick runs in Python (numpy over the vocabulary), and speculative decoding is
off for the answer (the summary's `spec` reads `off: logprobs`). Choices are not stored: a
reopened conversation shows its tokens' costs, not their alternatives.
"""

from __future__ import annotations

from workbench.config import Config
from workbench.engine.constrain import Decoding


def decoding(config: Config) -> Decoding | None:
    """What a chat turn asks the engine for: None (nothing) while the token view is off."""
    n = config.token_alternatives
    return Decoding(logprobs=n) if n > 0 else None
