"""What Regenerate does to the sampler, so that a new version can differ from the last.

Greedy decoding (temperature 0) picks the likeliest token every time: with the same settings a
regenerated answer is the same answer, so Regenerate says so and how to get another (raise the
temperature) rather than repeat it silently. A sampled answer gets a new seed, drawn here and
shown, so the new version differs and can still be reproduced (Settings > Seed).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from workbench.config import Config

SEED_LIMIT = 4_294_967_294  # the seed setting's largest value (-1 is "random")


@dataclass(frozen=True, slots=True)
class RegeneratePlan:
    config: Config | None  # the settings to regenerate with; None: keep those in force
    note: str  # what the window says about the new version


def plan_regenerate(config: Config, rng: random.Random | None = None) -> RegeneratePlan:
    if config.temp <= 0:
        return RegeneratePlan(None, "Greedy sampling (Temperature 0) picks the likeliest token "
                                    "every time, so with the same settings the new version is "
                                    "the same answer. Raise Temperature in Settings to get a "
                                    "different one.")
    draw = (rng or random.SystemRandom()).randint(0, SEED_LIMIT)
    if draw == config.seed:  # a new seed, never the one just used
        draw = (draw + 1) % (SEED_LIMIT + 1)
    return RegeneratePlan(config.replace(seed=draw),
                          f"New version sampled with seed {draw} (Settings > Seed "
                          "reproduces it).")
