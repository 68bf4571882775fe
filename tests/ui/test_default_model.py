"""The window opened on nothing but defaults: the chat model, whose first screen suggests a
question, and which answers it (not continues it, as the base model would)."""

from __future__ import annotations

from pathlib import Path

from tests.engine.everyday import Question, judge
from tests.ui.user_actions import send
from workbench.config import Config
from workbench.embedded import SUGGESTED_QUESTION


def test_the_default_model_answers_the_suggested_question(qtbot, make_window, chat_model_path):
    # No model given: the window picks the default itself, as on a user's first start.
    window = make_window(config=Config().replace(n_threads=2, n_ctx=512, n_predict=40))
    assert Path(window.chat.model.path).name == chat_model_path.name
    assert SUGGESTED_QUESTION in window.chat_view.placeholder.text()
    assert window.chat_view.placeholder.isVisible()

    send(qtbot, window, SUGGESTED_QUESTION)
    answer = window.chat_view.messages[-1].shown
    assert answer.role == "assistant" and answer.status == "complete"
    # The physics, not more questions: on topic and not looping. Not SmolLM2's exact words,
    # which differ between CPUs (AVX2 and AVX-512 kernels answer differently).
    # 40 tokens: the physics may stop short of naming the scattering, so any of its words.
    sky = Question(SUGGESTED_QUESTION, "explain",
                   (("light", "sunlight"),
                    ("scatter", "rayleigh", "atmospher", "molecul", "wavelength", "air")))
    verdict = judge(sky, answer.content)
    assert verdict.ok, verdict.why() + ": " + answer.content
