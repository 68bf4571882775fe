"""`bench drop`'s plumbing on the tiny synthetic MoE (no balloon, no timing asserted).

Until the drop setting lands, the drop arm cannot drop; the test gives both arms the undropped
configuration, which pins what the plumbing must report for two identical greedy runs: the same
tokens, the same bytes read, a reads ratio of exactly 1 and nothing avoided."""

from __future__ import annotations

from workbench.bench import drop


def test_without_the_setting_the_bench_says_so_and_measures_nothing(tiny_moe_path,
                                                                    monkeypatch):
    monkeypatch.setattr(drop, "has_drop_setting", lambda: False)  # a build before dropping
    report = drop.drop_bench(tiny_moe_path, frac=0.75, leave_mib=0, floor_mb=0, repeats=1,
                             n_tokens=4, threads=2, balloon=False, log=lambda _: None)
    assert report.lines() == [f"bench drop: {report.note}"] and "drop_cold_frac" in report.note


def test_identical_arms_agree_token_for_token_and_byte_for_byte(tiny_moe_path, monkeypatch):
    monkeypatch.setattr(drop, "has_drop_setting", lambda: True)
    real = drop._config
    caches: list[int | None] = []

    def undropped(model, threads, n, floor, _frac, cache_mb=None):
        caches.append(cache_mb)
        return real(model, threads, n, floor, 0.0, cache_mb)

    monkeypatch.setattr(drop, "_config", undropped)
    logged: list[str] = []
    report = drop.drop_bench(tiny_moe_path, frac=0.75, leave_mib=0, floor_mb=0, repeats=2,
                             n_tokens=12, threads=2, balloon=False, log=logged.append)
    assert len(report.runs["off"]) == len(report.runs["drop"]) == 2
    assert logged[0] == "drop: no balloon (plumbing only)"
    off, other = report.runs["off"][0], report.runs["drop"][0]
    assert off.tokens == other.tokens and len(off.tokens) > 0
    assert off.read_bytes == other.read_bytes > 0
    lines = report.lines()
    assert lines[1].startswith("drop read MiB/token ratio=1.000 ci95=[1.000, 1.000]")
    assert "same_token_pct=100.0" in lines[3]
    assert "measured_pct=0.0" in lines[4]
    # The route records carry the router's weights: the replay predicts, and with identical
    # (undropped) arms it predicts nothing avoided.
    assert "no router weights" not in lines[4] and "replay_predicted_pct=0.0" in lines[4]
    # The first open sizes the cache automatically; every later one holds that size, so the
    # two arms of a pair compare the same cache (sized per open, it followed the memory
    # available at each moment).
    first = report.runs["off"][0].budget_bytes // drop.MIB
    assert caches == [None, first, first, first]
    assert all(r.budget_bytes == report.runs["off"][0].budget_bytes
               for runs in report.runs.values() for r in runs)


def test_agreement_counts_positions_and_the_common_prefix():
    assert drop.agreement([1, 2, 3, 4], [1, 2, 9, 4]) == (0.75, 2)
    assert drop.agreement([1, 2, 3, 4], [1, 2]) == (0.5, 2)
    assert drop.agreement([], [1]) == (1.0, 0)
