"""The lean streamed load, on a real llama.cpp load of a generated MoE that is mostly experts.

Bytes read from storage are /proc/self/io read_bytes around the load, the model's pages dropped
from the page cache first (posix_fadvise DONTNEED). The negative controls are the same load with
the lean load off and a resident load: both read the whole file.
"""

from __future__ import annotations

import ctypes
import json
import mmap
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from tests.logits import recorded_logits
from workbench.backend.native import NativeLibraryError
from workbench.bench.load_probe import io_read_bytes
from workbench.bench.matrix import drop_page_cache
from workbench.cli.chat import streaming_banner
from workbench.engine.requests import GenerateRequest
from workbench.moe.layout import TensorInfo, expert_tensors, read_model_facts, read_tensors
from workbench.moe.lean_load import LeanLoadReport, lean_load, patched_entries, restore
from workbench.moe.synth import write_synthetic_moe

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def expert_heavy_moe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """~50 MiB, of which ~1 MiB is not experts: a whole-file read is unmistakable."""
    out = tmp_path_factory.mktemp("lean") / "experts.gguf"
    return write_synthetic_moe(out, arch="qwen3moe", size="tiny", n_expert=32, n_ff_exp=256)[0]


def _read_during(load) -> tuple[int, object]:
    before = io_read_bytes()
    result = load()
    after = io_read_bytes()
    assert before >= 0, "/proc/self/io is needed to count the bytes a load reads"
    return after - before, result


def _open(open_session, model: Path, **changes):
    drop_page_cache(model)
    return _read_during(lambda: open_session(model=str(model), chat_template=False, n_ctx=256,
                                             n_predict=8, **changes))


def test_a_streamed_load_reads_the_dense_part_not_the_file(open_session, expert_heavy_moe):
    size = expert_heavy_moe.stat().st_size
    experts = sum(t.n_bytes for t in expert_tensors(expert_heavy_moe))
    assert experts > 0.9 * size

    lean_read, lean = _open(open_session, expert_heavy_moe, moe_stream=True)
    info = lean.streaming.info
    assert info.lean_load and lean.run_info.settings["lean_load"] is True
    assert "lean load:" in info.load_note
    assert lean.streaming.lean.blanked_bytes > 0.9 * experts
    assert "lean load:" in streaming_banner(lean)
    assert not any("lean load" in w for w in lean.warnings)
    lean.close()
    # Dense weights and metadata plus the kernel's readahead around them; never the experts.
    assert lean_read < 0.5 * size, f"the lean load read {lean_read} of {size} bytes"

    populate_read, full = _open(open_session, expert_heavy_moe, moe_stream=True, lean_load=False)
    assert full.streaming.info.lean_load is False and full.streaming.info.load_note == ""
    assert full.run_info.settings["lean_load"] is False
    full.close()
    assert populate_read > 0.9 * size, f"the populating load read only {populate_read} bytes"


def test_the_interposition_ends_with_the_load(open_session, expert_heavy_moe):
    session = open_session(model=str(expert_heavy_moe), chat_template=False, n_ctx=256,
                           n_predict=8, moe_stream=True)
    assert session.streaming.info.lean_load
    assert patched_entries() == 0
    session.close()
    # libllama's mmap works with MAP_POPULATE again: a resident load reads the whole file.
    read, resident = _open(open_session, expert_heavy_moe)
    resident.close()
    assert read > 0.9 * expert_heavy_moe.stat().st_size


def test_lean_output_is_bit_identical_to_resident(open_session, expert_heavy_moe):
    request = GenerateRequest(text="abc", n_predict=12, new_chat=True)
    runs = {}
    for name, changes in (("resident", {}), ("lean", {"moe_stream": True}),
                          ("lean_mmap", {"moe_stream": True, "dense_weights": "mmap"}),
                          ("populate", {"moe_stream": True, "lean_load": False})):
        s = open_session(model=str(expert_heavy_moe), chat_template=False, n_ctx=256,
                         n_predict=12, **changes)
        with recorded_logits(s) as logits:
            result = s.generate(request)
        assert result.ok, result.error
        runs[name] = (result.text, np.stack(logits))
        s.close()
    for name in ("lean", "lean_mmap", "populate"):
        assert runs[name][0] == runs["resident"][0], name
        assert np.array_equal(runs[name][1], runs["resident"][1]), name


def test_dense_weights_left_on_the_mapping_are_prefetched_not_blanked(open_session,
                                                                     expert_heavy_moe):
    session = open_session(model=str(expert_heavy_moe), chat_template=False, n_ctx=256,
                           n_predict=8, moe_stream=True, dense_weights="mmap")
    lean = session.streaming.lean
    experts = sum(t.n_bytes for t in expert_tensors(expert_heavy_moe))
    dense = sum(t.n_bytes for t in read_tensors(expert_heavy_moe)) - experts
    assert lean.effective and lean.blanked_bytes <= experts
    assert lean.willneed_bytes >= dense  # the dense weights are read ahead, the experts not


