"""Quality scoring's arithmetic and its refusals, without a model: KL, the figures and their
intervals, the question file, McNemar's exact test, what the reference resets, and the
inputs that are refused before anything is loaded."""

from __future__ import annotations

import json
import math
import os
import threading

import numpy as np
import pytest

from workbench.bench import choices, lossy, quality
from workbench.bench.quality_stats import (
    SeriesBuilder,
    figures,
    kl_divergence,
    log_softmax,
)
from workbench.config import SETTINGS, Config


def test_kl_is_exactly_zero_for_identical_rows_and_positive_otherwise():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=5000).astype(np.float32)
    same = log_softmax(logits.copy())
    assert kl_divergence(log_softmax(logits), same) == 0.0
    other = logits.copy()
    other[7] += 1e-3  # one logit moved a little
    assert kl_divergence(log_softmax(logits), log_softmax(other)) > 0.0


def test_kl_matches_its_definition():
    p = np.array([0.5, 0.25, 0.25])
    q = np.array([0.25, 0.25, 0.5])
    expected = float(np.sum(p * np.log(p / q)))
    got = kl_divergence(log_softmax(np.log(p)), log_softmax(np.log(q)))
    assert got == pytest.approx(expected, rel=1e-12)


def test_log_softmax_survives_huge_logits():
    row = log_softmax(np.array([1e4, 0.0, -1e4], dtype=np.float32))
    assert np.isfinite(row).all() and np.exp(row).sum() == pytest.approx(1.0)


def _series(n: int, *, noise: float, seed: int = 0):
    rng = np.random.default_rng(seed)
    b = SeriesBuilder()
    for _ in range(n):
        ref = rng.normal(size=50)
        st = ref + rng.normal(scale=noise, size=50) if noise else ref.copy()
        target = int(rng.integers(50))
        b.add(target, log_softmax(ref), log_softmax(st))
    return b.build()


def test_identical_runs_give_zero_kl_full_agreement_and_a_perplexity_ratio_of_one():
    f = figures(_series(200, noise=0.0))
    assert f.kl_mean.estimate == f.kl_mean.high == 0.0 and f.kl_max == 0.0
    assert f.agreement.estimate == 1.0 and f.flips == 0
    assert f.ppl_ratio.estimate == 1.0 and f.ppl_setting == f.ppl_reference


def test_a_perturbed_run_shows_its_cost_with_an_interval_around_the_estimate():
    s = _series(300, noise=0.5)
    f = figures(s)
    assert f.kl_mean.low > 0 and f.kl_mean.low <= f.kl_mean.estimate <= f.kl_mean.high
    assert f.kl_p95.estimate >= f.kl_mean.estimate
    assert f.flips == int(s.flipped.sum()) > 0
    assert f.agreement.estimate == pytest.approx(1 - f.flips / s.n)
    # perplexity is exp of the mean negative log-likelihood
    assert f.ppl_setting.estimate == pytest.approx(math.exp(s.nll_setting.mean()))
    assert f.ppl_ratio.estimate == pytest.approx(
        math.exp(s.nll_setting.mean() - s.nll_reference.mean()))
    assert set(f.to_dict()) >= {"ppl_setting", "kl_mean", "kl_p95", "agreement", "flips"}


def test_no_positions_is_refused():
    with pytest.raises(ValueError):
        figures(SeriesBuilder().build())


def test_the_reference_resets_every_lossy_lever_and_speculation():
    levers = [s.name for s in SETTINGS if s.group == lossy.LOSSY_GROUP]
    assert {"n_expert_used", "drop_cold_frac"} <= set(levers)
    setting = Config(moe_stream=True, cache_mb=64, n_expert_used=1, drop_cold_frac=0.5,
                     spec="ngram", cache_policy="lfru")
    ref = quality.reference_config(setting)
    for name in levers:
        assert getattr(ref, name) == Config().__getattribute__(name), name
    assert ref.spec == "off" and ref.moe_stream is False
    streamed = quality.reference_config(setting, streamed=True)
    assert streamed.moe_stream and streamed.cache_policy == "lfru"
    assert streamed.drop_cold_frac == 0 and streamed.n_expert_used == 0
    assert lossy.lossy_settings(setting) == {"n_expert_used": 1, "drop_cold_frac": 0.5}


