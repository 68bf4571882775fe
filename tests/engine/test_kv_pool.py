"""Conversations keep their KV state (issue 13): switching back costs only the new turn, even
after a restart, and nothing kept is ever trusted more than it deserves.

Real engine, embedded model (gemma-3-270m). n_ubatch=1 where logits are compared bit for bit:
llama.cpp's CPU kernels are not batch-invariant, so a restored state continued one token at a
time and a fresh prefill must compute every token alone to agree exactly.
"""

from __future__ import annotations

import logging
import os
import stat

import numpy as np
import pytest

from tests.logits import recorded_logits
from workbench.engine.requests import GenerateRequest, StopReason
from workbench.engine.session import Session

EXACT = {"n_ubatch": 1, "n_batch": 64}
A1, A2 = "Name three colours of the rainbow.", "Which of them is the warmest?"
B1, C1 = "Name three kinds of trees.", "Name three large cities."


def _turn(s: Session, text: str, conversation: str | None, logits: list | None = None,
          history: tuple = ()):
    """One turn after `history` (the result's history is the conversation after it)."""
    request = GenerateRequest(text=text, history=tuple(history), conversation=conversation)
    if logits is None:
        result = s.generate(request)
    else:
        with recorded_logits(s) as recorded:
            result = s.generate(request)
        logits.extend(recorded)
    assert result.ok, result.error
    return result


@pytest.fixture
def session(embedded_model_path, open_session):
    def make(exact: bool = False, **changes):
        # Exact (one token per compute pass) only where logits are compared: it is slow.
        return open_session(model=str(embedded_model_path), n_predict=12,
                            **(EXACT if exact else {}), **changes)
    return make


def test_a_b_a_continues_a_exactly_as_if_it_never_left(session):
    switched = session(exact=True)
    history_a = _turn(switched, A1, "1").history
    _turn(switched, B1, "2")
    logits_switched: list[np.ndarray] = []
    back = _turn(switched, A2, "1", logits_switched, history_a)
    assert back.summary.kv_source == "memory" and back.summary.kv_restore_seconds >= 0
    assert back.summary.n_reused > 0

    stayed = session(exact=True)
    stayed_a = _turn(stayed, A1, "1").history
    logits_stayed: list[np.ndarray] = []
    same = _turn(stayed, A2, "1", logits_stayed, stayed_a)
    assert same.summary.kv_restore_seconds == -1  # nothing was restored: it never left
    assert back.text == same.text
    assert back.summary.n_prompt == same.summary.n_prompt  # only the new turn was read
    assert len(logits_switched) == len(logits_stayed) > 0
    for a, b in zip(logits_switched, logits_stayed, strict=True):
        assert np.array_equal(a, b)


def test_a_restart_restores_from_disk(session, tmp_path):
    first = session(kv_dir=tmp_path)
    history = _turn(first, A1, "1").history
    continued = _turn(first, A2, "1", history=history)
    first_kv_dir_files = list(tmp_path.glob("*.kvstate"))
    assert first_kv_dir_files == []  # nothing spilled while it stays in the context

    before_restart = session(kv_dir=tmp_path)
    _turn(before_restart, A1, "1")
    before_restart.close()  # the app closes: the state goes to disk
    assert len(list(tmp_path.glob("*.kvstate"))) == 1

    restored = _turn(session(kv_dir=tmp_path), A2, "1", history=history)
    assert restored.summary.kv_source == "disk" and restored.summary.n_reused > 0
    assert restored.summary.n_prompt == continued.summary.n_prompt
    assert restored.text == continued.text


def test_raising_kv_disk_mb_from_0_keeps_states_on_disk_without_a_reopen(session, tmp_path):
    """kv_disk_mb is per-request: raised from 0 on an open session, the spill is made then."""
    s = session(kv_dir=tmp_path, kv_disk_mb=0)
    _turn(s, A1, "1")
    s.close()
    assert list(tmp_path.glob("*.kvstate")) == []  # off: nothing kept on disk
    s = session(kv_dir=tmp_path, kv_disk_mb=0)
    history = _turn(s, A1, "1").history
    s.set_session_settings(s.config.replace(kv_disk_mb=64))
    s.close()  # the app closes: the state goes to disk now
    assert len(list(tmp_path.glob("*.kvstate"))) == 1
    restored = _turn(session(kv_dir=tmp_path), A2, "1", history=history)
    assert restored.summary.kv_source == "disk"


def test_room_for_two_keeps_the_two_most_recent(session):
    s = session()
    histories = {}
    for key, text in (("1", A1), ("2", B1), ("3", C1)):
        histories[key] = _turn(s, text, key).history
    pool = s.kv_pool
    assert pool.get("1") is not None and pool.get("2") is not None
    # Room for two states, not three: the count bound (the byte bound is the same code path,
    # and states grow with every turn, which would make a byte budget for "two" a moving mark).
    pool.max_states = 2
    sources = {}
    for key, text in (("2", "And a fourth?"), ("3", "And a fourth?"), ("1", "And a fourth?")):
        sources[key] = _turn(s, text, key, history=histories[key]).summary.kv_source
    assert sources == {"2": "memory", "3": "memory", "1": "fresh"}


