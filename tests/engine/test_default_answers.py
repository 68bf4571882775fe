"""The bundled model's defaults answer everyday requests without looping (issues #29, #39), on
the real SmolLM2.

Judged by properties (tests/engine/everyday.py, tests/loops.py), never by another machine's
words: greedy text differs between CPUs. The old defaults (greedy, no penalty) loop on the long
tasks, and the generic ones on the questions: those are the negative controls, caught by the
same checks the chosen defaults pass.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engine.everyday import (
    LONG_TASKS,
    OLD_DEFAULTS,
    QUESTIONS,
    ask_all,
    judge,
    report,
)
from workbench.config import Config
from workbench.engine.model_defaults import BUNDLED_SETTINGS, is_bundled, model_defaults
from workbench.engine.turn_settings import TurnSettings

N_PREDICT = 64  # what the comparison that chose the defaults used for a question...
LONG_PREDICT = 256  # ...and for a long task


@pytest.fixture(scope="module")
def smollm(chat_model_path):
    from workbench.engine.session import Session

    session = Session.open(model_defaults(str(chat_model_path)).replace(n_threads=2, n_ctx=1024))
    yield session
    session.close()


def _settings(changes: dict) -> TurnSettings:
    """The turn settings of the evaluation's base config with `changes` (a defaults row)."""
    return TurnSettings.of(Config(n_threads=2, n_ctx=1024).replace(**changes))


@pytest.mark.slow
def test_the_bundled_defaults_answer_everyday_questions_without_loops(smollm):
    assert smollm.config.system_prompt == BUNDLED_SETTINGS["system_prompt"]
    verdicts = ask_all(smollm, QUESTIONS, N_PREDICT)
    assert all(v.ok for v in verdicts), "\n" + report(verdicts)
    # Greedy: the same answer again within the run (not across machines).
    assert ask_all(smollm, QUESTIONS[:1], N_PREDICT)[0].answer == verdicts[0].answer


@pytest.mark.slow
def test_the_bundled_defaults_write_long_pieces_without_loops(smollm):
    """A story, a haiku, a list and a story continued past the token limit: none loops, each
    is as long as the piece asked for. (On topic is reported, not required: a 135M model's
    story may wander; a loop is what issue #39 met.)"""
    verdicts = ask_all(smollm, LONG_TASKS, LONG_PREDICT, _settings(BUNDLED_SETTINGS))
    assert not any(v.loop or v.short or not v.answer.strip() for v in verdicts), (
        "\n" + report(verdicts))


@pytest.mark.slow
def test_the_old_defaults_loop_on_the_long_pieces(smollm):
    """The control: what issue #39 met. Greedy with no penalty repeats itself on the long tasks;
    the evaluation says so."""
    verdicts = ask_all(smollm, LONG_TASKS, LONG_PREDICT, _settings(OLD_DEFAULTS))
    assert any(v.loop for v in verdicts), "\n" + report(verdicts)


def test_only_the_bundled_model_has_its_own_defaults(chat_model_path, embedded_model_path):
    assert is_bundled("") and is_bundled(str(chat_model_path))
    assert not is_bundled(str(embedded_model_path))
    # gemma-3-270m's tests and benchmarks use the generic defaults: they stay its own.
    assert model_defaults(str(embedded_model_path)) == Config(model=str(embedded_model_path))
    bundled = model_defaults()
    assert bundled.system_prompt and bundled.temp == 0.0  # greedy stays the default sampler
    assert bundled.repeat_penalty > 1.0 and bundled.repeat_last_n > 0  # ...with a penalty
    assert bundled == Config().replace(**BUNDLED_SETTINGS)
    # The docs say what they are (settings.md is generated; chat.md is written).
    from workbench.config_cli import settings_markdown

    penalty = f"repetition penalty of {BUNDLED_SETTINGS['repeat_penalty']}"
    assert penalty in settings_markdown()
    chat_md = " ".join((Path(__file__).parents[2] / "docs" / "chat.md").read_text(
        encoding="utf-8").split())
    assert penalty in chat_md and BUNDLED_SETTINGS["system_prompt"] in chat_md


def test_the_checks_catch_loops_off_topic_and_short_answers():
    france = QUESTIONS[0]
    assert judge(france, "The capital of France is Paris.").ok
    looped = judge(france, "L'Étoile, la femme au roi, la femme au roi, la femme au roi, Paris")
    assert not looped.ok and "la femme au roi" in looped.loop
    assert not judge(france, "France is a country in Europe.").ok  # no Paris: off topic
    assert not judge(france, "").ok
    story = LONG_TASKS[0]
    assert judge(story, "A cat found a key.").short  # a sentence is not a story
    assert not judge(story, "The cat looked for the key. " * 12).ok
