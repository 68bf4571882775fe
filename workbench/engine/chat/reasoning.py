"""Split a generated stream, incrementally, into reasoning and answer.

The parser is a two-state machine (reasoning / answer) driven by literal markers. Text that could
still be the beginning of a marker is held back until the next piece decides, so a marker split
across tokens never shows on either side. Both sides are shown trimmed (leading and trailing
whitespace held back), which makes ``<think>\\n\\n</think>`` an empty reasoning block rather than
a blank one (a raw-text continuation's answer is kept untrimmed: ``trim=False``). The final
split depends only on the concatenated text, never on how it was cut.
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.engine.chat.formats import ReasoningFormat, detect_reasoning_format

__all__ = [
    "ContinueError",
    "ReasoningDelta",
    "ReasoningFormat",
    "ReasoningParser",
    "detect_reasoning_format",
    "parser_for_prompt",
    "prompt_opens_reasoning",
    "reasoning_continuation",
]

# The layout the common tag formats' templates render a reasoning block in (R1, Qwen3, ...:
# "<think>\n" reasoning "\n</think>\n\n" answer). The parser trims it away, so the split never
# depends on it; it only decides how close the rebuilt text comes to what the model wrote.
_AFTER_OPEN, _BEFORE_CLOSE, _AFTER_CLOSE = "\n", "\n", "\n\n"


@dataclass(frozen=True)
class ReasoningDelta:
    reasoning: str  # full reasoning so far
    answer: str  # full answer so far
    reasoning_delta: str  # appended since the last event (empty on reset)
    answer_delta: str
    reset: bool  # earlier text was reclassified: consumers REPLACE with the snapshots


class _Side:
    """One side's raw text and its visible view (trimmed, unless `trim` is off), grown by appends
    only."""

    def __init__(self, *, trim: bool = True) -> None:
        self.raw = ""
        self.visible = ""
        self._held_ws = ""  # whitespace after the last visible character, shown only if followed
        self._trim = trim

    def append(self, text: str) -> None:
        if not text:
            return
        self.raw += text
        if not self._trim:
            self.visible += text
            return
        body = text.rstrip()
        if not body:
            if self.visible:
                self._held_ws += text
            return
        if not self.visible:
            body = body.lstrip()
            self._held_ws = ""
        self.visible += self._held_ws + body
        self._held_ws = text[len(text.rstrip()) :]

    def replace(self, raw: str) -> None:
        self.raw = ""
        self.visible = ""
        self._held_ws = ""
        self.append(raw)


def prompt_opens_reasoning(prompt: str, fmt: ReasoningFormat) -> bool:
    """True when the rendered prompt leaves a reasoning span open (e.g. ends with "<think>\\n"),
    so the model's first token is already reasoning."""
    if fmt.starts_open:
        return True
    last_open = max((prompt.rfind(m) for m in fmt.opens), default=-1)
    if last_open < 0:
        return False
    last_close = max((prompt.rfind(m) for m in fmt.closes), default=-1)
    return last_open > last_close


def parser_for_prompt(fmt: ReasoningFormat, prompt: str) -> ReasoningParser:
    """A parser for the generation that follows ``prompt`` (the full text fed to the model,
    prefill included): it starts inside reasoning when the prompt left a span open, so a turn cut
    short while reasoning is kept as reasoning rather than shown as the answer."""
    return ReasoningParser(fmt, starts_in_reasoning=prompt_opens_reasoning(prompt, fmt))


class ContinueError(ValueError):
    """An answer's reasoning cannot be rebuilt as the model would have written it."""


def reasoning_continuation(fmt: ReasoningFormat, reasoning: str, answer: str, *,
                           opened: bool) -> list[tuple[str, bool]]:
    """The text a reasoning answer so far stands for, to generate on from its end: (text,
    is_marker) pieces. `opened`: the prompt already left the span open (no open marker then).

    The store keeps the parsed reasoning and answer, not the raw stream, so the stream is
    rebuilt from the format's markers: one reasoning block, then (when there is answer text)
    the close marker and the answer. An empty answer means the cut came inside the reasoning,
    which goes on; a model that had already closed it simply closes it again. Re-entrant
    channel formats are refused: their turn may switch channels several times, with framing
    between the switches, and the stored text no longer says where."""
    if fmt.reentrant:
        raise ContinueError(f"an answer with reasoning in the {fmt.name} format cannot be "
                            "continued (its reasoning may come in several parts, and which "
                            "part came where is not kept)")
    if not fmt.handles_reasoning or not fmt.closes or not (opened or fmt.opens):
        raise ContinueError("this model's template has no reasoning markers to continue a "
                            "reasoning block with")
    pieces: list[tuple[str, bool]] = []
    if not opened:
        pieces += [(fmt.opens[0], True), (_AFTER_OPEN, False)]
    pieces.append((reasoning, False))
    if answer:
        pieces += [(_BEFORE_CLOSE, False), (fmt.closes[0], True), (_AFTER_CLOSE, False),
                   (answer, False)]
    return pieces