def test_eviction_waits_for_the_running_conversation_to_release(session):
    s = session()
    history_a = _turn(s, A1, "1").history
    _turn(s, B1, "2")
    seen = {}

    def evict_everything(event) -> None:
        if event.metrics.step == 1:  # on the engine thread, mid-generation
            s.kv_pool.set_budget(0)
            held = s.kv_pool.get("1")
            seen["during"] = (held is not None and held.checked_out and held.evicted
                              and held.data is not None)
            seen["other"] = s.kv_pool.get("2")

    result = s.generate(GenerateRequest(text=A2, history=history_a, conversation="1"),
                        on_token=evict_everything)
    assert result.ok and result.summary.kv_source == "memory"
    assert seen["during"], "a checked-out state was freed under a running generation"
    assert seen["other"] is None  # the idle one went at once
    _turn(s, C1, "3")  # "1" leaves the context: released, and only now freed
    assert s.kv_pool.get("1") is None


def test_a_decode_failure_discards_only_that_conversation(session, monkeypatch):
    s = session()
    history_a = _turn(s, A1, "1").history
    history_b = _turn(s, B1, "2").history
    history_a = _turn(s, A2, "1", history=history_a).history
    calls = {"n": 0}
    real = s._pick_token

    def invalid_at_third() -> int:
        calls["n"] += 1
        return s._p.model.n_vocab + 7 if calls["n"] == 3 else real()

    monkeypatch.setattr(s, "_pick_token", invalid_at_third)
    failed = s.generate(GenerateRequest(text="And a fourth?", history=history_b,
                                        conversation="2"))
    monkeypatch.setattr(s, "_pick_token", real)
    assert failed.stop_reason is StopReason.ERROR
    assert s.kv_pool.get("2") is None and s.kv_tokens == []
    assert _turn(s, "One more?", "1", history=history_a).summary.kv_source == "memory"


def test_forgetting_a_conversation_removes_its_states_in_memory_and_on_disk(session, tmp_path):
    s = session(kv_dir=tmp_path, kv_pool_mb=0)  # a state that leaves the context goes to disk
    _turn(s, A1, "1")
    _turn(s, B1, "2")
    assert [p.name.split(".")[0] for p in tmp_path.glob("*.kvstate")] == ["1"]
    s.forget_conversation("1")
    assert list(tmp_path.glob("*.kvstate")) == []
    # The conversation in the context: its state is dropped there too, so none is written when
    # it would leave (here: at close), and its next turn starts from an empty context.
    s.forget_conversation("2")
    assert s.kv_tokens == [] and s.kv_owner is None
    s.close()
    assert list(tmp_path.glob("*.kvstate")) == []


def test_a_kv_path_occupied_by_a_file_is_left_alone_and_every_turn_answers(session, tmp_path):
    occupied = tmp_path / "kv"
    occupied.write_bytes(b"not a folder")
    s = session(kv_dir=occupied, kv_pool_mb=0)  # every state that leaves tries the disk
    for key, text in (("1", A1), ("2", B1), ("1", A2)):
        _turn(s, text, key)
    s.close()
    assert occupied.read_bytes() == b"not a folder"


@pytest.mark.timeout(600)  # a FIFO read would block: fail, not hang
def test_junk_in_the_kv_folder_is_survived_and_left_alone(session, tmp_path):
    s = session(kv_dir=tmp_path, kv_pool_mb=0, kv_disk_mb=1)  # a budget that must evict
    fifo = s.kv_pool.spill.path("1")  # exactly where conversation 1's state would go
    os.mkfifo(fifo)  # reading it would block forever
    folder = tmp_path / "junk.kvstate"
    folder.mkdir()
    (tmp_path / "9.kvstate").write_bytes(b"garbage")
    for key, text in (("1", A1), ("2", B1), ("1", A2)):  # switches: restores, spills, evicts
        _turn(s, text, key)
    # The listing (the telemetry panel's) reads file headers: the FIFO is not among them.
    assert {h.key for h in s.kv_pool.listing()} <= {"1", "2"}
    s.close()
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and folder.is_dir()


def test_a_load_time_change_restores_nothing_and_says_why(session, tmp_path, caplog):
    first = session(kv_dir=tmp_path)
    history = _turn(first, A1, "1").history
    first.close()
    other = session(kv_dir=tmp_path, n_ctx=2048)  # another signature
    with caplog.at_level(logging.INFO, logger="workbench.kv_spill"):
        result = _turn(other, A2, "1", history=history)
    assert result.summary.kv_source == "fresh" and result.summary.n_reused == 0
    assert "made by another model, other load-time settings" in caplog.text


