"""min-p and the repetition penalties in the sampling chain, on the real embedded model."""

from __future__ import annotations

from workbench.engine.requests import GenerateRequest, TokenEvent
from workbench.engine.turn_settings import TurnSettings

Q = "Write the word 'yes' ten times, separated by spaces."


def _tokens(session, text=Q, settings=None):
    got: list[int] = []

    def on_token(event: TokenEvent) -> None:
        got.append(event.metrics.token_id)

    result = session.generate(GenerateRequest(text=text, new_chat=True, settings=settings),
                              on_token=on_token)
    assert result.ok
    return result.text, got


def test_min_p_of_one_leaves_only_the_likeliest_token(embedded_model_path, open_session):
    # min-p 1 keeps only tokens as likely as the top one: sampling at any seed is greedy.
    greedy, _ = _tokens(open_session(model=str(embedded_model_path), n_predict=20))
    for seed in (1, 2):
        s = open_session(model=str(embedded_model_path), n_predict=20, temp=1.5, seed=seed,
                         top_k=0, top_p=1.0, min_p=1.0)
        assert _tokens(s)[0] == greedy
    loose = open_session(model=str(embedded_model_path), n_predict=20, temp=1.5, seed=1,
                         top_k=0, top_p=1.0, min_p=0.0)
    assert _tokens(loose)[0] != greedy  # without min-p this draw really wanders


def test_penalties_act_under_greedy_and_stay_reproducible(embedded_model_path, open_session):
    plain_text, plain = _tokens(open_session(model=str(embedded_model_path), n_predict=40))
    assert len(set(plain)) < len(plain)  # the plain greedy answer repeats tokens
    penalised = dict(model=str(embedded_model_path), n_predict=40, repeat_penalty=1.8,
                     presence_penalty=1.5, repeat_last_n=64)
    a_text, a = _tokens(open_session(**penalised))
    b_text, _ = _tokens(open_session(**penalised))
    assert a_text == b_text  # greedy + penalties is still deterministic
    assert a_text != plain_text
    assert len(set(a)) / len(a) > len(set(plain)) / len(plain)  # fewer repeats


def test_a_penalty_window_of_zero_turns_the_penalties_off(embedded_model_path, open_session):
    plain_text, _ = _tokens(open_session(model=str(embedded_model_path), n_predict=24))
    off = open_session(model=str(embedded_model_path), n_predict=24, repeat_penalty=1.8,
                       repeat_last_n=0)
    assert _tokens(off)[0] == plain_text


def test_settings_can_change_the_penalties_between_turns(embedded_model_path, open_session):
    s = open_session(model=str(embedded_model_path), n_predict=24)
    plain_text, _ = _tokens(s)
    own = TurnSettings.of(s.config)
    assert _tokens(s, settings=own.replace(repeat_penalty=1.8, presence_penalty=1.5))[0] != (
        plain_text)
    assert _tokens(s, settings=own)[0] == plain_text
