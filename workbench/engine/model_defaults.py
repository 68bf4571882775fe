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

# Measured with `python -m tests.engine.everyday` on a 2-core AVX2 EPYC (7 questions at 64
# tokens, 4 long tasks at 256: a story, a haiku, a list, a story continued past the limit):
#   generic defaults (greedy, no system prompt)   questions 4/7  long 1/4 (French verse, loops)
#   greedy + this system prompt (the old default) questions 7/7  long 1/4 (list, stories loop)
#   greedy + repetition penalty 1.1 alone         questions 5/7  long 4/4
#   greedy + this system prompt + penalty 1.1     questions 7/7  long 3/4 (no loop; the dragon
#                                                 story never gets to the reading)
# The penalty (over the last 64 tokens, `repeat_last_n`) stops the loops; greedy is kept, so an
# answer is reproducible on one machine and Regenerate says why it repeats (ui/chat/
# regenerate_seed.py). Figures differ between CPUs; the test holds properties, not words.
BUNDLED_SETTINGS: dict[str, Any] = {
    "system_prompt": "You are a helpful assistant. Answer the question directly and briefly, "
                     "in English.",
    "repeat_penalty": 1.1,
}


def is_bundled(model: str) -> bool:
    """The bundled chat model: "" (the default) or its file, wherever it was put."""
    return model == "" or Path(model).name == CHAT_MODEL.name


def model_defaults(model: str = "") -> Config:
    """The settings `model` opens with when none were chosen for it."""
    base = Config(model=model)
    return base.replace(**BUNDLED_SETTINGS) if is_bundled(model) else base
