"""The stall explainer on real runs that provoke each cause (the real engine, synthetic MoE
models, the embedded chat model), checked on the provoked token against an unprovoked one.

Provocations are safe on a shared machine: the cache is emptied by shrinking its budget for
one token; memory pressure is the process's own model pages taken back with
madvise(MADV_PAGEOUT) (no balloon, nothing allocated); contention is two busy processes for at
most a few seconds. The machine's own load makes every token's timing noisy, so the checks are
on each provoked token's figures and named causes, not on which tokens came out slowest.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workbench.bench.stall_report import expert_bytes_of
from workbench.bench.stalls import Prefill, explain_answer, explain_token
from workbench.engine.requests import GenerateRequest

pytestmark = pytest.mark.slow

MADV_PAGEOUT = 21  # linux/mman.h, since Linux 5.4


@pytest.fixture(scope="module")
def fault_moe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """~140 MiB, 125 of it experts (48 of 2.6 MiB, top-8, one layer): a token routes a sixth of
    the experts, so paging the file out and decoding one token leaves most of it out."""
    from workbench.moe.synth import write_synthetic_moe

    out = tmp_path_factory.mktemp("models") / "fault-moe.gguf"
    return write_synthetic_moe(out, size="bench", n_layer=1, n_expert=48)[0]


def _generate(session, n: int, on_token) -> list[dict]:
    rows: list[dict] = []

    def collect(event) -> None:
        rows.append({name: getattr(event.metrics, name) for name in event.metrics.__slots__})
        on_token(len(rows))

    result = session.generate(GenerateRequest(text="Tell me about rivers.", n_predict=n,
                                              new_chat=True), on_token=collect)
    assert result.ok, result.error
    return rows


def _keys(causes) -> set[str]:
    return {c.key for c in causes}


def page_out(path: Path) -> int:
    """Give the kernel back this process's pages of `path` (MADV_PAGEOUT on each mapping);
    returns the bytes advised."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    target = str(path.resolve())
    advised = 0
    with open("/proc/self/maps") as maps:
        for line in maps:
            parts = line.split(maxsplit=5)
            if len(parts) == 6 and parts[5].strip() == target:
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                if libc.madvise(lo, hi - lo, MADV_PAGEOUT) == 0:
                    advised += hi - lo
    return advised


def test_an_emptied_cache_is_named_as_experts_read(tiny_moe_path, open_session):
    s = open_session(model=str(tiny_moe_path), moe_stream=True, cache_mb=64, n_threads=1)
    expert = expert_bytes_of(tiny_moe_path)
    # Shrink the cache to nothing after token 12 and give it back after token 13: the budget
    # change evicts at once, so token 13 misses every expert it routes.
    def provoke(n: int) -> None:
        if n == 12:
            s.set_cache_budget_mib(0.01)
        elif n == 13:
            s.set_cache_budget_mib(64)

    rows = _generate(s, 20, provoke)
    provoked = explain_token(rows, 12, expert_bytes=expert)
    assert "reads" in _keys(provoked), provoked
    reads = next(c for c in provoked if c.key == "reads")
    assert reads.figures["read_mib"] * (1 << 20) == rows[12]["read_bytes"] > 0
    # top-2 of 8 experts in 4 layers: 8 routed, all of them read again
    assert reads.figures["experts"] == 8
    assert reads.text == f"8 experts read from disk ({rows[12]['read_bytes'] / (1 << 20):.1f} MiB)"
    # Negative control: the tokens before, served from a warm cache, read nothing unusual.
    for i in range(3, 11):
        assert "reads" not in _keys(explain_token(rows, i, expert_bytes=expert)), (i, rows[i])


def test_paged_out_weights_are_named_as_faults_and_memory_pressure(fault_moe, open_session):
    s = open_session(model=str(fault_moe), n_threads=1)
    advised: list[int] = []
    rows = _generate(s, 16, lambda n: advised.append(page_out(fault_moe)) if n == 10 else None)
    assert advised and advised[0] > 100 << 20
    provoked = _keys(explain_token(rows, 10))
    assert {"faults", "memory"} <= provoked, explain_token(rows, 10)
    assert rows[10]["majflt"] > 0
    assert rows[9]["rss_mib"] - rows[10]["rss_mib"] >= 32
    # Negative control: the tokens before the page-out faulted nothing and lost no memory.
    for i in range(3, 10):
        assert not {"faults", "memory"} & _keys(explain_token(rows, i)), (i, rows[i])


def test_a_busy_second_process_is_named_as_contention(embedded_model_path, open_session):
    s = open_session(model=str(embedded_model_path), n_threads=2)
    busy: list[subprocess.Popen] = []
    spin = "import time\nend = time.time() + 8\nwhile time.time() < end: pass\n"

    def provoke(n: int) -> None:
        if n == 8:  # two spinning processes, bounded to 8 s each, stopped after token 14
            busy.extend(subprocess.Popen([sys.executable, "-c", spin]) for _ in range(2))
            time.sleep(0.3)
        elif n == 14:
            for p in busy:
                p.kill()

    try:
        rows = _generate(s, 20, provoke)
    finally:
        for p in busy:
            p.kill()
            p.wait(10)
    named = [i for i in range(8, 14) if "contention" in _keys(explain_token(rows, i, threads=2))]
    assert named, [(r["wall_ms"], r["cpu_ms"]) for r in rows[8:14]]
    cause = next(c for c in explain_token(rows, named[0], threads=2) if c.key == "contention")
    assert cause.figures["cores"] <= 0.6 * 2
    assert cause.figures["cpu_ms"] == pytest.approx(rows[named[0]]["cpu_ms"])


def test_the_first_token_after_a_long_prefill(embedded_model_path, open_session):
    s = open_session(model=str(embedded_model_path), n_threads=2)
    text = " ".join(["The river runs past the old mill and under the stone bridge."] * 40)
    result = s.generate(GenerateRequest(text=text, n_predict=6, new_chat=True))
    assert result.ok and result.summary is not None
    prefill = Prefill(result.summary.n_prompt, result.summary.prefill_seconds)
    assert prefill.n_prompt >= 400
    rows = [{"step": i + 1, "wall_ms": 1.0} for i in range(6)]  # the step is what it keys on
    causes = explain_token(rows, 0, prefill=prefill)
    assert [c.key for c in causes] == ["prefill"]
    assert f"after prefilling {prefill.n_prompt} prompt tokens" in causes[0].text
    assert explain_token(rows, 1, prefill=prefill) == ()


def test_explain_answer_runs_on_a_real_streamed_answer(tiny_moe_path, open_session):
    """End to end over a real answer: every slow token gets at least one cause, and the text
    lines carry the figures."""
    s = open_session(model=str(tiny_moe_path), moe_stream=True, cache_mb=1, n_threads=1)
    rows = _generate(s, 24, lambda n: None)
    e = explain_answer(rows, expert_bytes=expert_bytes_of(tiny_moe_path), threads=1)
    assert e.n_tokens == 24 and e.median_ms > 0
    for token in e.slow:
        assert token.causes and token.line(e.median_ms).startswith(f"token {token.index + 1}: ")
    assert os.path.exists(tiny_moe_path)
