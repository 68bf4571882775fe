"""Continue: an answer cut short by the token limit or by Stop generates on from its end."""

from __future__ import annotations

from workbench.engine.requests import GenerateRequest, StopReason, TokenEvent

Q = "Name three colours of the rainbow."
EXACT = {"n_ubatch": 1}  # see test_session.py: batch-invariant logits, so texts compare exactly


def test_continue_after_the_token_limit_reuses_the_kv_and_matches_one_long_answer(
    embedded_model_path, open_session
):
    whole = open_session(model=str(embedded_model_path), n_predict=24, **EXACT).generate(
        GenerateRequest(text=Q))
    s = open_session(model=str(embedded_model_path), n_predict=10, **EXACT)
    cut = s.generate(GenerateRequest(text=Q))
    assert cut.stop_reason is StopReason.LENGTH and cut.text
    held = len(s.kv_tokens)
    # The window sends the turns before the question (none here), as for any answer.
    more = s.generate(GenerateRequest(text=Q, continue_from=cut.text, n_predict=14))
    assert more.ok and more.text.startswith(cut.text)
    assert more.text == whole.text  # greedy: the same answer as if it had never stopped
    assert more.summary.n_reused >= held - 1  # the cut answer came from the KV memory
    assert more.summary.n_prompt <= 2
    assert more.history[-1]["content"] == more.text  # the history holds the whole answer


def test_continue_after_stop_appends_and_streams_only_the_new_part(
    embedded_model_path, open_session
):
    s = open_session(model=str(embedded_model_path), n_predict=24, **EXACT)

    def stop_at_fifth(event: TokenEvent) -> None:
        if event.metrics.step == 5:
            s.cancel()

    stopped = s.generate(GenerateRequest(text=Q), on_token=stop_at_fifth)
    assert stopped.stop_reason is StopReason.STOPPED and stopped.text
    deltas: list[str] = []
    more = s.generate(GenerateRequest(text=Q, continue_from=stopped.text, n_predict=19),
                      on_token=lambda e: deltas.append(e.answer_delta))
    assert more.ok and more.text.startswith(stopped.text) and len(more.text) > len(stopped.text)
    assert stopped.text + "".join(deltas) == more.text  # the events carry only what is new
    whole = open_session(model=str(embedded_model_path), n_predict=24, **EXACT).generate(
        GenerateRequest(text=Q))
    assert more.text == whole.text


def test_a_continue_that_does_not_fit_is_refused_and_changes_nothing(
    embedded_model_path, open_session
):
    s = open_session(model=str(embedded_model_path), n_ctx=128, n_predict=16)
    result = s.generate(GenerateRequest(text=Q, continue_from="red, green and blue. " * 100))
    assert result.stop_reason is StopReason.REJECTED and "context" in result.error
    assert result.history == ()


R1 = "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"  # its prompt opens <think>


def _reasoning_session(open_session, model, n_predict: int, template: str = R1):
    from workbench.paths import llama_templates_dir

    return open_session(model=str(model), n_predict=n_predict,
                        chat_template_file=str(llama_templates_dir() / template), **EXACT)


def _close_reasoning_at(session, first_pick: int) -> None:
    """From the `first_pick`-th token on, the model writes "</think>" (the base model never
    would), then goes on greedily: its answer follows the reasoning."""
    assert session._p.model is not None
    forced = session._p.model.tokenize("\n</think>\n\n", add_special=False, parse_special=True)
    real, picks = session._pick_token, [0]

    def pick() -> int:
        picks[0] += 1
        at = picks[0] - first_pick
        return forced[at] if 0 <= at < len(forced) else real()

    session._pick_token = pick


def test_continue_inside_reasoning_goes_on_in_the_reasoning_block(
    embedded_model_path, open_session
):
    whole = _reasoning_session(open_session, embedded_model_path, 24).generate(
        GenerateRequest(text=Q))
    s = _reasoning_session(open_session, embedded_model_path, 10)
    cut = s.generate(GenerateRequest(text=Q))
    assert cut.stop_reason is StopReason.LENGTH and cut.reasoning and cut.text == ""
    events: list[TokenEvent] = []
    more = s.generate(GenerateRequest(text=Q, continue_reasoning=cut.reasoning, n_predict=14),
                      on_token=events.append)
    assert more.ok and more.text == ""  # nothing leaked into the answer
    assert more.reasoning.startswith(cut.reasoning) and len(more.reasoning) > len(cut.reasoning)
    assert cut.reasoning + "".join(e.reasoning_delta for e in events) == more.reasoning
    assert more.reasoning == whole.reasoning  # greedy: as if it had never stopped
    assert more.summary.n_prompt <= 2  # the R1 prompt opened the span: the KV held it all


def test_continue_after_the_reasoning_goes_on_in_the_answer(embedded_model_path, open_session):
    one = _reasoning_session(open_session, embedded_model_path, 20)
    _close_reasoning_at(one, 4)
    whole = one.generate(GenerateRequest(text=Q))
    s = _reasoning_session(open_session, embedded_model_path, 12)
    _close_reasoning_at(s, 4)
    cut = s.generate(GenerateRequest(text=Q))
    assert cut.stop_reason is StopReason.LENGTH and cut.reasoning and cut.text
    events: list[TokenEvent] = []
    more = s.generate(GenerateRequest(text=Q, continue_from=cut.text,
                                      continue_reasoning=cut.reasoning, n_predict=8),
                      on_token=events.append)
    assert more.ok and more.reasoning == cut.reasoning  # the closed block stays as it was
    assert more.text.startswith(cut.text) and len(more.text) > len(cut.text)
    assert all(e.reasoning_delta == "" for e in events)
    # The rebuilt stream is the one the model wrote: greedy, the same turn as uninterrupted.
    assert (more.reasoning, more.text) == (whole.reasoning, whole.text)
    # The committed turn is well-formed: the answer as content (R1 drops past reasoning).
    assert more.history[-1] == {"role": "assistant", "content": more.text}


def test_reasoning_in_a_channel_format_is_refused_and_changes_nothing(
    embedded_model_path, open_session
):
    s = _reasoning_session(open_session, embedded_model_path, 8,
                           template="openai-gpt-oss-120b.jinja")
    result = s.generate(GenerateRequest(text=Q, continue_from="Red.",
                                        continue_reasoning="The user asks."))
    assert result.stop_reason is StopReason.REJECTED and "cannot be continued" in result.error
    assert result.history == ()