def test_restore_maps_the_file_back_under_a_blanked_tensor(tmp_path):
    page = mmap.PAGESIZE
    data = bytes(range(256)) * (4 * page // 256)
    path = tmp_path / "weights.bin"
    path.write_bytes(data)
    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    try:
        anchor = ctypes.c_char.from_buffer(m)
        base = ctypes.addressof(anchor)
        m[page:3 * page] = bytes(2 * page)  # what a blank leaves: zeros, file pages gone
        report = LeanLoadReport(armed=True, bases=(base,))
        # A tensor straddling pages: only the pages wholly inside it were blanked.
        tensor = TensorInfo(name="t", shape=(1,), ggml_type="F32", n_elements=1,
                            n_bytes=2 * page + 40, shard=0, path=path, offset=page - 20)
        assert restore(report, [path], [tensor]) == 2 * page
        assert m[:] == data and report.restored_bytes == 2 * page
        del anchor
    finally:
        m.close()
    with pytest.raises(NativeLibraryError, match="no lean mapping"):
        restore(LeanLoadReport(armed=True, bases=(0,)), [path], [tensor])


def test_a_session_that_cannot_arm_loads_the_normal_way_and_says_so(open_session,
                                                                    expert_heavy_moe, tmp_path):
    unrelated = tmp_path / "other.gguf"
    unrelated.write_bytes(b"GGUF")
    # A load already armed on this thread (for another file) makes the session's arming fail.
    with lean_load([unrelated], []):
        read, session = _open(open_session, expert_heavy_moe, moe_stream=True)
    assert not session.streaming.info.lean_load
    assert session.run_info.settings["lean_load"] is False
    assert any("lean load unavailable (a lean load is already armed" in w
               for w in session.warnings)
    assert "read the whole model file" in streaming_banner(session)
    assert read > 0.9 * expert_heavy_moe.stat().st_size  # the normal, populating load
    result = session.generate(GenerateRequest(text="abc", n_predict=4, new_chat=True))
    assert result.ok, result.error


def test_a_failure_to_arm_is_reported_and_the_load_runs_normally(tmp_path):
    with lean_load([tmp_path / "absent.gguf"], []) as report:
        assert patched_entries() == 0
    assert not report.armed and not report.effective
    assert "cannot stat" in report.reason and "absent.gguf" in report.reason
    assert "read the whole model file" in report.note


def test_arming_is_per_thread_and_not_nested(expert_heavy_moe):
    facts = read_model_facts(expert_heavy_moe)
    experts = expert_tensors(expert_heavy_moe)
    other: list[int] = []
    with lean_load(facts.shards, experts) as outer:
        assert outer.armed and patched_entries() > 0
        with lean_load(facts.shards, experts) as inner:
            pass
        assert not inner.armed and "already armed" in inner.reason
        # Another thread arms too; the entries stay patched until the last one ends.
        worker = threading.Thread(target=lambda: other.append(_arm_and_count(facts, experts)))
        worker.start()
        worker.join()
        assert other == [1] and patched_entries() > 0
    assert patched_entries() == 0


def _arm_and_count(facts, experts) -> int:
    with lean_load(facts.shards, experts) as report:
        pass
    return int(report.armed)


@pytest.mark.parametrize("arm", ["lean", "populate"])
def test_peak_rss_of_a_fresh_process_follows_the_dense_part(expert_heavy_moe, arm):
    drop_page_cache(expert_heavy_moe)
    out = subprocess.run(
        [sys.executable, "-m", "workbench.bench.load_probe", str(expert_heavy_moe), arm],
        cwd=REPO, capture_output=True, text=True, check=True, timeout=300)
    probe = json.loads(out.stdout.strip().splitlines()[-1])
    grown = probe["peak_rss_bytes"] - probe["base_rss_bytes"]
    size = expert_heavy_moe.stat().st_size
    if arm == "lean":
        assert probe["lean_effective"] and grown < 0.4 * size, probe
    else:
        assert not probe["lean_effective"] and grown > 0.9 * size, probe


def test_the_bench_arm_prints_its_figures(expert_heavy_moe):
    from workbench.bench.stream_load import load_cost

    logged: list[str] = []
    # No balloon here (the figure is for the lead's quiet machine): leave more than there is.
    line = load_cost(expert_heavy_moe, leave_mib=1 << 30, repeats=1, threads=2,
                     log=logged.append)
    assert line.startswith("stream load lean/dense load_time=")
    assert "populate/dense" in line and "goal: lean/dense load_time and peak_rss <= 1.5" in line
    assert not any("not in effect" in entry for entry in logged)
