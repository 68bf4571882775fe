"""The window from the keyboard alone (issue 39): the message box has the focus at start and
after New chat, an inline edit is sent with Enter and cancelled with Esc, every chat action has
a key, and Help lists the keys. Keys go where the focus is, as a user's do."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from tests.ui.user_actions import WAIT

CTRL = Qt.KeyboardModifier.ControlModifier
SHIFT = Qt.KeyboardModifier.ShiftModifier


def _focused(window):
    return QApplication.focusWidget() or window.focusWidget() or window


def press(qtbot, window, key, modifier=Qt.KeyboardModifier.NoModifier) -> None:
    """One key to the window, as the keyboard sends it: through the window system, so the
    shortcuts see it first and the focused widget gets the rest. (The offscreen platform
    drops the window's activation now and then, which a desktop does not: it is asked back.)"""
    if QApplication.activeWindow() is not window:
        window.windowHandle().requestActivate()
        qtbot.waitActive(window)
    qtbot.keyClick(window.windowHandle(), key, modifier)


def type_text(qtbot, window, text: str) -> None:
    """Text to the widget that has the keyboard focus (none: nothing to type into)."""
    focused = QApplication.focusWidget()
    assert focused is not None
    qtbot.keyClicks(focused, text)


def test_the_inline_editor_is_sent_with_enter_and_cancelled_with_esc(qtbot):
    from workbench.ui.chat.qt_message_widget import QtMessageWidget
    from workbench.ui.chat.shown import ShownMessage

    widget = QtMessageWidget(ShownMessage(id=7, role="user", content="Old question"))
    qtbot.addWidget(widget)
    widget.show()
    sent: list[tuple[int, str]] = []
    closed: list[bool] = []
    widget.edit_submitted.connect(lambda mid, text: sent.append((mid, text)))
    widget.edit_closed.connect(lambda: closed.append(True))
    widget.start_edit()
    editor = widget.editor
    assert editor is not None and editor.isVisible()
    editor.selectAll()
    qtbot.keyClicks(editor, "New question")
    qtbot.keyClick(editor, Qt.Key.Key_Return, SHIFT)  # a new line, not a send
    qtbot.keyClicks(editor, "two lines")
    assert sent == []
    qtbot.keyClick(editor, Qt.Key.Key_Return)
    assert sent == [(7, "New question\ntwo lines")]
    assert not editor.isVisible()
    widget.start_edit()
    qtbot.keyClick(widget.editor, Qt.Key.Key_Escape)
    assert not widget.editor.isVisible() and len(sent) == 1


def test_help_lists_every_shortcut_the_menus_have(qtbot):
    from PySide6.QtGui import QKeySequence

    from workbench.ui import shortcuts

    listed = shortcuts.help_text()
    for s in shortcuts.ALL:
        assert s.shown in listed and s.does in listed
        if s.key:  # a key the menus bind reads back as itself
            assert QKeySequence(s.key).toString() != ""
    assert "Enter" in listed and "Esc" in listed


def can_continue(shown):
    from workbench.ui.chat.qt_message_widget import can_continue as offered

    return offered(shown)


def _last(window, role):
    return [w for w in window.chat_view.messages if w.shown.role == role][-1]


def test_a_keyboard_only_walk(qtbot, make_window, model_config):
    """Every chat action with no mouse, every key through the window: focus at start, send,
    stop, continue, regenerate, edit, new chat, switching conversations, help. Each step
    checks what it did."""
    window = make_window(model_config.replace(n_predict=200))
    window.windowHandle().requestActivate()  # shortcuts need the active window
    qtbot.waitActive(window)
    qtbot.waitUntil(lambda: _focused(window) is window.composer.prompt, timeout=WAIT)
    chat = window.chat

    def streaming(tokens: int = 4) -> None:
        """An answer runs and has streamed a few tokens (then Esc has something to cut)."""
        x0 = window.telemetry.next_x
        qtbot.waitUntil(lambda: chat.generating and window.telemetry.next_x >= x0 + tokens,
                        timeout=WAIT)

    def answered(before: int) -> None:
        qtbot.waitUntil(lambda: chat.turns_done > before and not chat.generating, timeout=WAIT)

    # Send with Enter, stop with Esc while it streams.
    done = chat.turns_done
    type_text(qtbot, window, "Tell me a long story about a lighthouse keeper.")
    press(qtbot, window, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: chat.generating and window.telemetry.next_x >= 8, timeout=WAIT)
    press(qtbot, window, Qt.Key.Key_Escape)
    answered(done)
    answer = _last(window, "assistant")
    assert answer.shown.status == "stopped" and can_continue(answer.shown)
    first_id, first_text = answer.shown.id, answer.shown.content

    # Continue the stopped answer: the same answer grows.
    done = chat.turns_done
    press(qtbot, window, Qt.Key.Key_R, CTRL | SHIFT)
    streaming()
    press(qtbot, window, Qt.Key.Key_Escape)
    answered(done)
    grown = _last(window, "assistant").shown
    assert grown.id == first_id and len(grown.content) > len(first_text)
    assert grown.content.startswith(first_text.rstrip()[:20])

    # Regenerate: a new version of the last answer.
    done = chat.turns_done
    press(qtbot, window, Qt.Key.Key_R, CTRL)
    streaming()
    press(qtbot, window, Qt.Key.Key_Escape)
    answered(done)
    assert _last(window, "assistant").shown.versions == 2

    # Edit the last question: Ctrl+E opens the editor with the focus, Enter sends it again.
    done = chat.turns_done
    press(qtbot, window, Qt.Key.Key_E, CTRL)
    question = _last(window, "user")
    qtbot.waitUntil(lambda: question.editor is not None and question.editor.hasFocus(),
                    timeout=WAIT)
    question.editor.selectAll()
    type_text(qtbot, window, "Name one colour.")
    press(qtbot, window, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: chat.generating or chat.turns_done > done, timeout=WAIT)
    press(qtbot, window, Qt.Key.Key_Escape)
    answered(done)
    qtbot.waitUntil(lambda: _last(window, "user").shown.content == "Name one colour.",
                    timeout=WAIT)
    qtbot.waitUntil(lambda: _focused(window) is window.composer.prompt, timeout=WAIT)

    # New chat: an empty conversation, and the message box takes the keys.
    first_chat = chat.conversation_id
    press(qtbot, window, Qt.Key.Key_N, CTRL)
    qtbot.waitUntil(lambda: not window.chat_view.messages
                    and _focused(window) is window.composer.prompt, timeout=WAIT)
    done = chat.turns_done
    type_text(qtbot, window, "Hi")
    press(qtbot, window, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: chat.generating or chat.turns_done > done, timeout=WAIT)
    press(qtbot, window, Qt.Key.Key_Escape)
    answered(done)
    second_chat = chat.conversation_id
    assert second_chat is not None and second_chat != first_chat

    # Switch conversations: Ctrl+PgDown and Ctrl+PgUp walk the list, one step each.
    qtbot.waitUntil(lambda: {first_chat, second_chat} <= set(window.conversation_list.ids()),
                    timeout=WAIT)
    ids = window.conversation_list.ids()
    step = 1 if ids.index(first_chat) > ids.index(second_chat) else -1
    key = Qt.Key.Key_PageDown if step > 0 else Qt.Key.Key_PageUp
    back = Qt.Key.Key_PageUp if step > 0 else Qt.Key.Key_PageDown
    press(qtbot, window, key, CTRL)
    qtbot.waitUntil(lambda: chat.conversation_id == first_chat, timeout=WAIT)
    qtbot.waitUntil(lambda: _last(window, "user").shown.content == "Name one colour.",
                    timeout=WAIT)
    press(qtbot, window, back, CTRL)
    qtbot.waitUntil(lambda: chat.conversation_id == second_chat, timeout=WAIT)

    # Help lists the keys, every one the menus bind among them.
    from PySide6.QtGui import QKeySequence

    from workbench.ui import shortcuts
    declared = {QKeySequence(s.key).toString() for s in shortcuts.ALL if s.key}
    menus = [a.menu() for a in window.menuBar().actions() if a.menu() is not None]
    bound = {a.shortcut().toString() for menu in menus for a in menu.actions()
             if not a.shortcut().isEmpty()}
    assert bound and bound <= declared
    press(qtbot, window, Qt.Key.Key_F1)
    qtbot.waitUntil(lambda: getattr(window, "shortcuts_box", None) is not None
                    and window.shortcuts_box.isVisible(), timeout=WAIT)
    assert "Ctrl+R" in window.shortcuts_box.text()
    window.shortcuts_box.close()
