"""Which models stream, and how the cache is sized (pure functions)."""

from __future__ import annotations

import pytest

from workbench.moe.budget import MIB, cliff_warning, resolve_budget
from workbench.moe.registry import NotStreamableError, check_streamable


def test_dense_and_unknown_architectures_are_refused_with_what_to_do():
    with pytest.raises(NotStreamableError, match=r"dense model.*Turn streaming off"):
        check_streamable("gemma3", 0, "g.gguf")
    with pytest.raises(NotStreamableError, match=r"'newmoe'.*does not know"):
        check_streamable("newmoe", 64, "n.gguf")
    check_streamable("qwen3moe", 128, "q.gguf")  # known MoE: fine


def _auto(**kw):
    args = dict(cache_mb=0, auto=True, floor_mb=1536, ceil_mb=0, total_expert_bytes=20_000 * MIB,
                mem_available_bytes=8_000 * MIB, dense_reserved_bytes=1_000 * MIB)
    args.update(kw)
    return resolve_budget(**args)


def test_fixed_and_off_budgets():
    assert resolve_budget(cache_mb=0, auto=False, floor_mb=0, ceil_mb=0, total_expert_bytes=1,
                          mem_available_bytes=1, dense_reserved_bytes=0).bytes == -1
    fixed = resolve_budget(cache_mb=300, auto=False, floor_mb=0, ceil_mb=0, total_expert_bytes=1,
                           mem_available_bytes=1, dense_reserved_bytes=0)
    assert fixed.bytes == 300 * MIB and not fixed.auto


def test_auto_leaves_the_floor_free_after_dense_weights():
    assert _auto().bytes == (8_000 - 1_000 - 1_536) * MIB


def test_auto_is_capped_by_the_ceiling_and_the_expert_set():
    assert _auto(ceil_mb=2_000).bytes == 2_000 * MIB
    assert _auto(total_expert_bytes=500 * MIB).bytes == 500 * MIB


def test_auto_never_goes_negative():
    assert _auto(mem_available_bytes=1_000 * MIB).bytes == 0


def test_cliff_warning_only_below_one_tokens_demand():
    small = resolve_budget(cache_mb=100, auto=False, floor_mb=0, ceil_mb=0, total_expert_bytes=1,
                           mem_available_bytes=1, dense_reserved_bytes=0)
    assert "smaller than one token's expert demand" in cliff_warning(small, 200 * MIB)
    assert cliff_warning(small, 50 * MIB) == ""
