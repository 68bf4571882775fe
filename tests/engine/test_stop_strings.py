"""Stop strings (GenerateRequest.stop): the turn ends at the token that completes one, as at the
model's own end, and the KV memory keeps what was generated (a cancel would roll it back)."""

from __future__ import annotations

import pytest

from workbench.engine.requests import GenerateRequest, StopReason

pytestmark = pytest.mark.slow


def test_a_stop_string_ends_the_turn_where_it_appears(open_session, chat_model_path):
    session = open_session(model=str(chat_model_path), n_threads=1, n_ctx=512, n_predict=32)
    ask = "Count from one to ten in words."
    full = session.generate(GenerateRequest(text=ask, n_predict=24, new_chat=True))
    assert full.stop_reason is StopReason.LENGTH
    words = full.text.split()
    stop = words[3]
    cut = session.generate(GenerateRequest(text=ask, n_predict=24, new_chat=True,
                                           stop=("never-there", stop)))
    assert cut.stop_reason is StopReason.EOS
    assert stop in cut.text and full.text.startswith(cut.text)
    # Ended at the token that completed it: nothing was generated past the token holding it.
    assert cut.text.find(stop) + len(stop) > len(cut.text) - 8
    assert cut.summary.n_generated < full.summary.n_generated
    # Kept, not rolled back: the next turn reuses the prompt and the answer.
    assert len(session.kv_tokens) == cut.summary.n_past
    later = session.generate(GenerateRequest(text="Thanks.", history=cut.history, n_predict=2))
    assert later.summary.n_reused >= cut.summary.n_past - 2
    # Negative control: a stop string the answer never contains changes nothing.
    same = session.generate(GenerateRequest(text=ask, n_predict=24, new_chat=True,
                                            stop=("never-there",)))
    assert same.stop_reason is StopReason.LENGTH and same.text == full.text
