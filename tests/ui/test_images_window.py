"""Images in the window, on the real engine with the synthetic projector: attach (button path
and drag-and-drop), thumbnails in the composer and the sent message, a click opens it larger,
the store keeps it, a reopened conversation shows it; without a projector the user is told how
to fix it."""

from __future__ import annotations

from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent

from workbench.moe.synth_mmproj import solid_png
from workbench.store import Store, default_path
from workbench.ui.chat.qt_composer import NO_PROJECTOR_HINT
from workbench.ui.chat.qt_thumbnails import QtImageViewer, QtThumbnail


def _vision_config(model_config, tiny_moe_path, tiny_mmproj_path):
    return model_config.replace(model=str(tiny_moe_path), mmproj=str(tiny_mmproj_path),
                                n_ctx=256, n_predict=6)


def _drop(widget, paths):
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    event = QDropEvent(QPointF(5, 5), Qt.DropAction.CopyAction, mime,
                       Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier)
    widget.dropEvent(event)


def test_attach_send_and_see_the_image(make_window, run, qtbot, model_config, tiny_moe_path,
                                       tiny_mmproj_path, tmp_path):
    red = tmp_path / "red.png"
    red.write_bytes(solid_png(200, 160, (255, 0, 0)))  # larger than a thumbnail
    window = make_window(_vision_config(model_config, tiny_moe_path, tiny_mmproj_path))
    assert window.chat.model is not None and window.chat.model.sees_images
    composer = window.composer
    _drop(composer.prompt, [red])  # dropped on the message box: attached, not typed
    qtbot.waitUntil(lambda: composer.reading == 0, timeout=10_000)  # read off the UI thread
    assert composer.prompt.toPlainText() == ""
    assert [a.name for a in composer.attachments] == ["red.png"]
    thumb = composer.thumbnails.thumbnails[0]
    assert thumb.isVisibleTo(window) and thumb.pixmap() is not None and not thumb.pixmap().isNull()
    viewer = thumb.open_viewer()
    assert isinstance(viewer, QtImageViewer) and viewer.isVisible()
    assert viewer.picture.pixmap().width() > thumb.pixmap().width()  # larger than the thumbnail
    viewer.close()

    composer.prompt.setPlainText("Describe")
    composer._submit()
    qtbot.waitUntil(lambda: not window.chat.generating and
                    len(window.chat_view.messages) == 2 and
                    window.chat_view.messages[1].shown.stats.n_images is not None,
                    timeout=120_000)
    assert composer.attachments == [] and not composer.thumbnails.isVisible()
    user = window.chat_view.messages[0]
    assert user.shown.role == "user"
    assert len(user.thumbnails.thumbnails) == 1
    answer = window.chat_view.messages[1].shown
    assert answer.stats.n_images == 1 and answer.stats.images_encoded == 1
    assert "1 image, 16 tokens, encoded in" in window.chat_view.messages[1].stats.text()
    with Store.open(default_path()) as store:
        (conv,) = store.list_conversations()
        path = store.active_path(conv.id)
        assert store.message_images([path[0].id])[path[0].id][0].data == red.read_bytes()

    # A second turn reuses the image from the KV: not encoded again.
    composer.prompt.setPlainText("And now?")
    composer._submit()
    qtbot.waitUntil(lambda: not window.chat.generating and
                    len(window.chat_view.messages) == 4 and
                    window.chat_view.messages[3].shown.stats.n_images is not None,
                    timeout=120_000)
    second = window.chat_view.messages[3].shown.stats
    assert (second.n_images, second.images_encoded) == (1, 0)
    assert "1 image reused from memory" in window.chat_view.messages[3].stats.text()

    # Reopened, the conversation shows the image again.
    run(window.chat.open_conversation(None))
    run(window.chat.open_conversation(conv.id))
    assert len(window.chat_view.messages[0].thumbnails.thumbnails) == 1


def test_attaching_without_a_projector_says_how_to_fix_it(make_window, model_config,
                                                          tiny_moe_path, tmp_path):
    red = tmp_path / "red.png"
    red.write_bytes(solid_png(8, 8, (255, 0, 0)))
    window = make_window(model_config.replace(model=str(tiny_moe_path), n_ctx=256,
                                              n_predict=4))
    assert window.chat.model is not None and not window.chat.model.sees_images
    window.composer.attach_files([red])
    assert window.composer.attachments == []
    assert window.composer.hint.text() == NO_PROJECTOR_HINT
    assert "mmproj" in NO_PROJECTOR_HINT and "model picker" in NO_PROJECTOR_HINT


def test_a_vanished_or_bad_file_is_reported_and_not_attached(make_window, qtbot, model_config,
                                                             tiny_moe_path, tiny_mmproj_path,
                                                             tmp_path):
    window = make_window(_vision_config(model_config, tiny_moe_path, tiny_mmproj_path))
    empty = tmp_path / "empty.png"
    empty.write_bytes(b"")
    window.composer.attach_files([tmp_path / "gone.png", empty])
    qtbot.waitUntil(lambda: window.composer.reading == 0, timeout=10_000)
    assert window.composer.attachments == []
    hint = window.composer.hint.text()
    assert "gone.png is gone" in hint and "empty.png is empty" in hint


def test_a_large_image_is_decoded_off_the_ui_thread(qtbot):
    big = solid_png(1500, 1500, (0, 128, 0)) + b"\0" * (600 << 10)  # over SYNC_BYTES
    thumb = QtThumbnail(big, "big.png")
    qtbot.addWidget(thumb)
    assert thumb.text() == "loading…"  # the UI thread did not wait for the decode
    qtbot.waitUntil(lambda: thumb.decoded, timeout=30_000)
    assert thumb.pixmap().width() <= 72 and not thumb.pixmap().isNull()


def test_a_screenshot_can_show_an_image_in_the_chat(make_window, run, model_config,
                                                    tiny_moe_path, tiny_mmproj_path, tmp_path):
    from PySide6.QtGui import QImage

    from workbench.ui.qt_screenshot import take_screenshot

    red = tmp_path / "red.png"
    red.write_bytes(solid_png(120, 90, (255, 0, 0)))
    window = make_window(_vision_config(model_config, tiny_moe_path, tiny_mmproj_path))
    out = tmp_path / "shot.png"
    run(take_screenshot(window, out, [("Describe",)], (1280, 800), images=[red]))
    assert not QImage(str(out)).isNull()
    user = window.chat_view.messages[-2]
    assert user.shown.role == "user" and len(user.thumbnails.thumbnails) == 1
    assert user.thumbnails.thumbnails[0].isVisibleTo(window)
