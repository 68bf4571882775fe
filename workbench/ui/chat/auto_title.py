"""Automatic conversation titles: the prompt that asks the loaded model for one, and how its
reply becomes a title (Qt-free).

The window asks after a new conversation's first complete answer, in the background, as a
turn of its own outside every conversation (the conversation's KV state steps aside into the
pool meanwhile), a few tokens long, greedy by the session's settings. A Send, or any other
answer, cancels it first: a title is never worth a wait.
"""

from __future__ import annotations

import re

from workbench.engine.turn_settings import TurnSettings

TITLE_TOKENS = 16  # a title is a few words; this also bounds how long it holds the engine
TITLE_CHARS = 60  # as the placeholder title (the first message, cut)
_QUOTED_CHARS = 400  # of the question and the answer shown to the model: enough for a topic

_PREFIX = re.compile(r"^\s*(title|subject|topic)\s*[:\-]\s*", re.IGNORECASE)
_EDGES = "\"'`*#_“”‘’«» \t"


def title_prompt(question: str, answer: str) -> str:
    """The user message of the title turn."""
    return ("Write a short title, of at most six words, for a conversation that starts like "
            "this. Reply with the title only.\n\n"
            f"User: {question.strip()[:_QUOTED_CHARS]}\n"
            f"Assistant: {answer.strip()[:_QUOTED_CHARS]}")


def clean_title(reply: str) -> str:
    """The title in a model's reply: its first non-empty line, without a "Title:" label,
    quotes, Markdown marks or a final full stop, cut at a word to TITLE_CHARS. "" when the
    reply holds nothing usable (the placeholder title then stays)."""
    line = next((ln for ln in reply.splitlines() if ln.strip(_EDGES)), "")
    line = _PREFIX.sub("", line).strip(_EDGES).rstrip(".").strip(_EDGES)
    line = " ".join(line.split())
    if len(line) > TITLE_CHARS:
        cut = line[:TITLE_CHARS].rsplit(" ", 1)[0]
        line = (cut or line[:TITLE_CHARS]).rstrip(",;:-") + "…"
    return line if any(c.isalnum() for c in line) else ""


def placeholder_title(first_message: str) -> str:
    """What a new conversation is called until (or unless) the model names it."""
    return " ".join(first_message.split())[:TITLE_CHARS]


def title_settings() -> TurnSettings:
    """The title turn's own settings, whatever the chat's: greedy (a title is not worth a
    seed), no penalties, no system prompt, no thinking, no speculation (the config tree's
    defaults), TITLE_TOKENS long."""
    return TurnSettings(n_predict=TITLE_TOKENS, think=False)
