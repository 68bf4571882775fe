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
# A reply that reads like an answer, not like a title (issue 39: "The answer to this question
# is Paris"): it opens as answers do, or it is a sentence (a finite "to be" or a first person).
_ANSWER_OPENINGS = re.compile(
    r"^(the answer|answer\b|yes\b|no\b|sure\b|certainly|of course|here\b|here's|there are"
    r"|it is|it's|this is|that is|i\b|i'm|as an ai|hello|hi\b|ok\b|okay)", re.IGNORECASE)
_SENTENCE_VERBS = re.compile(r"\b(is|are|was|were|am|i|i'm|you're|can't|cannot)\b",
                             re.IGNORECASE)
# What a question opens with that a title leaves out: "What is the capital of France?" is titled
# "Capital of France".
_ASKING = re.compile(
    r"^((please|hey|hi|hello|so|ok|okay)[,!]?\s+)*"
    r"((can|could|would|will) you( please)?\s+|please\s+|i (want|need|would like) (you )?to\s+"
    r"|(what|who|which|where|when|why|how)('s| is| are| was| were| do| does| did| can| could"
    r"| should| would)?\s+|(is|are|do|does|did|can|could|should) (there|it|i|we|you)?\s*"
    r"|(i|we|you)\s+|tell me( about)?\s+|explain\s+|describe\s+|give me\s+|write( me)?\s+"
    r"|list\s+)*"
    r"((the|a|an|some)\s+)?", re.IGNORECASE)
TITLE_WORDS = 6
_EDGES = "\"'`*#_“”‘’«» \t"


def title_prompt(question: str, answer: str) -> str:
    """The user message of the title turn."""
    return ("Write a short title, of at most six words, naming what the user asks about in "
            "the conversation below. Do not answer the question: name its topic, as a "
            "heading does (for example \"Capital of France\"). Reply with the title "
            "only.\n\n"
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


def reads_like_an_answer(title: str) -> bool:
    """A title that is a sentence or opens as answers do ("The answer is Paris", "Yes, it
    is"), rather than naming a topic."""
    return bool(_ANSWER_OPENINGS.match(title) or _SENTENCE_VERBS.search(title))


def question_title(question: str) -> str:
    """A title from the question's own words: its first line and sentence, without what asking
    adds ("What is the", "Can you", the question mark), at most TITLE_WORDS words."""
    line = next((ln for ln in question.splitlines() if ln.strip()), "")
    sentence = re.split(r"(?<=[.?!])\s", line.strip(), maxsplit=1)[0]
    words = _ASKING.sub("", sentence).strip(_EDGES + "?.!,;:").split()
    if not words:
        words = sentence.strip(_EDGES + "?.!,;:").split()
    title = " ".join(words[:TITLE_WORDS])
    return clean_title(title[:1].upper() + title[1:])


def title_for(reply: str, question: str) -> str:
    """The conversation's title: the model's, unless it reads like an answer; then the
    question's own words. "" when neither gives one (the placeholder stays)."""
    title = clean_title(reply)
    if title and not reads_like_an_answer(title):
        return title
    return question_title(question)


def placeholder_title(first_message: str) -> str:
    """What a new conversation is called until (or unless) the model names it."""
    return " ".join(first_message.split())[:TITLE_CHARS]


def title_settings() -> TurnSettings:
    """The title turn's own settings, whatever the chat's: greedy (a title is not worth a
    seed), no penalties, no system prompt, no thinking, no speculation (the config tree's
    defaults), TITLE_TOKENS long."""
    return TurnSettings(n_predict=TITLE_TOKENS, think=False)
