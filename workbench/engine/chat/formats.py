"""Reasoning formats: the literal markers each template family uses, and detection from a template.

Facts about the tags come from the templates themselves (llama.cpp's models/templates/ corpus);
each format is data, read by the one generic parser in reasoning.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from workbench.engine.chat.template import ChatTemplate


@dataclass(frozen=True)
class ReasoningFormat:
    """Markers that switch the stream between reasoning and answer.

    opens: enter reasoning. closes: leave it (the answer follows). drops: framing tokens removed
    from both sides (headers, end-of-message markers). reentrant: the model may switch back and
    forth (channel formats); otherwise one reasoning block at the very start is recognised and a
    later tag is ordinary answer text. starts_open: the model begins inside reasoning without
    printing an open marker, whatever the prompt looks like (Apriel 1.5)."""

    name: str
    opens: tuple[str, ...] = ()
    closes: tuple[str, ...] = ()
    drops: tuple[str, ...] = ()
    reentrant: bool = False
    starts_open: bool = False

    @property
    def handles_reasoning(self) -> bool:
        """False for plain text: everything is passed to the answer."""
        return bool(self.opens or self.closes or self.starts_open)


PLAIN = ReasoningFormat("plain")
THINK = ReasoningFormat("think", ("<think>",), ("</think>",))
GRANITE = ReasoningFormat(
    "think+response", ("<think>",), ("</think>",), ("<response>", "</response>")
)
SEED = ReasoningFormat("seed", ("<seed:think>",), ("</seed:think>",))
MISTRAL = ReasoningFormat("mistral", ("[THINK]",), ("[/THINK]",))
MINIMAX_M3 = ReasoningFormat("minimax-m3", ("<mm:think>",), ("</mm:think>",))
APERTUS = ReasoningFormat("apertus", ("<|inner_prefix|>",), ("<|inner_suffix|>",))
GEMMA4 = ReasoningFormat("gemma4", ("<|channel>thought",), ("<channel|>",))
GPT_OSS = ReasoningFormat(
    "gpt-oss",
    ("<|channel|>analysis<|message|>",),
    ("<|channel|>final<|message|>", "<|channel|>commentary<|message|>"),
    ("<|start|>assistant", "<|end|>", "<|return|>"),
    reentrant=True,
)
MUSE = ReasoningFormat(
    "muse-glimmer",
    (" to=self<|message|>", "to=self<|message|>"),
    (" to=user<|message|>", "to=user<|message|>"),
    ("<|start|>assistant", "<|eom|>", "<|eot|>"),
    reentrant=True,
)
KIMI_K3 = ReasoningFormat(
    "kimi-k3",
    ("<|open|>think<|sep|>",),
    ("<|close|>think<|sep|>",),
    ("<|open|>response<|sep|>", "<|close|>response<|sep|>", "<|close|>message<|sep|>"),
)
COHERE = ReasoningFormat(
    "cohere",
    ("<|START_THINKING|>",),
    ("<|END_THINKING|>",),
    ("<|START_RESPONSE|>", "<|END_RESPONSE|>", "<|START_TEXT|>", "<|END_TEXT|>"),
)
# "<|content|>" is Solar's answer header: it closes reasoning, and after that it is framing.
SOLAR = ReasoningFormat(
    "solar",
    ("<|think|>",),
    ("<|end|>", "<|content|>"),
    ("<|begin|>assistant", "<|content|>", "<|end|>"),
)
# Apriel 1.6's generation prompt ends with the reasoning preamble; 1.5 starts reasoning unmarked.
APRIEL = ReasoningFormat(
    "apriel",
    ("Here are my reasoning steps:",),
    ("[BEGIN FINAL RESPONSE]",),
    ("[END FINAL RESPONSE]", "<|end|>"),
)
APRIEL_15 = ReasoningFormat(
    "apriel-1.5",
    (),
    ("[BEGIN FINAL RESPONSE]",),
    ("[END FINAL RESPONSE]", "<|end|>"),
    starts_open=True,
)

_HY3_TOKEN = re.compile(r"set\s+HYTK\s*=\s*'([^']*)'")


def _hy3(source: str) -> ReasoningFormat | None:
    match = _HY3_TOKEN.search(source)
    if not match or "'<think{}>'.format(HYTK)" not in source:
        return None
    suffix = match.group(1)
    return ReasoningFormat("hy3", (f"<think{suffix}>",), (f"</think{suffix}>",))


def detect_reasoning_format(template: ChatTemplate | None) -> ReasoningFormat:
    """The format a model using this template reasons in; PLAIN when it shows no reasoning markers
    (plain text passes entirely to the answer). Most specific families are checked first because
    several of them also contain a literal "<think>"."""
    if template is None:
        return PLAIN
    src = template.source
    if "<|channel|>" in src:
        return GPT_OSS
    if "to=self<|message|>" in src:
        return MUSE
    if "<|channel>thought" in src:
        return GEMMA4
    if "<|open|>" in src and "<|close|>" in src:
        return KIMI_K3
    hy3 = _hy3(src)
    if hy3 is not None:
        return hy3
    for fmt in (SEED, MISTRAL, MINIMAX_M3, APERTUS, COHERE):
        if fmt.opens[0] in src:
            return fmt
    if "[BEGIN FINAL RESPONSE]" in src:
        return APRIEL if "Here are my reasoning steps:" in src else APRIEL_15
    if "<|think|>" in src and "<|begin|>assistant" in src:
        return SOLAR
    if "<think>" in src or "</think>" in src:
        return GRANITE if "<response>" in src and "<|start_of_role|>" in src else THINK
    return PLAIN


ALL_FORMATS: tuple[ReasoningFormat, ...] = (
    THINK, GRANITE, SEED, MISTRAL, MINIMAX_M3, APERTUS, GEMMA4, GPT_OSS, MUSE, KIMI_K3, COHERE,
    SOLAR, APRIEL, APRIEL_15,
)  # fmt: skip
