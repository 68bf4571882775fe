"""The model picker lists the models found on this computer (a temporary home's app folders
and a folder the user added), with metadata and the memory estimate; a bad file says why it
cannot load; the search runs off the UI thread and reports its progress."""

from __future__ import annotations

import shutil

from tests.ui.user_actions import WAIT
from workbench.moe.synth import write_synthetic_moe
from workbench.ui.models.discovery import load_folders
from workbench.ui.models.qt_model_picker import QtModelPicker


def labels(picker) -> list[str]:
    return [picker.list.item(i).text() for i in range(picker.list.count())]


def select_label(qtbot, picker, label: str) -> None:
    row = labels(picker).index(label)
    picker.list.setCurrentRow(row)


def test_the_picker_lists_models_found_in_the_usual_folders(
        qtbot, make_window, tmp_path, data_dir, _model_search_in_a_temporary_home):
    home = _model_search_in_a_temporary_home
    lm = home / ".lmstudio/models/me/tiny"
    lm.mkdir(parents=True)
    model = write_synthetic_moe(lm / "tiny-moe-Q8.gguf", size="tiny")[0]
    shutil.copy(model, lm / "mmproj-tiny-moe-f16.gguf")
    gpt4all = home / ".local/share/nomic.ai/GPT4All"
    gpt4all.mkdir(parents=True)
    (gpt4all / "truncated.gguf").write_bytes(b"GGUF\x03\x00\x00\x00")
    window = make_window(load=False)
    picker = QtModelPicker(window.config, window, data=data_dir)
    qtbot.addWidget(picker)
    qtbot.waitUntil(lambda: picker.scans_done == 1, timeout=WAIT)
    assert "tiny-moe-Q8.gguf (LM Studio)" in labels(picker)
    assert "truncated.gguf (GPT4All): cannot load" in labels(picker)
    assert not any("mmproj" in label for label in labels(picker))  # a projector, not a model
    assert picker.scan_status.text() == ("Found 1 model on this computer and 1 that cannot "
                                         "load")

    select_label(qtbot, picker, "tiny-moe-Q8.gguf (LM Studio)")
    qtbot.waitUntil(picker.open_button.isEnabled, timeout=WAIT)
    details = picker.details.toPlainText()
    assert "qwen3moe" in details and "LM Studio's folder" in details
    assert "Image projector found beside the model: mmproj-tiny-moe-f16.gguf" in details
    assert picker.projector == lm / "mmproj-tiny-moe-f16.gguf"
    assert "KV cache at this context: at most" in picker.estimate.text()

    select_label(qtbot, picker, "truncated.gguf (GPT4All): cannot load")
    qtbot.waitUntil(lambda: not picker.open_button.isEnabled()
                    and "truncated.gguf" in picker.details.toPlainText(), timeout=WAIT)
    assert picker.projector is None

    # A folder of the user's own: searched now, and remembered for the next picker.
    mine = tmp_path / "my-models"
    mine.mkdir()
    shutil.copy(model, mine / "mine.gguf")
    task = window.tasks.spawn(picker.remember_folder(mine))
    qtbot.waitUntil(task.done, timeout=WAIT)
    assert "mine.gguf (your folder)" in labels(picker)
    assert load_folders(data_dir) == [mine]
    picker.close()
    again = QtModelPicker(window.config, window, data=data_dir)
    qtbot.addWidget(again)
    qtbot.waitUntil(lambda: again.scans_done == 1, timeout=WAIT)
    assert "mine.gguf (your folder)" in labels(again)


def test_nothing_found_says_where_it_looked(qtbot, make_window, data_dir):
    window = make_window(load=False)
    picker = QtModelPicker(window.config, window, data=data_dir)
    qtbot.addWidget(picker)
    qtbot.waitUntil(lambda: picker.scans_done == 1, timeout=WAIT)
    assert "No models found in the usual folders" in picker.scan_status.text()
    assert "LM Studio" in picker.scan_status.text()


def test_the_picker_chooses_a_draft_model_for_speculation(qtbot, make_window, data_dir):
    from workbench.ui.models.qt_model_picker import with_draft_model

    window = make_window(load=False)
    picker = QtModelPicker(window.config, window, data=data_dir)
    qtbot.addWidget(picker)
    assert picker.draft_model.text() == window.config.spec_draft_model
    chosen = with_draft_model(window.config, "/models/small.gguf")
    assert (chosen.spec, chosen.spec_draft_model) == ("draft", "/models/small.gguf")
    cleared = with_draft_model(chosen, "")
    assert (cleared.spec, cleared.spec_draft_model) == ("off", "")
    ngram = with_draft_model(window.config.replace(spec="ngram"), "")
    assert ngram.spec == "ngram"


def test_a_model_is_listed_once_and_a_long_name_is_shown_whole_on_hover(
        qtbot, aloop, tmp_path, chat_model_path, embedded_model_path):
    """Issue 39: the bundled model was listed twice (as itself and as its recent file) and long
    names were cut at the end. The same file (by any path: the bundled entry, its real path, a
    link to it) is one entry; a long name is elided in the middle and whole in its tooltip."""
    import json

    from PySide6.QtCore import Qt

    from workbench.config import Config

    link = tmp_path / "linked.gguf"
    link.symlink_to(chat_model_path)
    long_name = tmp_path / ("Qwen3-30B-A3B-Instruct-2507-an-unusually-long-model-file-name-"
                            "UD-Q4_K_XL.gguf")
    shutil.copy(embedded_model_path, long_name)
    recent = tmp_path / "recent_models.json"
    recent.write_text(json.dumps([str(chat_model_path), str(link), str(embedded_model_path),
                                  str(long_name)]))
    picker = QtModelPicker(Config(), recent=recent, sources=[])
    qtbot.addWidget(picker)
    qtbot.waitUntil(lambda: picker.scans_done == 1, timeout=WAIT)
    entries = [picker.list.item(i).data(Qt.ItemDataRole.UserRole)
               for i in range(picker.list.count())]
    assert str(chat_model_path) not in entries and str(link) not in entries
    assert str(embedded_model_path) not in entries  # the bundled base model's file
    assert entries.count(str(long_name)) == 1
    smol = [label for label in labels(picker) if "SmolLM2" in label]
    assert len(smol) == 1, labels(picker)
    # Selecting the recent path picks the one entry that lists its file.
    count = picker.list.count()
    picker.select(str(link))
    assert picker.list.count() == count
    assert "SmolLM2" in picker.list.currentItem().text()
    # A long name: elided in the middle (its quantisation stays in view), whole on hover.
    assert picker.list.textElideMode() == Qt.TextElideMode.ElideMiddle
    item = picker.list.item(entries.index(str(long_name)))
    assert long_name.name in item.toolTip() and str(long_name) in item.toolTip()
