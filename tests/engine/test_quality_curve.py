"""`bench curve`: one command scores every lossy lever's rungs at a cache of about two tokens'
expert demand, on the tiny synthetic MoE (top-2 over 8 experts, 4 layers) with few positions."""

from __future__ import annotations

import math

import pytest

from workbench.bench.curve import curve_arms, curve_base, run_curve
from workbench.bench.quality import default_text_path
from workbench.cli.main import main
from workbench.moe.layout import expert_tensors, read_model_facts

pytestmark = pytest.mark.slow


def test_the_curve_has_every_rung_at_two_tokens_demand(tiny_moe_path):
    facts = read_model_facts(tiny_moe_path)
    # One token's demand counted here from the tensors: k experts of every MoE layer.
    strides: dict[int, int] = {}
    for t in expert_tensors(tiny_moe_path):
        strides[t.layer] = strides.get(t.layer, 0) + t.expert_stride
    demand = facts.n_expert_used * sum(strides.values())
    base = curve_base(tiny_moe_path, threads=1, tokens=16)
    assert base.moe_stream and not base.cache_auto
    assert base.cache_mb == math.ceil(2 * demand / (1 << 20))
    k = facts.n_expert_used
    assert k == 2  # so k-1 and k/2 are both 1: one top-k arm, not two
    assert list(curve_arms(tiny_moe_path)) == [
        "lossless", "drop 0.5", "drop 0.75", "drop 1", "top-k 1",
        "substitute 0.1", "substitute 0.15", "substitute 0.2", "substitute 0.3"]

    curve = run_curve(tiny_moe_path, default_text_path(), tokens=16, threads=1)
    points = {p.arm: p for p in curve.points}
    lossless = points["lossless"].report
    # The lossless stream at this budget is the reference's model read another way: KL exactly 0.
    assert lossless.figures.kl_mean.estimate == 0 and lossless.figures.agreement.estimate == 1
    assert lossless.setting.settings["cache_mb"] == base.cache_mb
    assert points["lossless"].pareto  # nothing is closer than KL 0
    # Each arm ran with its lever and the shared budget, and its reads were measured.
    for arm, lever in (("drop 0.75", "drop_cold_frac"), ("top-k 1", "n_expert_used"),
                       ("substitute 0.2", "expert_substitute")):
        settings = points[arm].report.setting.settings
        assert lever in settings and settings["cache_mb"] == base.cache_mb
    assert all(p.report.n_scored == 16 and p.mib_per_token > 0 for p in curve.points)
    # The sensitivity check: one expert instead of two changes the distributions.
    assert points["top-k 1"].report.figures.kl_mean.estimate > 0
    # The front is the non-dominated set of (tok/s, KL).
    for p in curve.points:
        dominated = any(q.tok_s.estimate >= p.tok_s.estimate
                        and q.report.figures.kl_mean.estimate <= p.report.figures.kl_mean.estimate
                        and (q.tok_s.estimate > p.tok_s.estimate
                             or q.report.figures.kl_mean.estimate
                             < p.report.figures.kl_mean.estimate)
                        for q in curve.points if q is not p)
        assert p.pareto == (not dominated), p.arm


def test_bench_curve_prints_the_table(tiny_moe_path, tmp_path, capsys):
    text = tmp_path / "t.txt"
    text.write_text("two white flashes, then dark; two white flashes, then dark; and again")
    assert main(["bench", "curve", "-m", str(tiny_moe_path), "--text", str(text), "-n", "12",
                 "-t", "1"]) == 0
    out = capsys.readouterr().out
    assert "about 2 tokens' demand" in out and "MiB read/token" in out
    rows = out.splitlines()[3:]  # the caption, a blank line, the header, then one row per arm
    assert [r[:len(a)] for r, a in zip(rows, curve_arms(tiny_moe_path), strict=True)] == \
        list(curve_arms(tiny_moe_path))
    assert rows[0].rstrip().endswith("*")  # the lossless arm is on the front
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"\xff\xfe not utf-8")
    assert main(["bench", "curve", "-m", str(tiny_moe_path), "--text", str(bad)]) == 1
    assert "not UTF-8" in capsys.readouterr().err
