"""A grammar's cost per token, the `grammar_ms` column (engine/constrain.py): -1 on every row of
a turn without a grammar, measured on every row of one with, adding up to the turn's
`grammar_s` (which the picker counts on its own), written to the metrics file, and outside the
decode bracket (`wall_ms`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import llama_cpp.llama_cpp as ll
import pytest

from workbench.backend import grammar as grammar_module
from workbench.backend.grammar import Picker, schema_to_gbnf
from workbench.engine.constrain import Decoding
from workbench.engine.metrics import TokenMetrics
from workbench.engine.metrics_reader import read_metrics_csv
from workbench.engine.requests import GenerateRequest, StopReason, TokenEvent
from workbench.engine.sinks import CsvMetricsSink

pytestmark = pytest.mark.slow

ASK = "Describe a red fox as a JSON object."
JSON_OBJECT = Decoding(grammar=schema_to_gbnf({"type": "object"}))  # the server's json_object
SLOW_MS = 5.0  # what the slowed grammar below adds to each of its calls, at the least


def _turn(session: Any, decoding: Decoding | None, n_predict: int
          ) -> tuple[Any, list[TokenMetrics]]:
    rows: list[TokenMetrics] = []

    def on_token(event: TokenEvent) -> None:
        rows.append(event.metrics)

    result = session.generate(GenerateRequest(text=ASK, new_chat=True, n_predict=n_predict,
                                              decoding=decoding), on_token=on_token)
    assert result.ok, result.error
    assert len(rows) == result.summary.n_generated > 0
    return result, rows


def test_the_column_is_unmeasured_without_a_grammar(open_session, chat_model_path: Path
                                                    ) -> None:
    session = open_session(model=str(chat_model_path), n_ctx=1024, n_predict=64)
    for decoding in (None, Decoding(logprobs=2)):  # plain, and log-probabilities alone
        result, rows = _turn(session, decoding, 8)
        assert [r.grammar_ms for r in rows] == [-1.0] * len(rows)
        assert result.summary.grammar_seconds == -1


def test_each_pick_under_a_grammar_is_a_row_and_the_rows_add_up_to_the_turn(
        open_session, chat_model_path: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The independent count: what the picker says each of its picks cost, as it returns.
    picks_ns: list[int] = []
    pick = Picker.pick

    def counted(self: Picker, ctx: Any) -> Any:
        picked = pick(self, ctx)
        picks_ns.append(self.last_grammar_ns)
        return picked

    monkeypatch.setattr(Picker, "pick", counted)
    csv = tmp_path / "run.csv"
    sink = CsvMetricsSink(csv)
    session = open_session(model=str(chat_model_path), n_ctx=1024, n_predict=64, sink=sink)
    for n_predict in (6, 32):  # cut by the limit (no pick without a row), and maybe not
        picks_ns.clear()
        result, rows = _turn(session, JSON_OBJECT, n_predict)
        column = [r.grammar_ms for r in rows]
        assert all(ms > 0 for ms in column), column
        assert column == [ns / 1e6 for ns in picks_ns[:len(rows)]]
        # An end token is picked (the grammar's time spent) but has no row.
        ended = result.stop_reason is StopReason.EOS
        assert len(picks_ns) == len(rows) + ended
        grammar_s = result.summary.grammar_seconds
        assert grammar_s == pytest.approx(sum(picks_ns) / 1e9, rel=1e-9)
        unbilled_s = picks_ns[-1] / 1e9 if ended else 0.0
        assert sum(column) / 1e3 == pytest.approx(grammar_s - unbilled_s, rel=0.01)
        if not ended:
            assert sum(column) / 1e3 == pytest.approx(grammar_s, rel=0.01)
    sink.close()
    written = [r for r in read_metrics_csv(csv).rows if r["turn"] == 1]
    assert [r["grammar_ms"] for r in written] == pytest.approx(column, abs=1e-3)


class _SlowGrammar:
    """llama.cpp's bindings as backend/grammar.py sees them, with every call to a grammar
    sampler slowed by SLOW_MS: time the grammar spends, where the picker measures it."""

    def __init__(self) -> None:
        self.grammars: list[Any] = []  # the samplers as the picker holds them (ctypes objects)

    def __getattr__(self, name: str) -> Any:
        return getattr(ll, name)

    def llama_sampler_init_grammar(self, *args: Any) -> Any:
        sampler = ll.llama_sampler_init_grammar(*args)
        self.grammars.append(sampler)
        return sampler

    def llama_sampler_apply(self, sampler: Any, candidates: Any) -> None:
        if any(sampler is grammar for grammar in self.grammars):
            time.sleep(SLOW_MS / 1e3)
        ll.llama_sampler_apply(sampler, candidates)


def test_the_grammar_is_billed_to_the_loop_overhead_never_to_the_decode(
        open_session, chat_model_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(grammar_module, "ll", _SlowGrammar())
    session = open_session(model=str(chat_model_path), n_ctx=1024, n_predict=64)
    result, rows = _turn(session, JSON_OBJECT, 8)
    for r in rows:
        assert r.grammar_ms >= SLOW_MS
        # The overhead is the time between two decode brackets; the grammar runs inside it.
        assert r.loop_overhead_ms >= r.grammar_ms, (r.step, r.loop_overhead_ms, r.grammar_ms)
    assert result.summary.gen_seconds == pytest.approx(sum(r.wall_ms for r in rows) / 1e3)
    assert result.summary.grammar_seconds >= len(rows) * SLOW_MS / 1e3
