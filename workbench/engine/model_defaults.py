"""Per-model defaults: the settings a model opens with when the user has not chosen them.

Only the bundled chat model has its own, and they are the generic defaults of the config tree
overlaid with `BUNDLED_SETTINGS`. Chosen with the everyday-questions evaluation kept in the tests
(tests/engine/everyday.py, held by tests/engine/test_default_answers.py): SmolLM2-135M-Instruct
at the generic defaults (greedy, no system prompt) loops on the first question a new user asks
("What is the capital of France?" turns into French verse up to the token limit).

Every other model, gemma-3-270m included (tests and benchmarks pin tokens taken on it with the
generic defaults), opens with the generic defaults. Greedy stays one setting away (Temperature 0).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workbench.config import Config
from workbench.embedded import CHAT_MODEL

# Measured with `python -m tests.engine.everyday --n-predict 64` (7 questions, first turns):
# generic defaults 5/7 (France and the boiled egg loop), greedy with this system prompt 7/7,
# greedy with a repetition penalty of 1.1 alone 6/7. Greedy is kept: answers are reproducible
# and the test that holds them is exact.
BUNDLED_SETTINGS: dict[str, Any] = {
    "system_prompt": "You are a helpful assistant. Answer the question directly and briefly, "
                     "in English.",
}


def is_bundled(model: str) -> bool:
    """The bundled chat model: "" (the default) or its file, wherever it was put."""
    return model == "" or Path(model).name == CHAT_MODEL.name


def model_defaults(model: str = "") -> Config:
    """The settings `model` opens with when none were chosen for it."""
    base = Config(model=model)
    return base.replace(**BUNDLED_SETTINGS) if is_bundled(model) else base
