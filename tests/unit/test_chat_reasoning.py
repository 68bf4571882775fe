"""The streaming reasoning parser, per format, plus split-invariance as a property."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.engine.chat import formats as F
from workbench.engine.chat.reasoning import (
    ContinueError,
    ReasoningDelta,
    ReasoningParser,
    detect_reasoning_format,
    parser_for_prompt,
    prompt_opens_reasoning,
    reasoning_continuation,
)
from workbench.engine.chat.template import ChatTemplate
from workbench.paths import llama_templates_dir


def stream(
    fmt: F.ReasoningFormat, pieces: list[str], *, start: bool = False
) -> tuple[list[ReasoningDelta], ReasoningDelta]:
    parser = ReasoningParser(fmt, starts_in_reasoning=start)
    events = [e for e in (parser.feed(p) for p in pieces) if e is not None]
    return events, parser.finish()


def chars(text: str) -> list[str]:
    return list(text)


def replay(events: list[ReasoningDelta]) -> tuple[str, str]:
    """What a consumer that appends deltas and replaces on reset ends up showing."""
    reasoning = answer = ""
    for e in events:
        if e.reset:
            reasoning, answer = e.reasoning, e.answer
        else:
            reasoning += e.reasoning_delta
            answer += e.answer_delta
        assert (reasoning, answer) == (e.reasoning, e.answer)
    return reasoning, answer


# One generation per format: (format, text, starts_in_reasoning, reasoning, answer)
CASES = [
    (F.THINK, "<think>\nLet me add.\n</think>\n\n2 + 2 = 4.", False, "Let me add.", "2 + 2 = 4."),
    (F.THINK, "Let me add.\n</think>\n\n4", True, "Let me add.", "4"),
    (F.SEED, "<seed:think>count</seed:think>Four.", False, "count", "Four."),
    (F.MISTRAL, "[THINK]sum it[/THINK]Four.", False, "sum it", "Four."),
    (F.MINIMAX_M3, "<mm:think>hm</mm:think>\nFour.", False, "hm", "Four."),
    (F.APERTUS, "<|inner_prefix|>hm<|inner_suffix|>Four.", False, "hm", "Four."),
    (F.GEMMA4, "<|channel>thought\nUser wants 2+2.<channel|>It is 4.", False, "User wants 2+2.",
     "It is 4."),
    (F.GPT_OSS, "<|channel|>analysis<|message|>Simple sum.<|end|><|start|>assistant"
     "<|channel|>final<|message|>4", False, "Simple sum.", "4"),
    (F.MUSE, " to=self<|message|>sum<|eom|><|start|>assistant to=user<|message|>4", False, "sum",
     "4"),
    (F.KIMI_K3, "sum<|close|>think<|sep|><|open|>response<|sep|>4<|close|>response<|sep|>", True,
     "sum", "4"),
    (F.COHERE, "sum<|END_THINKING|><|START_RESPONSE|>4<|END_RESPONSE|>", True, "sum", "4"),
    (F.SOLAR, "<|think|>sum<|end|><|begin|>assistant<|content|>4", False, "sum", "4"),
    (F.SOLAR, "<|content|>4<|end|>", False, "", "4"),  # thinking off: the prompt closed the span
    (F.APRIEL, "\nsum\n[BEGIN FINAL RESPONSE]\n4\n[END FINAL RESPONSE]", True, "sum", "4"),
    (F.APRIEL_15, "sum\n[BEGIN FINAL RESPONSE]4[END FINAL RESPONSE]", False, "sum", "4"),
    (F.GRANITE, "<think>sum</think><response>4</response>", False, "sum", "4"),
    (F.PLAIN, "<think>not special here</think> 4", False, "", "<think>not special here</think> 4"),
]


@pytest.mark.parametrize(("fmt", "text", "start", "reasoning", "answer"), CASES,
                         ids=[f"{c[0].name}-{i}" for i, c in enumerate(CASES)])
def test_each_format_splits_reasoning_from_answer_token_by_token(
    fmt: F.ReasoningFormat, text: str, start: bool, reasoning: str, answer: str
) -> None:
    events, final = stream(fmt, chars(text), start=start)
    assert (final.reasoning, final.answer) == (reasoning, answer)
    assert replay([*events, final]) == (reasoning, answer)
    assert not any(e.reset for e in events)


@pytest.mark.parametrize("fmt", [f for f in F.ALL_FORMATS if f.opens or f.closes],
                         ids=lambda f: f.name)
def test_markers_split_across_pieces_never_show(fmt: F.ReasoningFormat) -> None:
    markers = [*fmt.opens, *fmt.closes, *fmt.drops]
    text = (fmt.opens[0] if fmt.opens else "") + "R" + fmt.closes[0] + "A"
    events, final = stream(fmt, chars(text), start=fmt.starts_open)
    for e in [*events, final]:
        for m in markers:
            assert m.strip() not in e.reasoning + e.answer
        for shown in (e.reasoning, e.answer):  # nor any partial marker at the visible edge
            assert not any(len(m) > 1 and shown.endswith(m[:2]) for m in markers)
    assert (final.reasoning, final.answer) == ("R", "A")


def test_template_opened_span_without_open_tag_is_reclassified_with_a_reset() -> None:
    pieces = ["Thinking", " about it", "</th", "ink>", "\n\nDone."]
    events, final = stream(F.THINK, pieces)  # caller did not know the prompt opened <think>
    assert events[0].answer == "Thinking"  # shown as answer until the close tag arrives
    resets = [e for e in events if e.reset]
    assert len(resets) == 1
    assert resets[0].reasoning == "Thinking about it" and resets[0].answer == ""
    assert resets[0].reasoning_delta == "" and resets[0].answer_delta == ""
    assert (final.reasoning, final.answer) == ("Thinking about it", "Done.")
    assert replay([*events, final]) == ("Thinking about it", "Done.")


def test_empty_reasoning_block_is_empty_not_blank() -> None:
    parser = ReasoningParser(F.THINK)
    for piece in ["<think>", "\n\n", "</think>", "\n\n", "Hi"]:
        parser.feed(piece)
    final = parser.finish()
    assert final.reasoning == "" and final.answer == "Hi"
    assert parser.saw_reasoning and parser.reasoning_closed  # an empty block, told apart from none
    plain = ReasoningParser(F.THINK)
    plain.feed("Hi")
    plain.finish()
    assert not plain.saw_reasoning and not plain.reasoning_closed


def test_stream_that_stops_inside_reasoning_keeps_it_as_reasoning() -> None:
    parser = ReasoningParser(F.THINK, starts_in_reasoning=True)
    parser.feed("still weighing")
    parser.feed(" options </thi")  # a partial marker at the cut is just text at the end
    final = parser.finish()
    assert final.reasoning == "still weighing options </thi" and final.answer == ""
    assert parser.in_reasoning and not parser.reasoning_closed


def test_model_reasoning_although_thinking_is_off_is_shown_as_reasoning() -> None:
    parser = ReasoningParser(F.THINK)  # thinking off: the prompt did not open a span
    for piece in ["<think>", "I should", " not think", "</think>", "Answer"]:
        parser.feed(piece)
    final = parser.finish()
    assert parser.saw_reasoning
    assert (final.reasoning, final.answer) == ("I should not think", "Answer")


def test_a_tag_in_the_middle_of_an_answer_is_answer_text() -> None:
    _, final = stream(F.THINK, chars("Use <think> tags like <think>x</think>."))
    assert final.reasoning == "" and final.answer == "Use <think> tags like <think>x</think>."
    _, second = stream(F.THINK, chars("<think>r</think>a <think>b</think>"))
    assert (second.reasoning, second.answer) == ("r", "a <think>b</think>")


def test_channel_formats_may_reason_again_after_answering() -> None:
    text = ("<|channel|>analysis<|message|>one<|end|><|start|>assistant<|channel|>final<|message|>"
            "A<|end|><|start|>assistant<|channel|>analysis<|message|> two")
    _, final = stream(F.GPT_OSS, chars(text))
    assert (final.reasoning, final.answer) == ("one two", "A")


def test_feed_returns_none_when_nothing_visible_changed() -> None:
    parser = ReasoningParser(F.THINK)
    assert parser.feed("<thi") is None
    assert parser.feed("nk>") is None
    assert parser.feed("\n") is None
    event = parser.feed("x")
    assert event is not None and event.reasoning_delta == "x"


def test_whitespace_inside_is_kept_but_edges_are_trimmed() -> None:
    _, final = stream(F.THINK, ["<think>", " a", "\n\n", "b ", "</think>", " c\n", "\n", "d\n"])
    assert (final.reasoning, final.answer) == ("a\n\nb", "c\n\nd")


def test_prompt_opens_reasoning_reads_the_last_marker_in_the_prompt() -> None:
    assert prompt_opens_reasoning("<|im_start|>assistant\n<think>\n", F.THINK)
    assert not prompt_opens_reasoning("<think>old</think> x <|im_start|>assistant\n", F.THINK)
    assert not prompt_opens_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n", F.THINK)
    assert not prompt_opens_reasoning("<think>", F.PLAIN)
    assert prompt_opens_reasoning("anything", F.APRIEL_15)


# -- detection from real templates ------------------------------------------------------------

DETECTED = {
    "Qwen-Qwen3-0.6B": "think",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": "think",
    "openai-gpt-oss-120b": "gpt-oss",
    "google-gemma-4-31B-it": "gemma4",
    "LFM2.5-8B-A1B": "think",
    "LFM2-8B-A1B": "plain",
    "ByteDance-Seed-OSS": "seed",
    "mistralai-Ministral-3-14B-Reasoning-2512": "mistral",
    "MiniMax-M3": "minimax-m3",
    "Apertus-8B-Instruct": "apertus",
    "Kimi-K3": "kimi-k3",
    "Cohere2MoE": "cohere",
    "upstage-Solar-Open-100B": "solar",
    "Apriel-1.6-15b-Thinker-fixed": "apriel",
    "unsloth-Apriel-1.5": "apriel-1.5",
    "tencent-Hy3": "hy3",
    "muse-glimmer": "muse-glimmer",
    "ibm-granite-granite-3.3-2B-Instruct": "think+response",
    "meta-llama-Llama-3.1-8B-Instruct": "plain",
}


@pytest.mark.parametrize(("name", "expected"), sorted(DETECTED.items()))
def test_detects_the_format_of_real_templates(name: str, expected: str) -> None:
    path = llama_templates_dir() / f"{name}.jinja"
    assert path.is_file(), f"{path} is missing: run set-up (python -m workbench.setup_env)"
    template = ChatTemplate(path.read_text(encoding="utf-8"), "", "")
    assert detect_reasoning_format(template).name == expected


def test_no_template_means_plain_text() -> None:
    fmt = detect_reasoning_format(None)
    assert not fmt.handles_reasoning
    _, final = stream(fmt, ["</think>", "x"])
    assert final.answer == "</think>x"


def test_hy3_markers_carry_the_templates_suffix() -> None:
    fmt = detect_reasoning_format(
        ChatTemplate("{%- set HYTK = ':x' %}{{ '<think{}>'.format(HYTK) }}", "", "")
    )
    assert fmt.opens == ("<think:x>",) and fmt.closes == ("</think:x>",)


# -- property: the split never matters -----------------------------------------------------------

_WORDS = ["Let", " me", " think", "\n", "\n\n", " ", "<", ">", "|", "4", "answer", "</", "[",
          "]", ":", "é", "t", "h", "i", "n", "k"]


@st.composite
def generations(draw: st.DrawFn) -> tuple[F.ReasoningFormat, bool, str, list[int]]:
    fmt = draw(st.sampled_from([f for f in F.ALL_FORMATS]))
    markers = [*fmt.opens, *fmt.closes, *fmt.drops] or ["<think>"]
    parts = draw(st.lists(st.one_of(st.sampled_from(markers), st.sampled_from(_WORDS)),
                          max_size=30))
    text = "".join(parts)
    cuts = draw(st.lists(st.integers(min_value=0, max_value=len(text)), max_size=12))
    return fmt, draw(st.booleans()), text, sorted(set(cuts))


@settings(max_examples=300, deadline=None)
@given(generations())
def test_any_split_gives_the_same_final_reasoning_and_answer(
    case: tuple[F.ReasoningFormat, bool, str, list[int]],
) -> None:
    fmt, start, text, cuts = case
    _, whole = stream(fmt, [text], start=start)
    bounds = [0, *cuts, len(text)]
    pieces = [text[a:b] for a, b in itertools.pairwise(bounds)]
    events, split = stream(fmt, pieces, start=start)
    assert (split.reasoning, split.answer) == (whole.reasoning, whole.answer)
    # and what a consumer shows after replaying the events equals the final split
    assert replay([*events, split]) == (whole.reasoning, whole.answer)


def test_parser_for_prompt_starts_inside_a_span_the_prompt_opened() -> None:
    r1 = ChatTemplate(
        (llama_templates_dir() / "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja").read_text(
            encoding="utf-8"
        ),
        "<BOS>",
        "<EOS>",
    )
    fmt = detect_reasoning_format(r1)
    on = parser_for_prompt(fmt, r1.render([{"role": "user", "content": "hi"}]))
    on.feed("The user greets me")  # cut short (n_predict) before </think>
    assert on.finish().reasoning == "The user greets me"
    off_prompt = r1.render([{"role": "user", "content": "hi"}], enable_thinking=False)
    off = parser_for_prompt(fmt, off_prompt)
    off.feed("Hello!")
    assert (off.finish().answer, off.in_reasoning) == ("Hello!", False)


@pytest.mark.parametrize("fmt", [f for f in F.ALL_FORMATS if not f.reentrant],
                         ids=lambda f: f.name)
@pytest.mark.parametrize("answer", ["", "Red, green and blue."])
def test_a_continued_reasoning_answer_parses_back_to_what_was_stored(
    fmt: F.ReasoningFormat, answer: str
) -> None:
    reasoning = "The user asks for colours.\n\nThree will do."
    for opened in (False, True):
        if not opened and not fmt.opens:
            continue  # only a prompt can open this format's span (Apriel 1.5 starts open)
        pieces = reasoning_continuation(fmt, reasoning, answer, opened=opened)
        parser = ReasoningParser(fmt, starts_in_reasoning=opened)
        for text, _ in pieces:
            parser.feed(text)
        # Fed the rebuilt stream, the parser is where the cut left it: still in the reasoning
        # when there was no answer text, else in the answer.
        assert parser.in_reasoning == (answer == "")
        end = parser.finish()
        assert (end.reasoning, end.answer) == (reasoning, answer)
        assert [t for t, marker in pieces if marker] == (
            ([] if opened else [fmt.opens[0]]) + ([fmt.closes[0]] if answer else []))


@pytest.mark.parametrize("fmt", [f for f in F.ALL_FORMATS if f.reentrant] + [F.PLAIN],
                         ids=lambda f: f.name)
def test_reasoning_that_cannot_be_rebuilt_is_refused(fmt: F.ReasoningFormat) -> None:
    with pytest.raises(ContinueError):
        reasoning_continuation(fmt, "Thinking.", "Hi.", opened=False)


def test_an_untrimmed_parser_keeps_a_raw_continuation_character_for_character() -> None:
    # Raw text (no chat template, /v1/completions) continues the prompt: its leading space and
    # final newline are part of the answer, where a chat answer is shown trimmed.
    pieces = [" ", "yes", ".", "\n", "\n"]
    raw = ReasoningParser(detect_reasoning_format(None), trim=False)
    chat = ReasoningParser(detect_reasoning_format(None))
    for piece in pieces:
        raw.feed(piece)
        chat.feed(piece)
    assert raw.finish().answer == " yes.\n\n"
    assert chat.finish().answer == "yes."


@settings(max_examples=300, deadline=None)
@given(generations())
def test_pieces_that_cannot_touch_a_marker_give_the_events_the_general_path_gives(
    case: tuple[F.ReasoningFormat, bool, str, list[int]],
) -> None:
    """The parser's shortcut for plain pieces (issue 38) is an optimisation only: the same
    events, one by one, as a parser made to take its general path for every piece."""
    fmt, start, text, cuts = case
    bounds = [0, *cuts, len(text)]
    pieces = [text[a:b] for a, b in itertools.pairwise(bounds)]
    fast = ReasoningParser(fmt, starts_in_reasoning=start)
    general = ReasoningParser(fmt, starts_in_reasoning=start)
    general._marker_starts = frozenset(text) | {" "}  # every piece meets one: no shortcut
    assert [fast.feed(p) for p in pieces] == [general.feed(p) for p in pieces]
    assert fast.finish() == general.finish()
