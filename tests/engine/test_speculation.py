"""Speculative decoding in a session: its refusals, its notes and what it records per token."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.bench.spec import TASKS
from workbench.config import Config, validate
from workbench.engine.metrics_reader import read_metrics_csv
from workbench.engine.requests import GenerateRequest
from workbench.engine.session import SPEC_GREEDY_ONLY, Session, SessionError
from workbench.engine.sinks import CsvMetricsSink
from workbench.engine.speculation.speculator import Speculator

pytestmark = pytest.mark.slow

QUOTE = ("Repeat exactly: the red fox runs past the old mill, the red fox runs past the old "
         "mill, the red fox runs past the old mill,")


def _config(model: Path, **changes: object) -> Config:
    return Config(model=str(model), chat_template=False, n_predict=32, n_ctx=512,
                  n_threads=2).replace(**changes)


def test_a_draft_model_with_another_vocabulary_is_refused_with_a_clear_message(
        chat_model_path: Path, embedded_model_path: Path) -> None:
    with pytest.raises(SessionError, match=r"does not share .* vocabulary") as err:
        Session.open(_config(chat_model_path, spec="draft",
                             spec_draft_model=str(embedded_model_path)))
    message = str(err.value)
    # Read from both headers before either model loads (model_load.check_draft_model).
    assert "262144 tokens" in message and "49152" in message and "--spec ngram" in message


def test_draft_mode_without_a_draft_model_is_a_validation_problem() -> None:
    (problem,) = validate(Config(spec="draft"))
    assert problem.setting == "spec" and "--spec-draft-model" in problem.message
    (problem,) = validate(Config(spec="ngram", spec_draft_max=512, n_batch=512))
    assert problem.setting == "spec_draft_max"
    assert validate(Config(spec="ngram")) == []


def test_sampling_decodes_plainly_and_says_speculation_is_greedy_only(
        open_session, chat_model_path: Path) -> None:
    session = open_session(**_config(chat_model_path, spec="ngram", temp=0.8, seed=3).to_dict())
    result = session.generate(GenerateRequest(text=QUOTE))
    assert result.ok and SPEC_GREEDY_ONLY in result.notes
    s = result.summary
    assert s.spec == "off: sampling" and s.spec_drafted == -1 and s.spec_decodes == -1


def test_every_row_says_what_was_drafted_and_kept_and_the_file_has_it(
        tmp_path: Path, chat_model_path: Path) -> None:
    path = tmp_path / "run.csv"
    # The instruction-tuned model does quote a passage it is asked to repeat (the raw QUOTE
    # prompt it answers in its own words): drafts are kept, whatever the policy's timings say.
    with CsvMetricsSink(path) as sink, Session.open(
            _config(chat_model_path, spec="ngram", chat_template=True), sink=sink) as session:
        result = session.generate(GenerateRequest(text=TASKS["quote"]))
    assert result.ok
    s = result.summary
    assert s.spec == "ngram" and s.spec_accepted > 0 and s.spec_decodes < s.n_generated
    mf = read_metrics_csv(path)
    rows = [r for r in mf.rows if r["turn"] == 0]
    assert len(rows) == s.n_generated
    assert sum(r["drafted"] for r in rows) == s.spec_accepted
    firsts = [r for r in rows if r["drafted"] == 0]
    assert len(firsts) == s.spec_decodes  # one row per decode is the model's own pick
    assert sum(r["draft_len"] for r in firsts) == s.spec_drafted
    for r in rows:
        assert r["mtp_batch"] == r["draft_kept"] + 1
        if r["drafted"] == 1:  # a kept draft took no decode of its own
            assert r["wall_ms"] == 0 and r["mtp_draft_ms"] == 0
    assert s.tokens_per_decode == pytest.approx(s.n_generated / s.spec_decodes)
    assert s.spec_accept_pct == pytest.approx(100 * s.spec_accepted / s.spec_drafted)
    summaries = {int(x["turn"]): x for x in mf.summaries}
    assert summaries[0]["mtp_accepted"] == s.spec_accepted
    assert summaries[0]["spec"] == "ngram"


def test_the_policy_is_timed_by_every_decode_of_the_turn(
        tmp_path: Path, chat_model_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The draft policy weighs drafts by this machine's decode costs: the turn loop must give
    it each decode's size and time, verify steps and plain decodes alike."""
    timed: list[tuple[int, int]] = []
    original = Speculator.decoded

    def spy(self: Speculator, n_fed: int, ns: int) -> None:
        timed.append((n_fed, ns))
        original(self, n_fed, ns)

    monkeypatch.setattr(Speculator, "decoded", spy)
    path = tmp_path / "run.csv"
    with CsvMetricsSink(path) as sink, Session.open(
            _config(chat_model_path, spec="ngram"), sink=sink) as session:
        assert session.generate(GenerateRequest(text=QUOTE)).ok
    firsts = [r for r in read_metrics_csv(path).rows if r["turn"] == 0 and r["drafted"] == 0]
    assert [n for n, _ in timed] == [r["draft_len"] + 1 for r in firsts]
    assert any(n > 1 for n, _ in timed) and all(ns > 0 for _, ns in timed)


def test_a_plain_turn_says_speculation_was_off(open_session, chat_model_path: Path) -> None:
    session = open_session(**_config(chat_model_path, n_predict=4).to_dict())
    rows = []
    result = session.generate(GenerateRequest(text=QUOTE), on_token=lambda e: rows.append(e))
    assert result.summary.spec == "off" and result.summary.spec_decodes == -1
    assert {(e.metrics.drafted, e.metrics.draft_len, e.metrics.mtp_batch) for e in rows} == {
        (-1, -1, 1)}
