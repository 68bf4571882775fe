"""Export to Markdown (the branch on screen) and JSON (the whole tree), and import back."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from workbench.engine.metrics import ModelIdentity, RunInfo, RunSummary
from workbench.store import MessageStats, Store, format_stats_line


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(tmp_path / "w.db") as s:
        yield s


def _summary(**changes: object) -> RunSummary:
    base = dict(turn=0, n_generated=40, gen_seconds=2.0, n_prompt=12, n_reused=30, n_past=82,
                n_ctx=4096, load_seconds=0.5, prefill_seconds=0.25, ttft_seconds=0.3,
                majflt_per_token=0.0, cpu_s_per_token=0.05, loop_overhead_s_per_token=0.001,
                stop_reason="eos")
    return RunSummary(**{**base, **changes})


# What the window writes into Message.stats (workbench/ui/chat/stats_line.py), as stored.
STATS = {"tok_s": 20.0, "n_generated": 40, "n_prompt": 12, "n_reused": 30, "prefill_s": 0.25,
         "ttft_s": 0.3, "n_past": 82, "n_ctx": 4096, "stop_reason": "stopped", "think_s": 1.5}


def _line(stats: dict[str, object]) -> str:
    return format_stats_line(MessageStats.from_json(stats))


def _info() -> RunInfo:
    return RunInfo(engine_version="0.1.0", llama_cpp_python_version="0.3.36",
                   model=ModelIdentity("/m/tiny.gguf", "tiny", 1234, "abc"), arch="qwen3moe",
                   n_layer=2, n_expert=8, n_expert_used=2, n_vocab=100, n_ctx_train=512,
                   chat_template=True, settings={"temperature": 0.7})


def _branchy(store: Store) -> int:
    """Q1 -> A1 (regenerated: A1b, on screen, with reasoning and stats); Q1 edited -> Q1b."""
    conv = store.create_conversation("Physics chat")
    q1 = store.add_message(conv.id, None, "system", "Be brief.")
    u = store.add_message(conv.id, q1.id, "user", "Why is the sky blue?")
    a1 = store.add_message(conv.id, u.id, "assistant", "Rayleigh scattering.")
    store.edit_message(u.id, "Why is the sea blue?")
    store.switch_branch(u.id)
    a1b = store.regenerate(a1.id)
    stats = MessageStats.from_json(STATS)
    store.update_message(a1b.id, content="Short wavelengths scatter more.",
                         reasoning="Think about **wavelength**.", status="stopped", stats=stats)
    run = store.create_run(_info(), message_id=a1b.id, summary=_summary())
    store.add_token_rows(run.id, [])
    return conv.id


def test_stats_line_reads_like_the_window_and_skips_unmeasured():
    assert _line(STATS) == (
        "20.0 tok/s · 40 tokens · prefill 12 tokens in 0.25 s · TTFT 0.30 s · 30 reused"
        " · stopped by you")
    assert _line({"cache_hit_pct": 87.4, "stop_reason": "odd"}) == "cache hit 87% · odd"
    assert _line({"tok_s": -1.0, "n_generated": -1, "cache_hit_pct": -1.0}) == ""
    assert _line({"n_prompt": 0, "prefill_s": 0.0}) == ""  # nothing prefilled
    assert _line({"tok_s": True, "n_generated": "40"}) == ""  # not numbers: not shown
    assert _line({}) == ""
    assert format_stats_line(MessageStats(n_generated=3, stop_reason="eos")) == (
        "3 tokens · finished")


def test_markdown_is_the_active_branch(store: Store):
    conv = _branchy(store)
    md = store.export_markdown(conv)
    assert md.startswith("# Physics chat\n")
    assert "## System\n\nBe brief." in md
    assert "Why is the sky blue?" in md and "Short wavelengths scatter more." in md
    assert "sea" not in md and "Rayleigh" not in md  # other branches are not on screen
    assert ("<details>\n<summary>Thought for 1.5 s</summary>\n\nThink about **wavelength**.\n\n"
            "</details>") in md
    assert "*(stopped)*" in md
    assert "*20.0 tok/s · 40 tokens · prefill 12 tokens in 0.25 s" in md
    assert md.count("tok/s") == 1  # only the answer on screen has stats
    # The reasoning block comes before the answer it led to.
    assert md.index("<details>") < md.index("Short wavelengths")


def test_json_holds_the_whole_tree_and_runs(store: Store):
    conv = _branchy(store)
    doc = json.loads(store.export_json(conv))
    assert doc["format"] == "workbench.conversation" and doc["version"] == 1
    contents = [m["content"] for m in doc["messages"]]
    assert contents == ["Be brief.", "Why is the sky blue?", "Rayleigh scattering.",
                        "Why is the sea blue?", "Short wavelengths scatter more."]
    assert [m["id"] for m in doc["messages"]] == [1, 2, 3, 4, 5]
    assert [m["parent"] for m in doc["messages"]] == [None, 1, 2, 1, 2]
    assert doc["active_leaf"] == 5
    last = doc["messages"][4]
    assert last["stats"] == STATS and last["status"] == "stopped"
    assert last["reasoning"] == "Think about **wavelength**."
    [run] = doc["runs"]
    assert run["message"] == 5 and run["summary"]["stop_reason"] == "eos"
    assert run["model"]["fast_hash"] == "abc" and run["settings"] == {"temperature": 0.7}
    assert run["summary"]["cache_hit_pct"] == -1.0


def test_import_round_trip_is_equal_with_new_ids(store: Store, tmp_path: Path):
    conv = _branchy(store)
    text = store.export_json(conv)
    with Store.open(tmp_path / "other.db") as other:
        other.create_conversation("pushes the ids along")
        imported = other.import_json(text)
        assert imported.id != conv
        assert other.export_json(imported.id) == text
        path = other.active_path(imported.id)
        assert [m.content for m in path][-1] == "Short wavelengths scatter more."
        [run] = other.list_runs(conversation_id=imported.id)
        assert run.message_id == path[-1].id and run.run_summary() == _summary()
    again = store.import_json(json.loads(text))  # a dict works too, and into the same file
    assert store.export_tree(again.id) == store.export_tree(conv)
    old_ids = {m.id for m in store.all_messages(conv)}
    assert old_ids.isdisjoint({m.id for m in store.all_messages(again.id)})
    assert len(store.list_conversations()) == 2


def test_import_marks_a_streaming_message_interrupted(store: Store):
    conv = store.create_conversation("t")
    u = store.add_message(conv.id, None, "user", "q")
    store.add_message(conv.id, u.id, "assistant", "half", reasoning="r", status="streaming")
    assert "<summary>Reasoning</summary>" in store.export_markdown(conv.id)  # no think_s
    imported = store.import_json(store.export_json(conv.id))
    assert [m.status for m in store.active_path(imported.id)] == ["complete", "interrupted"]


def test_empty_conversation_round_trips(store: Store):
    conv = store.create_conversation("")
    assert store.export_markdown(conv.id) == "# Untitled conversation\n"
    imported = store.import_json(store.export_json(conv.id))
    assert store.active_path(imported.id) == []
    assert store.export_tree(imported.id) == store.export_tree(conv.id)


@pytest.mark.parametrize("doc", [
    {"format": "something else", "version": 1},
    {"format": "workbench.conversation", "version": 99},
    {"format": "workbench.conversation", "version": 1, "messages": [
        {"id": 1, "parent": 7, "role": "user"}]},
    {"format": "workbench.conversation", "version": 1, "messages": [
        {"id": 1, "parent": None, "role": "wizard"}]},
    {"format": "workbench.conversation", "version": 1, "messages": [
        {"id": 1, "parent": None, "role": "user"}, {"id": 1, "parent": None, "role": "user"}]},
    {"format": "workbench.conversation", "version": 1, "messages": [], "active_leaf": 3},
    {"format": "workbench.conversation", "version": 1, "messages": [{"parent": None}]},
    {"format": "workbench.conversation", "version": 1, "messages": [], "created_at": [1]},
    {"format": "workbench.conversation", "version": 1, "messages": [
        {"id": 1, "parent": None, "role": "user", "created_at": {"a": 1}}]},
    {"format": "workbench.conversation", "version": 1, "messages": [
        {"id": 1, "parent": None, "role": "user"}], "runs": [{"message": 1, "created_at": None}]},
])
def test_import_refuses_bad_documents_and_adds_nothing(store: Store, doc: dict):
    with pytest.raises(ValueError):
        store.import_json(doc)
    assert store.list_conversations(include_deleted=True) == []


def test_a_clock_stepping_back_still_exports_parents_first(store: Store):
    conv = store.create_conversation("t")
    u = store.add_message(conv.id, None, "user", "q", created_at=200.0)
    store.add_message(conv.id, u.id, "assistant", "a", created_at=100.0)  # clock went back
    store.add_message(conv.id, None, "user", "q edited", created_at=150.0)
    doc = store.export_tree(conv.id)
    assert [(m["content"], m["parent"]) for m in doc["messages"]] == [
        ("q edited", None), ("q", None), ("a", 2)]
    imported = store.import_json(doc)
    assert store.export_tree(imported.id) == doc


PIRATE = {"system_prompt": "Talk like a pirate.", "temp": 0.7, "top_p": 0.9}


def test_export_and_import_carry_the_conversation_s_settings(store: Store, tmp_path: Path):
    conv = _branchy(store)
    store.set_conversation_settings(conv, PIRATE)
    text = store.export_json(conv)
    assert json.loads(text)["settings"] == PIRATE
    with Store.open(tmp_path / "other.db") as other:
        imported = other.import_document(text)
        assert imported.left_out == []
        assert other.conversation_settings(imported.conversation.id) == PIRATE
        assert other.export_json(imported.conversation.id) == text


def test_a_conversation_on_the_global_settings_exports_no_settings_key(store: Store):
    conv = _branchy(store)
    doc = store.export_tree(conv)
    assert "settings" not in doc  # the document as before the key was added
    assert store.conversation_settings(store.import_json(doc).id) == {}


@pytest.mark.parametrize(("settings", "kept", "named"), [
    ({"system_prompt": "Arr.", "temp": "hot", "top_p": 5.0, "model": "/x.gguf"},
     {"system_prompt": "Arr."}, ["temp", "top_p", "model"]),
    ({"temp": float("nan"), "seed": True, "top_k": 20}, {"top_k": 20}, ["temp", "seed"]),
    ("be a pirate", {}, ["not an object"]),
    (None, {}, ["not an object"]),
])
def test_import_leaves_out_invalid_settings_and_imports_the_rest(
        store: Store, settings: object, kept: dict[str, object], named: list[str]):
    conv = _branchy(store)
    doc = store.export_tree(conv) | {"settings": settings}
    imported = store.import_document(json.dumps(doc))  # NaN as JSON writes it
    assert len(imported.left_out) == len(named)
    assert all(name in line for name, line in zip(named, imported.left_out, strict=True))
    assert all(line.endswith("left out") for line in imported.left_out)
    new = imported.conversation.id
    assert store.conversation_settings(new) == kept
    assert store.export_tree(new)["messages"] == store.export_tree(conv)["messages"]
    assert len(store.list_runs(conversation_id=new)) == 1
