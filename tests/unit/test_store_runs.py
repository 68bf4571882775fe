"""Runs: what produced a generation, its summary, and its per-token rows, by field name."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from workbench.engine.metrics import UNMEASURED, ModelIdentity, RunInfo, RunSummary, TokenMetrics
from workbench.store import NotFound, Store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(tmp_path / "w.db") as s:
        yield s


def _info(name: str = "tiny", fast_hash: str = "h1") -> RunInfo:
    return RunInfo(engine_version="0.1.0", llama_cpp_python_version="0.3.36",
                   model=ModelIdentity(f"/m/{name}.gguf", name, 1234, fast_hash),
                   arch="qwen3moe", n_layer=2, n_expert=8, n_expert_used=2, n_vocab=100,
                   n_ctx_train=512, chat_template=False,
                   settings={"temperature": 0.7, "top_k": 40, "seed": -1})


def _token(step: int, **changes: object) -> TokenMetrics:
    base = TokenMetrics(step=step, steps=8, turn=0, wall_ms=10.5 + step, cpu_ms=20.25,
                        majflt=step, majflt_mib=0.004 * step, loop_overhead_ms=0.125,
                        rss_mib=300.5, token_id=100 + step, piece=f" tok{step}\n",
                        text="cumulative text", reasoning="cumulative reasoning")
    return dataclasses.replace(base, **changes)


def _summary() -> RunSummary:
    return RunSummary(turn=0, n_generated=3, gen_seconds=0.04, n_prompt=12, n_reused=0,
                      n_past=15, n_ctx=512, load_seconds=0.5, prefill_seconds=0.02,
                      ttft_seconds=0.03, majflt_per_token=0.0, cpu_s_per_token=0.02,
                      loop_overhead_s_per_token=0.001, stop_reason="length")


def test_a_run_stores_what_produced_it(store: Store):
    run = store.create_run(_info(), label="baseline")
    got = store.get_run(run.id)
    assert got.message_id is None and got.label == "baseline"
    assert got.settings == {"temperature": 0.7, "top_k": 40, "seed": -1}
    assert got.model == {"path": "/m/tiny.gguf", "name": "tiny", "size_bytes": 1234,
                         "fast_hash": "h1"}
    assert got.engine_version == "0.1.0"
    assert got.info == dataclasses.asdict(_info())
    assert got.summary == {} and got.run_summary() is None  # not finished yet
    assert got.n_token_rows == 0

    store.finish_run(run.id, _summary())
    done = store.get_run(run.id)
    assert done.run_summary() == _summary()
    assert done.summary["cache_evictions"] == -1 and done.summary["moe_read_mib"] == UNMEASURED


def test_token_rows_round_trip_by_field_name(store: Store):
    run = store.create_run(_info())
    rows = [_token(1), _token(2, io_ms=3.5, read_bytes=4096, cache_hit_pct=87.5), _token(3)]
    assert store.add_token_rows(run.id, rows[:2]) == 2  # batches, as the 1 s flush sends them
    assert store.add_token_rows(run.id, rows[2:]) == 1
    got = store.token_rows(run.id)
    assert store.get_run(run.id).n_token_rows == 3

    expected = [dataclasses.asdict(r) for r in rows]
    for e in expected:  # the cumulative text is the message's job, not the token table's
        del e["text"], e["reasoning"]
    assert got == expected
    first = got[0]
    # Unmeasured stays -1 (not 0, not NULL), and ints stay ints.
    assert first["io_ms"] == -1.0 and first["read_bytes"] == -1 and first["mtp_draft_ms"] == -1.0
    assert type(first["read_bytes"]) is int and type(first["majflt"]) is int
    assert type(first["wall_ms"]) is float
    assert first["piece"] == " tok1\n" and first["mtp_batch"] == 1


def test_rows_accept_dicts_and_a_retried_flush_does_not_duplicate(store: Store):
    run = store.create_run(dataclasses.asdict(_info()))
    row = dataclasses.asdict(_token(1))
    store.add_token_rows(run.id, [row])
    store.add_token_rows(run.id, [{**row, "wall_ms": 99.0}])
    [got] = store.token_rows(run.id)
    assert got["wall_ms"] == 99.0
    with pytest.raises(ValueError):
        store.add_token_rows(run.id, [{"step": 2}])  # missing fields are an error, not 0
    with pytest.raises(NotFound):
        store.add_token_rows(4242, [row])
    assert store.add_token_rows(run.id, []) == 0


def test_nan_is_stored_as_unmeasured_not_lost(store: Store):
    run = store.create_run(_info())
    store.add_token_rows(run.id, [_token(1, cache_hit_pct=float("nan")), _token(2)])
    assert [r["cache_hit_pct"] for r in store.token_rows(run.id)] == [UNMEASURED, UNMEASURED]


def test_rows_of_several_turns_keep_their_order(store: Store):
    run = store.create_run(_info())
    store.add_token_rows(run.id, [_token(2, turn=1), _token(1, turn=1), _token(1, turn=0)])
    assert [(r["turn"], r["step"]) for r in store.token_rows(run.id)] == [(0, 1), (1, 1), (1, 2)]


def test_list_runs_filters(store: Store):
    conv = store.create_conversation()
    u = store.add_message(conv.id, None, "user", "q")
    a = store.add_message(conv.id, u.id, "assistant", "a")
    other = store.create_conversation()
    ou = store.add_message(other.id, None, "user", "q")

    chat = store.create_run(_info(), message_id=a.id, created_at=100.0)
    headless = store.create_run(_info("big", "h2"), created_at=200.0)
    elsewhere = store.create_run(_info(), message_id=ou.id, created_at=300.0)

    def ids(**filters: object) -> list[int]:
        return [r.id for r in store.list_runs(**filters)]

    assert ids() == [elsewhere.id, headless.id, chat.id]  # newest first
    assert ids(conversation_id=conv.id) == [chat.id]
    assert ids(message_id=ou.id) == [elsewhere.id]
    assert ids(headless=True) == [headless.id]
    assert ids(headless=False) == [elsewhere.id, chat.id]
    assert ids(model_name="big") == [headless.id]
    assert ids(model_hash="h1") == [elsewhere.id, chat.id]
    assert ids(since=150.0, until=300.0) == [elsewhere.id, headless.id]
    assert ids(limit=1) == [elsewhere.id]
    assert ids(model_name="tiny", headless=True) == []


def test_attach_detach_delete(store: Store):
    conv = store.create_conversation()
    u = store.add_message(conv.id, None, "user", "q")
    run = store.create_run(_info())
    store.add_token_rows(run.id, [_token(1)])
    store.attach_run(run.id, u.id)
    assert store.get_run(run.id).message_id == u.id

    # Purging the conversation keeps the run (a measurement), detached from the message.
    store.delete_conversation(conv.id)
    store.purge_deleted()
    assert store.get_run(run.id).message_id is None
    assert len(store.token_rows(run.id)) == 1

    store.delete_run(run.id)
    with pytest.raises(NotFound):
        store.get_run(run.id)
    assert store.token_rows(run.id) == []
    with pytest.raises(NotFound):
        store.delete_run(run.id)
    with pytest.raises(NotFound):
        store.finish_run(run.id, _summary())


def test_run_summary_ignores_unknown_keys(store: Store):
    run = store.create_run(_info(), summary={**dataclasses.asdict(_summary()), "future": 1})
    assert store.get_run(run.id).run_summary() == _summary()
    partial = store.create_run(_info(), summary={"turn": 0})
    assert store.get_run(partial.id).run_summary() is None
