"""The first ten minutes in the window (issue #29), on the real engine: a file that is not an
image is refused when attached, the forecast warns before Send when the draft will not fit the
context, and clicking another conversation while an answer streams says what happens."""

from __future__ import annotations

from PySide6.QtCore import Qt

from tests.ui.user_actions import WAIT
from workbench.moe.synth_mmproj import solid_png
from workbench.store import Store, default_path
from workbench.ui.conversations.qt_controller import BUSY_NOTE
from workbench.ui.qt_theme import tones


def test_a_file_that_is_not_an_image_is_refused_when_attached(make_window, qtbot, model_config,
                                                              tiny_moe_path, tiny_mmproj_path,
                                                              tmp_path):
    window = make_window(model_config.replace(model=str(tiny_moe_path),
                                              mmproj=str(tiny_mmproj_path), n_ctx=256,
                                              n_predict=4))
    assert window.chat.model is not None and window.chat.model.sees_images
    notes, red = tmp_path / "notes.txt", tmp_path / "red.png"
    notes.write_text("not a picture\n")
    red.write_bytes(solid_png(8, 8, (255, 0, 0)))
    composer = window.composer
    composer.attach_files([notes, red])
    qtbot.waitUntil(lambda: composer.reading == 0, timeout=10_000)
    assert [a.name for a in composer.attachments] == ["red.png"]  # the image still comes
    assert "notes.txt is not an image" in composer.hint.text()
    assert len(composer.thumbnails.thumbnails) == 1


def test_the_forecast_warns_before_send_when_the_draft_will_not_fit(make_window, qtbot,
                                                                    model_config):
    window = make_window(model_config.replace(n_ctx=128, n_predict=64))
    composer = window.composer
    composer.prompt.setPlainText("Hello there.")
    qtbot.waitUntil(lambda: composer.forecast.text().startswith("reads "), timeout=WAIT)
    assert not composer.forecast.property("workbenchTextTone")
    n_ctx = window.chat.model.n_ctx  # llama.cpp pads 128 up to its own multiple (256)
    composer.prompt.setPlainText("word " * n_ctx)  # n_ctx prompt tokens + 64 cannot fit
    qtbot.waitUntil(lambda: composer.forecast.text().startswith("Too long"), timeout=WAIT)
    warning = composer.forecast.text()
    assert f"+ 64 to generate > {n_ctx}" in warning and "Shorten" in warning
    colour = composer.forecast.palette().color(composer.forecast.foregroundRole())
    assert colour.name() == tones().warning  # said in the warning colour, not as a dim note
    composer.prompt.setPlainText("Short again.")
    qtbot.waitUntil(lambda: composer.forecast.text().startswith("reads "), timeout=WAIT)
    assert not composer.forecast.property("workbenchTextTone")


def test_clicking_another_conversation_while_an_answer_streams_says_what_happens(
        make_window, qtbot, run, model_config):
    with Store.open(default_path()) as store:
        other = store.create_conversation("Earlier chat")
        store.add_message(other.id, None, "user", "Hi")
    window = make_window(model_config.replace(n_ctx=512, n_predict=400))
    run(window.conversations.refresh())
    window.composer.prompt.setPlainText("Tell me a long story about a lighthouse.")
    qtbot.keyClick(window.composer.prompt, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: len(window.chat_view.messages) == 2 and window.chat.generating,
                    timeout=WAIT)
    streaming = window.chat.conversation_id
    run(window.conversations.refresh())
    assert set(window.conversation_list.ids()) == {other.id, streaming}
    item = window.conversation_list.item_for(other.id)
    window.conversation_list.list.itemClicked.emit(item)  # what a click on it sends
    qtbot.waitUntil(lambda: window.notice.label.text() == BUSY_NOTE, timeout=WAIT)
    assert window.chat.generating and window.chat.conversation_id == streaming
    # The list still marks the conversation on screen, not the one clicked.
    assert window.conversation_list.current_id == streaming
    assert window.conversation_list.item_for(streaming).isSelected()
    assert not item.isSelected()
    window.chat.stop()
    qtbot.waitUntil(lambda: not window.chat.generating, timeout=WAIT)
