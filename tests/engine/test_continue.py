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
    s.set_history([])  # the window sends the turns before the question, as for any answer
    more = s.generate(GenerateRequest(text=Q, continue_from=cut.text, n_predict=14))
    assert more.ok and more.text.startswith(cut.text)
    assert more.text == whole.text  # greedy: the same answer as if it had never stopped
    assert more.summary.n_reused >= held - 1  # the cut answer came from the KV memory
    assert more.summary.n_prompt <= 2
    assert s.history[-1]["content"] == more.text  # the history holds the whole answer


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
    assert s.history == []
