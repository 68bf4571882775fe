"""`screenshot`: the window after a real chat, written to a PNG that shows something."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QImage

from tests.full_disk import fill_the_disk
from workbench.atomic_write import OutputFileError
from workbench.ui.qt_screenshot import take_screenshot


def distinct_colours(image: QImage, step: int = 16) -> int:
    return len({image.pixel(x, y) for x in range(0, image.width(), step)
                for y in range(0, image.height(), step)})


def test_a_screenshot_after_a_real_chat(qtbot, run, make_window, model_config, tmp_path,
                                        monkeypatch) -> None:
    window = make_window(model_config.replace(n_predict=16))
    out = tmp_path / "shot.png"
    run(take_screenshot(window, out, [("Say hi.",)], (1440, 900)))
    image = QImage(str(out))
    assert (image.width(), image.height()) == (1440, 900)
    assert distinct_colours(image) > 20  # text, plots and widgets, not a blank grab
    assert window.telemetry.repaints > 0 and window.telemetry.next_x == 16
    answer = window.chat_view.messages[-1]
    assert answer.shown.role == "assistant"
    # The picture shows a span selected on the plots, marked in the answer's token view.
    assert window.telemetry.span is not None and window.telemetry.span.tokens == 5
    assert answer.token_view.isVisible()
    # The expert map in front: a dense model says it needs streaming.
    run(take_screenshot(window, out, [], (1440, 900), front="experts"))
    assert not window.expert_dock.visibleRegion().isEmpty()
    assert "needs expert streaming" in window.expert_map.message.text()
    # Issue 12, case 11: the picture is written whole or not at all. On a full disk
    # (tests/full_disk.py) the earlier picture stays and the error says why; a missing
    # directory is refused before any chat, and not created.
    before = out.read_bytes()
    fill_the_disk(monkeypatch, budget=4096)
    with pytest.raises(OutputFileError, match="the disk is full"):
        run(take_screenshot(window, out, [], (1440, 900)))
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "shot.png"]  # data: the window's
    sent = len(window.chat_view.messages)
    with pytest.raises(OutputFileError, match="create it first"):
        run(take_screenshot(window, tmp_path / "no" / "shot.png", [("Say hi.",)], (1440, 900)))
    assert len(window.chat_view.messages) == sent
    assert not (tmp_path / "no").exists()
