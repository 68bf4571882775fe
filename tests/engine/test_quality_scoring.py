"""Quality scoring on the tiny synthetic streamed MoE (its experts dominate the output).

Lossless settings must score KL exactly 0 with the same argmax at every position (n_ubatch 1:
llama.cpp's kernels are not batch-invariant, and speculation verifies in batches); a top-k 1
override must score KL > 0 (the sensitivity check); and a scorer that read the reference twice
instead of running the setting must fail that check (the negative control)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from workbench.bench import choices, quality
from workbench.config import Config
from workbench.moe.cache_policies import POLICIES

# Repetitive on purpose: the n-gram drafter proposes, and parts of its drafts match the text.
# (The tiny model's vocabulary is nearly a character each: this is ~60 positions.)
TEXT = "two white flashes, then dark; two white flashes, then dark; two white"


def _config(model: Path, **changes: object) -> Config:
    return Config(model=str(model), chat_template=False, n_ctx=256, n_threads=1, n_batch=32,
                  n_ubatch=1).replace(**changes)


def _streamed(model: Path, **changes: object) -> Config:
    return _config(model, moe_stream=True, cache_mb=2, o_direct=False, **changes)


def assert_lossless(report: quality.QualityReport) -> None:
    f = report.figures
    assert report.n_scored > 30
    assert (report.series.kl == 0.0).all(), f"KL {report.series.kl.max()} at some position"
    assert (report.series.argmax_setting == report.series.argmax_reference).all()
    assert f.flips == 0 and f.ppl_ratio.estimate == 1.0


def assert_sensitive(report: quality.QualityReport) -> None:
    f = report.figures
    assert f.kl_mean.estimate > 0 and f.kl_mean.low > 0, f"KL {f.kl_mean}"
    assert f.ppl_ratio.estimate != 1.0


LOSSLESS = {
    "streamed, cache off": {"moe_stream": True},
    **{f"policy {p}": {"cache_policy": p} for p in POLICIES},
    "token-cycle guard": {"cache_guard": True},
    "prefetch": {"prefetch": True},
}


@pytest.mark.parametrize("variant", list(LOSSLESS))
def test_lossless_streaming_settings_score_kl_exactly_zero(tiny_moe_path, variant):
    changes = LOSSLESS[variant]
    cfg = (_config(tiny_moe_path, **changes) if variant.startswith("streamed")
           else _streamed(tiny_moe_path, **changes))
    report = quality.score_text(cfg, TEXT)
    assert_lossless(report)
    assert report.setting.forced.read_bytes > 0  # it really streamed
    assert report.reference.forced.read_bytes == -1  # the reference was read whole
    assert report.setting.tok_s.estimate > 0 and report.kl_ms_per_position > 0


def test_speculative_decoding_scores_kl_exactly_zero(tiny_moe_path):
    report = quality.score_text(_streamed(tiny_moe_path, spec="ngram", spec_draft_max=8), TEXT)
    assert report.mode.startswith("speculative")
    forced = report.setting.forced
    assert forced.decodes < forced.n_positions, "no draft was ever accepted: nothing verified"
    assert_lossless(report)


def test_warm_start_scores_kl_exactly_zero(tiny_moe_path, tmp_path):
    cfg = _streamed(tiny_moe_path, cache_warm_start=True)
    quality.score_text(cfg, TEXT, warm_dir=tmp_path)  # leaves the routing frequencies
    assert any(tmp_path.iterdir()), "the first run kept nothing to warm-start from"
    assert_lossless(quality.score_text(cfg, TEXT, warm_dir=tmp_path))


def test_batched_scoring_of_a_lossless_setting_at_n_ubatch_1_is_exact(tiny_moe_path):
    report = quality.score_text(_streamed(tiny_moe_path), TEXT, batched=16)
    assert report.mode.startswith("batched")
    assert report.setting.forced.decodes < report.n_scored
    assert_lossless(report)


def test_a_top_k_1_override_scores_kl_above_zero(tiny_moe_path):
    report = quality.score_text(_streamed(tiny_moe_path, n_expert_used=1), TEXT)
    assert report.setting.settings["n_expert_used"] == 1
    assert "n_expert_used" not in report.reference.settings
    assert_sensitive(report)


def test_the_sensitivity_check_fails_if_the_scorer_reads_the_reference_twice(
        tiny_moe_path, monkeypatch):
    """Negative control: a scorer whose setting run secretly opens the reference's settings
    again must not pass the top-k 1 check."""
    real_opened = quality.opened
    first: list[Config] = []

    @contextlib.contextmanager
    def reference_twice(cfg: Config, **options: object):
        first.append(cfg)
        with real_opened(first[0], **options) as session:
            yield session

    monkeypatch.setattr(quality, "opened", reference_twice)
    report = quality.score_text(_streamed(tiny_moe_path, n_expert_used=1), TEXT)
    with pytest.raises(AssertionError, match="KL"):
        assert_sensitive(report)


def test_a_long_text_is_cut_to_the_context_with_a_note(tiny_moe_path):
    report = quality.score_text(_config(tiny_moe_path), TEXT * 6)  # ~420 tokens, n_ctx 256
    assert report.n_scored == 256 and report.n_text_tokens > 257
    assert any("cut to the context" in n for n in report.notes)
    capped = quality.score_text(_config(tiny_moe_path), TEXT, max_tokens=10)
    assert capped.n_scored == 10 and any("--tokens" in n for n in capped.notes)


def test_the_bundled_questions_score_by_letter_and_by_text(tiny_moe_path):
    qs = choices.read_questions(choices.default_choices_path())[:2]
    same = choices.score_choices(_streamed(tiny_moe_path), qs, by="letter")
    assert same.setting.scores == same.reference.scores  # lossless: the same log-probs
    assert same.lost == same.gained == [] and same.p_value == 1.0
    lossy = choices.score_choices(_streamed(tiny_moe_path, n_expert_used=1), qs, by="text")
    assert lossy.setting.scores != lossy.reference.scores
    acc = lossy.accuracy(lossy.setting)
    assert 0.0 <= acc.low <= acc.estimate <= acc.high <= 1.0
    assert "McNemar exact p" in "\n".join(lossy.lines())
