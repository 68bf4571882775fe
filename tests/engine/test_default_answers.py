"""The bundled model's defaults answer everyday questions (issue #29), on the real SmolLM2.

The generic defaults (greedy, no system prompt) loop on the first question a new user asks:
that is the negative control, and the checks that catch it are the ones the chosen defaults
pass. The questions and checks are tests/engine/everyday.py.
"""

from __future__ import annotations

import pytest

from tests.engine.everyday import QUESTIONS, ask_all, judge, loop_found, report
from workbench.config import Config
from workbench.engine.model_defaults import BUNDLED_SETTINGS, is_bundled, model_defaults
from workbench.engine.turn_settings import TurnSettings

N_PREDICT = 64  # what the comparison that chose the defaults used


@pytest.fixture(scope="module")
def smollm(chat_model_path):
    from workbench.engine.session import Session

    session = Session.open(model_defaults(str(chat_model_path)).replace(n_threads=2, n_ctx=1024))
    yield session
    session.close()


@pytest.mark.slow
def test_the_bundled_defaults_answer_everyday_questions_without_loops(smollm):
    assert smollm.config.system_prompt == BUNDLED_SETTINGS["system_prompt"]
    verdicts = ask_all(smollm, QUESTIONS, N_PREDICT)
    assert all(v.ok for v in verdicts), "\n" + report(verdicts)
    assert "paris" in verdicts[0].answer.lower()


@pytest.mark.slow
def test_the_generic_defaults_loop_on_the_first_question(smollm, chat_model_path):
    """The control: what a new user met. Greedy with no system prompt turns the capital of
    France into a loop of French words; the evaluation says so."""
    generic = TurnSettings.of(Config(model=smollm.config.model, n_threads=2, n_ctx=1024))
    (verdict,) = ask_all(smollm, QUESTIONS[:1], N_PREDICT, generic)
    assert not verdict.ok and verdict.loop, verdict.answer


def test_only_the_bundled_model_has_its_own_defaults(chat_model_path, embedded_model_path):
    assert is_bundled("") and is_bundled(str(chat_model_path))
    assert not is_bundled(str(embedded_model_path))
    # gemma-3-270m's pinned tokens were taken with the generic defaults: they stay its own.
    assert model_defaults(str(embedded_model_path)) == Config(model=str(embedded_model_path))
    bundled = model_defaults()
    assert bundled.system_prompt and bundled.temp == 0.0  # greedy stays the default sampler
    assert bundled == Config().replace(**BUNDLED_SETTINGS)


def test_the_checks_catch_loops_and_off_topic_answers():
    france = QUESTIONS[0]
    assert judge(france, "The capital of France is Paris.").ok
    looped = judge(france, "L'Étoile, la femme au roi, la femme au roi, la femme au roi, Paris")
    assert not looped.ok and "la femme au roi" in looped.loop
    assert loop_found("Boil an egg:\n\nBoil an egg:\n\nBoil an egg:")
    assert not judge(france, "France is a country in Europe.").ok  # no Paris: off topic
    assert not judge(france, "").ok
