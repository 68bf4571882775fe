"""Numbers that change often must not re-lay out the window: the label's size only grows."""

from __future__ import annotations

from workbench.ui.qt_stable_label import QtStableLabel


def test_size_hint_grows_with_wider_text_and_never_shrinks(qtbot) -> None:
    label = QtStableLabel("9.8 tok/s")
    qtbot.addWidget(label)
    narrow = label.sizeHint().width()
    label.setText("10234.5 tok/s")
    wide = label.sizeHint().width()
    assert wide > narrow
    label.setText("1 tok/s")
    assert label.sizeHint().width() == wide
    assert label.minimumSizeHint().width() == wide
    assert label.text() == "1 tok/s"  # the text itself is not held back