def test_batched_scoring_is_refused_for_cache_dependent_settings_before_any_load():
    drop = Config(moe_stream=True, cache_mb=64, drop_cold_frac=0.75)
    assert "drop_cold_frac" in quality.batch_refusal(drop)
    assert quality.batch_refusal(Config(n_expert_used=1)) == ""
    with pytest.raises(quality.QualityError, match="batch routes every position"):
        quality.score_text(drop, "some text to score", batched=16)


def test_reference_text_is_refused_when_not_a_regular_file_or_not_utf8(tmp_path):
    fifo = tmp_path / "text.fifo"
    os.mkfifo(fifo)
    box: dict[str, BaseException] = {}

    def read() -> None:
        try:
            quality.read_text(fifo)
        except BaseException as exc:
            box["e"] = exc

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(10)
    if t.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("reading a FIFO blocked instead of being refused")
    assert isinstance(box.get("e"), quality.QualityError) and "named pipe" in str(box["e"])
    with pytest.raises(quality.QualityError, match="folder"):
        quality.read_text(tmp_path)
    latin = tmp_path / "latin1.txt"
    latin.write_bytes("caf\xe9".encode("latin-1"))
    with pytest.raises(quality.QualityError, match=r"not UTF-8 text \(byte 3 is 0xe9"):
        quality.read_text(latin)
    blank = tmp_path / "blank.txt"
    blank.write_text("  \n")
    with pytest.raises(quality.QualityError, match="empty"):
        quality.read_text(blank)


def test_the_bundled_text_is_a_few_thousand_tokens_of_utf8():
    text = quality.read_text(quality.default_text_path())
    assert 2000 <= len(text.split()) <= 6000


def test_mcnemar_exact_p_values():
    assert choices.mcnemar_exact_p(0, 0) == 1.0
    assert choices.mcnemar_exact_p(3, 3) == 1.0
    # b=0, c=6: 2 * (1/2)^6
    assert choices.mcnemar_exact_p(0, 6) == pytest.approx(2 / 64)
    assert choices.mcnemar_exact_p(6, 0) == choices.mcnemar_exact_p(0, 6)
    # b=1, c=9: 2 * (1 + 10) / 1024
    assert choices.mcnemar_exact_p(1, 9) == pytest.approx(22 / 1024)


def test_question_files_accept_index_letter_or_text_answers():
    lines = [
        {"question": "q1", "choices": ["a", "b"], "answer": 1},
        {"question": "q2", "choices": ["a", "b", "c"], "answer": "c"},
        {"question": "q3", "choices": ["x", "y", "z"], "answer": "z"},
    ]
    qs = choices.parse_questions("\n".join(json.dumps(x) for x in lines) + "\n\n")
    assert [q.answer for q in qs] == [1, 2, 2]
    assert qs[0].prompt() == "Question: q1\nA. a\nB. b\nAnswer:"
    assert qs[1].continuations("letter") == [" A", " B", " C"]
    assert qs[2].continuations("text") == [" x", " y", " z"]


@pytest.mark.parametrize(("line", "message"), [
    ("not json", "line 1 is not JSON"),
    ("[1, 2]", "not an object"),
    ('{"question": "", "choices": ["a", "b"], "answer": 0}', "question"),
    ('{"question": "q", "choices": ["a"], "answer": 0}', "choices"),
    ('{"question": "q", "choices": ["a", "b"], "answer": 2}', "answer"),
    ('{"question": "q", "choices": ["a", "b"], "answer": true}', "answer"),
    ('{"question": "q", "choices": ["a", "b"], "answer": "C"}', "answer"),
])
def test_bad_question_lines_are_named(line, message):
    with pytest.raises(choices.QualityError, match=message):
        choices.parse_questions(line, "f.jsonl")


def test_the_bundled_question_set_parses():
    qs = choices.read_questions(choices.default_choices_path())
    assert len(qs) >= 20 and all(0 <= q.answer < len(q.choices) for q in qs)
