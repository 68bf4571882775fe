"""The substitution replay against the engine it models: a streamed chat on the tiny synthetic
MoE at margin 1.0 through a cache that evicts all the time, its routing recorded with the
router's score rows, replayed at the same budget and margin. The replay must make the engine's
substitutions and its cache's lookups and hits exactly; without the score rows it refuses."""

from __future__ import annotations

import pytest

from workbench.config import Config
from workbench.engine.requests import GenerateRequest
from workbench.engine.session import Session
from workbench.moe.substitute_replay import MissingScoresError, replay_substitute

MIB = 1 << 20


def _run(model, scores: bool):
    config = Config(model=str(model), chat_template=False, n_predict=24, n_ctx=256,
                    n_threads=2, n_batch=8, moe_stream=True, cache_mb=2, o_direct=False,
                    expert_substitute=1.0)
    session = Session.open(config, record_routes=True, record_route_scores=scores)
    try:
        result = session.generate(GenerateRequest(text="The quick brown fox jumps over it."))
        assert result.ok, result.error
        runtime = session.streaming
        return runtime.streamer.counters(), list(runtime.routes.loads()), runtime.expert_bytes
    finally:
        session.close()


def test_the_replay_makes_the_engines_substitutions_and_cache(tiny_moe_path):
    counters, loads, expert_bytes = _run(tiny_moe_path, scores=True)
    assert counters.experts_substituted > 0 and counters.evictions > 0
    got = replay_substitute(loads, expert_bytes, 2 * MIB, 1.0)
    assert (got.substituted, got.reranked) == (counters.experts_substituted,
                                               counters.experts_reranked)
    assert (got.result.lookups, got.result.hits) == (counters.lookups, counters.hits)
    # Another margin predicts another routing: the check above can fail.
    assert replay_substitute(loads, expert_bytes, 2 * MIB, 1e-6).substituted == 0


def test_without_score_rows_the_replay_refuses(tiny_moe_path):
    _, loads, expert_bytes = _run(tiny_moe_path, scores=False)
    with pytest.raises(MissingScoresError, match="record_route_scores"):
        replay_substitute(loads, expert_bytes, 2 * MIB, 0.2)