@pytest.mark.parametrize("damage", ["truncated", "flipped", "empty", "garbage", "other-key"])
def test_a_damaged_state_file_falls_back_to_reading_the_conversation(session, tmp_path,
                                                                     caplog, damage):
    first = session(kv_dir=tmp_path)
    history = _turn(first, A1, "1").history
    first.close()
    (path,) = tmp_path.glob("*.kvstate")
    blob = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(blob[: len(blob) // 2])
    elif damage == "flipped":
        middle = len(blob) // 2
        path.write_bytes(blob[:middle] + bytes([blob[middle] ^ 0xFF]) + blob[middle + 1:])
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "garbage":
        path.write_bytes(np.random.default_rng(1).bytes(4096))
    else:  # a valid file of conversation 2, renamed to be conversation 1's
        path.write_bytes(blob.replace(b'"key": "1"', b'"key": "2"', 1))
    with caplog.at_level(logging.WARNING, logger="workbench.kv_spill"):
        result = _turn(session(kv_dir=tmp_path), A2, "1", history=history)
    assert result.summary.kv_source == "fresh" and "refused" in caplog.text
    fresh = _turn(session(), A2, None, history=history)
    assert result.text == fresh.text
    assert not path.exists()  # a file that can never become valid is removed


def test_a_full_disk_skips_the_spill_and_the_conversation_goes_on(session, tmp_path, caplog,
                                                                  monkeypatch):
    from tests.full_disk import fill_the_disk

    s = session(kv_dir=tmp_path)
    history = _turn(s, A1, "1").history
    fill_the_disk(monkeypatch, budget=4096)
    with caplog.at_level(logging.WARNING, logger="workbench.kv_spill"):
        s.close()  # the spill of "1" fails: logged, nothing half-written is left
    assert "could not keep the KV state of conversation 1 on disk" in caplog.text
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    after = _turn(session(kv_dir=tmp_path), A2, "1", history=history)
    assert after.summary.kv_source == "fresh"


def test_the_forecast_counts_exactly_what_the_turn_reads(session):
    s = session()
    draft = s.forecast(GenerateRequest(text=A1, conversation="1"))
    assert draft.n_reused == 0 and draft.seconds == -1  # no rate measured yet: unmeasured
    first = _turn(s, A1, "1")
    assert first.summary.n_prompt == draft.n_to_process
    history_a = first.history
    _turn(s, B1, "2")
    # Back in A, with A's state kept in the pool: only the new turn is to be read.
    ahead = s.forecast(GenerateRequest(text=A2, history=history_a, conversation="1"))
    assert ahead.n_reused > 0 and ahead.seconds > 0
    back = _turn(s, A2, "1", history=history_a)
    assert back.summary.n_prompt == ahead.n_to_process
    assert back.summary.n_reused == ahead.n_reused


def test_the_forecast_reads_a_state_kept_on_disk(session, tmp_path):
    first = session(kv_dir=tmp_path)
    history = _turn(first, A1, "1").history
    first.close()
    second = session(kv_dir=tmp_path)
    ahead = second.forecast(GenerateRequest(text=A2, history=history, conversation="1"))
    restored = _turn(second, A2, "1", history=history)
    assert restored.summary.kv_source == "disk"
    assert (restored.summary.n_prompt, restored.summary.n_reused) == (ahead.n_to_process,
                                                                    ahead.n_reused)


def test_a_state_written_by_another_process_is_restored(session, tmp_path,
                                                        embedded_model_path):
    """The restart as it really happens: the first session lives and dies in another process."""
    import json
    import subprocess
    import sys

    script = f"""
import json, sys
from workbench.config import Config
from workbench.engine.requests import GenerateRequest
from workbench.engine.session import Session
from pathlib import Path
s = Session.open(Config(model={str(embedded_model_path)!r}, n_predict=12, n_threads=2),
                 kv_dir=Path({str(tmp_path)!r}))
r = s.generate(GenerateRequest(text={A1!r}, conversation="1"))
assert r.ok, r.error
history = list(r.history)
s.close()
print(json.dumps(history))
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    history = json.loads(proc.stdout.strip().splitlines()[-1])
    restored = _turn(session(kv_dir=tmp_path), A2, "1", history=history)
    assert restored.summary.kv_source == "disk" and restored.summary.n_reused > 0
    here = session()
    here_a = _turn(here, A1, "1").history
    assert restored.text == _turn(here, A2, "1", history=here_a).text


def test_the_metrics_file_says_how_each_prompt_was_served(session, tmp_path):
    from workbench.engine.metrics_reader import read_metrics_csv
    from workbench.engine.sinks import CsvMetricsSink

    sink = CsvMetricsSink(tmp_path / "run.csv")
    s = session(sink=sink)
    history_a = _turn(s, A1, "1").history
    _turn(s, B1, "2")
    _turn(s, A2, "1", history=history_a)
    s.close()
    sink.close()
    summaries = read_metrics_csv(tmp_path / "run.csv").summaries
    assert [x["kv_source"] for x in summaries] == ["fresh", "fresh", "memory"]
    assert summaries[0]["kv_restore_s"] == -1 and summaries[2]["kv_restore_s"] >= 0
