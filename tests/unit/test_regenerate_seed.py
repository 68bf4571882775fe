"""Regenerate's sampler plan: a new, shown seed when sampling; greedy says why it repeats."""

from __future__ import annotations

import random

from workbench.config import Config
from workbench.ui.chat.regenerate_seed import SEED_LIMIT, plan_regenerate


def test_greedy_keeps_the_settings_and_says_why_the_answer_repeats():
    plan = plan_regenerate(Config(temp=0.0, repeat_penalty=1.1))
    assert plan.config is None
    assert "Greedy" in plan.note and "Raise Temperature" in plan.note


def test_sampling_draws_a_new_seed_and_shows_it():
    config = Config(temp=0.7, seed=5)
    plan = plan_regenerate(config, random.Random(1))
    assert plan.config is not None and plan.config.seed != 5
    assert 0 <= plan.config.seed <= SEED_LIMIT
    assert plan.config == config.replace(seed=plan.config.seed)  # nothing else changes
    assert f"seed {plan.config.seed}" in plan.note


def test_the_new_seed_is_never_the_one_just_used():
    drawn = random.Random(3).randint(0, SEED_LIMIT)
    plan = plan_regenerate(Config(temp=0.7, seed=drawn), random.Random(3))
    assert plan.config is not None and plan.config.seed != drawn


def test_random_seed_setting_still_gets_a_concrete_shown_seed():
    plan = plan_regenerate(Config(temp=0.7, seed=-1))
    assert plan.config is not None and plan.config.seed >= 0