class ReasoningParser:
    def __init__(self, fmt: ReasoningFormat, *, starts_in_reasoning: bool = False,
                 trim: bool = True) -> None:
        """`trim` off keeps the answer exactly as generated: a raw-text continuation (no chat
        template, `/v1/completions`) is the prompt's next characters, whose leading space or
        final newline is part of the text (" yes." must not come back as "yes.")."""
        self.fmt = fmt
        self._in_reasoning = (starts_in_reasoning or fmt.starts_open) and fmt.handles_reasoning
        self._reasoning = _Side()
        self._answer = _Side(trim=trim)
        self._pending = ""  # tail that may still become a marker
        self._opened = self._in_reasoning  # a reasoning span has been entered
        self._closed = False  # a reasoning span has been left
        self._literal_open = False  # an open tag was shown as answer text (a close pairs with it)
        self._markers = sorted(
            {m for m in (*fmt.opens, *fmt.closes, *fmt.drops) if m}, key=len, reverse=True
        )
        # A piece with none of these characters can neither hold a marker nor end in the
        # start of one (both begin with a marker's first character).
        self._marker_starts = frozenset(m[0] for m in self._markers)

    @property
    def in_reasoning(self) -> bool:
        return self._in_reasoning

    @property
    def saw_reasoning(self) -> bool:
        """The stream entered reasoning (useful to flag a model that reasons with thinking off)."""
        return self._opened

    @property
    def reasoning_closed(self) -> bool:
        """A reasoning span was closed: with empty reasoning that is an empty thought block, and
        ``saw_reasoning and not reasoning_closed`` after finish() is a turn cut short in it."""
        return self._closed

    # -- public API ---------------------------------------------------------------------------

    def feed(self, piece: str) -> ReasoningDelta | None:
        if not self._pending and self._marker_starts.isdisjoint(piece):
            return self._plain(piece)
        before = (self._reasoning.visible, self._answer.visible)
        reset = self._consume(self._pending + piece, final=False)
        return self._event(before, reset)

    def finish(self) -> ReasoningDelta:
        before = (self._reasoning.visible, self._answer.visible)
        reset = self._consume(self._pending, final=True)
        event = self._event(before, reset)
        if event is not None:
            return event
        return ReasoningDelta(self._reasoning.visible, self._answer.visible, "", "", False)

    # -- machinery ----------------------------------------------------------------------------

    def _plain(self, piece: str) -> ReasoningDelta | None:
        """`feed` for a piece that cannot touch a marker, nothing held back: most tokens. The
        same event as the general path, without its search and its whole-text comparisons
        (issue 38: the parser was a sixth of what the decode loop added per token). Sides
        only grow, so what is new is what lies past the old length."""
        in_reasoning = self._in_reasoning
        side = self._reasoning if in_reasoning else self._answer
        shown = len(side.visible)
        side.append(piece)
        if len(side.visible) == shown:
            return None
        delta = side.visible[shown:]
        return ReasoningDelta(self._reasoning.visible, self._answer.visible,
                              delta if in_reasoning else "", "" if in_reasoning else delta,
                              False)

    def _event(self, before: tuple[str, str], reset: bool) -> ReasoningDelta | None:
        reasoning, answer = self._reasoning.visible, self._answer.visible
        if not reset and (reasoning, answer) == before:
            return None
        if reset or not reasoning.startswith(before[0]) or not answer.startswith(before[1]):
            return ReasoningDelta(reasoning, answer, "", "", True)
        return ReasoningDelta(
            reasoning, answer, reasoning[len(before[0]) :], answer[len(before[1]) :], False
        )

    def _consume(self, buf: str, *, final: bool) -> bool:
        reset = False
        self._pending = ""
        while buf:
            pos, marker = self._find_marker(buf)
            if marker is None:
                keep = 0 if final else self._partial_marker_len(buf)
                self._emit(buf[: len(buf) - keep])
                self._pending = buf[len(buf) - keep :]
                break
            if not final and self._longer_marker_pending(buf[pos:], marker):
                self._emit(buf[:pos])
                self._pending = buf[pos:]
                break
            self._emit(buf[:pos])
            buf = buf[pos + len(marker) :]
            reset = self._apply(marker) or reset
        return reset

    def _find_marker(self, buf: str) -> tuple[int, str | None]:
        best_pos, best = -1, None
        for marker in self._markers:  # longest first, so ties go to the longer marker
            pos = buf.find(marker)
            if pos >= 0 and (best is None or pos < best_pos):
                best_pos, best = pos, marker
        return best_pos, best

    def _longer_marker_pending(self, tail: str, marker: str) -> bool:
        """A longer marker that starts with this one may still complete (wait and see)."""
        return any(
            len(m) > len(tail) and m.startswith(tail) for m in self._markers if m != marker
        )

    def _partial_marker_len(self, buf: str) -> int:
        """Length of the longest suffix of buf that is a proper prefix of some marker."""
        longest = 0
        for marker in self._markers:
            for n in range(min(len(marker) - 1, len(buf)), longest, -1):
                if buf.endswith(marker[:n]):
                    longest = n
                    break
        return longest

    def _emit(self, text: str) -> None:
        (self._reasoning if self._in_reasoning else self._answer).append(text)

    def _literal(self, marker: str) -> None:
        self._emit(marker)

    def _apply(self, marker: str) -> bool:
        """Act on one marker; returns True when earlier text was reclassified."""
        fmt = self.fmt
        if marker in fmt.opens:
            if self._in_reasoning:
                return False  # a template-opened span re-opened by the model: just framing
            if fmt.reentrant or (not self._closed and not self._answer.visible):
                self._in_reasoning = True
                self._opened = True
            else:
                self._literal(marker)  # the answer talks about the tag; keep it as text
                self._literal_open = True
            return False
        if marker in fmt.closes:
            if self._in_reasoning:
                self._in_reasoning = False
                self._closed = True
                return False
            if fmt.reentrant or self._closed or self._opened or self._literal_open:
                if not fmt.reentrant and marker not in fmt.drops:
                    self._literal(marker)
                return False
            self._closed = True
            moved = self._answer.raw
            if not moved.strip():
                return False  # an answer header before any text: nothing was reasoning
            # A close after answer text but no open: the prompt opened the span without the
            # parser knowing, so everything shown as answer so far was reasoning. Move it across
            # and say so.
            self._answer.replace("")
            self._reasoning.replace(self._reasoning.raw + moved)
            self._opened = True
            return True
        return False  # a framing marker (drops): removed from both sides
