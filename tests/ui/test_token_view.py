"""The token view (ui/chat/token_view.py): each answer token's probability and alternatives in
the plots' readout, beside its cost. On the real window and model: off by default, and then no
log-probability is computed at all; on, every token has its choice, read from a plot or from
the chat's Tokens view. On the panel alone: what the readout says, and that a token's text is
never taken for markup."""

from __future__ import annotations

import math
from typing import Any

import pytest
from PySide6.QtCore import Qt

from tests.ui.user_actions import send
from workbench.engine import constrain
from workbench.engine.token_choice import TokenChoice
from workbench.ui.telemetry.qt_telemetry_panel import QtTelemetryPanel
from workbench.ui.telemetry.series import choice_text
from workbench.ui.ui_pacer import UiPacer

ASK = "Name three colours."


@pytest.fixture
def choices_made(monkeypatch: pytest.MonkeyPatch) -> list[TokenChoice]:
    """Every TokenChoice the engine computes, as it computes it (on the engine thread)."""
    made: list[TokenChoice] = []
    compute = constrain.token_choice

    def counted(*args: Any) -> TokenChoice:
        made.append(compute(*args))
        return made[-1]

    monkeypatch.setattr(constrain, "token_choice", counted)
    return made


def test_off_by_default_no_log_probability_is_computed(qtbot, make_window, choices_made
                                                       ) -> None:
    window = make_window()
    assert window.chat.config.token_alternatives == 0
    send(qtbot, window, ASK)
    assert window.chat.last_result.ok and window.telemetry.next_x > 0
    assert choices_made == [] and window.telemetry.choices == {}
    window.telemetry.highlight(0)
    assert "alternatives" not in window.telemetry.readout.text()


def test_on_each_token_shows_its_alternatives_beside_its_cost(qtbot, make_window, model_config,
                                                              choices_made) -> None:
    window = make_window(model_config.replace(token_alternatives=4))  # greedy: temp 0
    send(qtbot, window, ASK)
    result = window.chat.last_result
    assert result.ok
    panel = window.telemetry
    n = result.summary.n_generated
    assert sorted(panel.choices) == list(range(n))
    assert choices_made[:n] == [panel.choices[x] for x in range(n)]  # the engine's, as made
    for x, choice in panel.choices.items():
        alternatives = choice.alternatives()
        assert len(alternatives) == 4
        assert 0 < choice.p <= 1 and all(0 <= p <= 1 for _, p in alternatives)
        assert sum(p for _, p in alternatives) <= 1 + 1e-9
        assert [p for _, p in alternatives] == sorted((p for _, p in alternatives),
                                                      reverse=True)
        # Greedy: the token picked is the likeliest, the first alternative.
        assert alternatives[0] == (choice.text, choice.p), x
    # Clicking a token in the chat reads it on the plots: token, p, alternatives, then its cost.
    answer = window.chat_view.messages[-1]
    answer.tokens_button.setChecked(True)
    answer.token_view.linkActivated.emit("tok:1")
    readout = panel.readout.text()
    assert choice_text(panel.choices[1]) in readout and "wall " in readout
    assert readout.startswith("token 1 ")
    # Hovering one in the Tokens view reads it too, without moving the plots.
    answer.token_view.linkHovered.emit("tok:2")
    assert panel.readout.text().startswith(f"token 2 (turn 0) {choice_text(panel.choices[2])}")


@pytest.fixture
def panel(qtbot) -> QtTelemetryPanel:
    panel = QtTelemetryPanel(pacer=UiPacer(target_share=10.0))
    qtbot.addWidget(panel)
    panel.show()
    return panel


def test_the_readout_quotes_a_token_and_never_renders_it(panel) -> None:
    hostile = TokenChoice(token=7, piece=b"<b>x</b>\n", logprob=math.log(0.5),
                          top=((7, b"<b>x</b>\n", math.log(0.5)), (9, b"\xe2\x80", math.log(0.25))))
    panel.begin_turn()
    panel.append({"wall_ms": 12.0, "grammar_ms": 0.25}, hostile)
    panel.append({"wall_ms": 11.0})  # a token without a choice (the view was off)
    panel.show_token(0)
    text = panel.readout.text()
    assert panel.readout.textFormat() == Qt.TextFormat.PlainText
    assert text.startswith('token 0 (turn 0) "<b>x</b>\\n" p 0.5, alternatives '
                           '"<b>x</b>\\n" 0.5 · "bytes:\\\\xe2\\\\x80" 0.25: wall 12.0 ms')
    assert "grammar 0.25 ms" in text
    panel.show_token(1)
    assert "alternatives" not in panel.readout.text() and "grammar –" in panel.readout.text()
    panel.clear()
    assert panel.choices == {}
