"""The substitution rule on one token row, as the native eval callback applies it
(wb_substitute_row), and the settings that arm it (validate() refuses it without a cache, out
of range and NaN)."""

from __future__ import annotations

import argparse
import math

import numpy as np
import pytest

from workbench.config import Config, validate
from workbench.config_cli import add_arguments, config_from_args
from workbench.moe.streamer import substitute_row


def parse_args(argv: list[str]) -> Config:
    parser = argparse.ArgumentParser(prog="workbench", exit_on_error=False)
    add_arguments(parser)
    return config_from_args(parser.parse_args(argv))


# Eight experts, top-2. The router's choice is 0 and 1; expert 2 trails expert 1 by 0.05 on a
# range of 1.0 (max 1.0, min 0.0).
SCORES = np.array([1.0, 0.6, 0.55, 0.3, 0.2, 0.1, 0.05, 0.0], np.float32)
ROUTED = np.array([0, 1], np.int32)


def resident(*experts: int) -> np.ndarray:
    out = np.zeros(len(SCORES), np.uint8)
    out[list(experts)] = 1
    return out


def test_a_near_tie_goes_to_the_resident_expert():
    ids, n = substitute_row(SCORES, ROUTED, resident(2), 0.10)
    assert n == 1 and ids.tolist() == [0, 2]  # 0.55 + 0.10 x 1.0 = 0.65 > 0.6


def test_a_confident_routing_is_untouched():
    # Expert 3 trails by 0.3: a margin of 0.1 of the range cannot lift it past expert 1.
    ids, n = substitute_row(SCORES, ROUTED, resident(3), 0.10)
    assert n == 0 and ids.tolist() == [0, 1]


def test_the_margin_scales_with_the_rows_own_range():
    # The same gaps on a range ten times smaller: the same margin settles the same tie.
    ids, n = substitute_row(SCORES / 10, ROUTED, resident(2), 0.10)
    assert n == 1 and ids.tolist() == [0, 2]
    ids, n = substitute_row(SCORES, ROUTED, resident(2), 0.04)  # 0.59 < 0.6: no
    assert n == 0


def test_a_reorder_is_not_a_substitution_and_leaves_the_ids_as_routed():
    # Expert 1 resident: raised past expert 0, but the set {0, 1} is the router's.
    ids, n = substitute_row(SCORES, ROUTED, resident(1), 0.5)
    assert n == 0 and ids.tolist() == [0, 1]


def test_every_resident_expert_gets_the_bonus_and_masked_scores_are_ignored():
    scores = SCORES.copy()
    scores[7] = -np.inf  # a grouped router's masked expert: not part of the range
    # Range 1.0 - 0.05 = 0.95; with both 0 and 2 resident at margin 0.2, 2 (0.74) beats 1 (0.6).
    ids, n = substitute_row(scores, ROUTED, resident(0, 2), 0.2)
    assert n == 1 and ids.tolist() == [0, 2]
    with pytest.raises(ValueError):
        substitute_row(scores[:1], ROUTED, resident(0), 0.2)  # fewer scores than ids


def test_the_setting_takes_upstreams_flag_and_is_refused_without_a_cache_out_of_range_or_nan():
    cfg = parse_args(["--expert-substitute", "0.15"])
    assert cfg.expert_substitute == 0.15 and Config().expert_substitute == 0.0
    off = validate(cfg)
    assert [p.setting for p in off] == ["expert_substitute"]
    assert "streaming is off" in off[0].message
    no_cache = validate(cfg.replace(moe_stream=True))
    assert [p.setting for p in no_cache] == ["expert_substitute"]
    assert "the expert cache is off" in no_cache[0].message
    assert validate(cfg.replace(moe_stream=True, cache_mb=256)) == []
    assert validate(cfg.replace(moe_stream=True, cache_auto=True)) == []
    for bad in (1.5, -0.1, math.nan, math.inf):
        problems = validate(cfg.replace(moe_stream=True, cache_mb=256, expert_substitute=bad))
        assert [p.setting for p in problems] == ["expert_substitute"], bad
    assert parse_args(["--expert-substitute", "0.2", "--substitute-in-prefill"]
                      ).expert_substitute_prefill
