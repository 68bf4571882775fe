"""The expert activity dock in the real window: a streamed synthetic MoE fills it with the
experts the engine routed (checked against the engine's routing trace), the embedded dense
model says it needs expert streaming."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QPointF

from tests.ui.user_actions import WAIT, send
from workbench.moe.synth import moe_layers, spec_for
from workbench.ui.telemetry.expert_activity import CELL_PX, LUT, RESIDENT_RGB
from workbench.ui.telemetry.qt_expert_map import NEEDS_STREAMING

WHITE = [255, 255, 255]


def on_engine(qtbot, window, fn):
    task = window.tasks.spawn(window.bridge._call(lambda: fn(window.bridge._session)))
    qtbot.waitUntil(task.done, timeout=WAIT)
    return task.result()


def menu_action(window, menu: str, text: str):
    bar = next(a.menu() for a in window.menuBar().actions() if a.text().replace("&", "") == menu)
    return next(a for a in bar.actions() if a.text().replace("&", "") == text)


def recorded_loads(session) -> list[tuple[int, list[int]]]:
    """The window's sessions record their routing (for the cache-sizing view): the witness."""
    return [(ld.layer, [int(e) for e in ld.unique_experts()])
            for _, ld in session.streaming.routes.loads()]


def test_a_streamed_moe_maps_the_routed_experts_and_the_cache(qtbot, make_window, model_config,
                                                               tiny_moe_path, run):
    config = model_config.replace(model=str(tiny_moe_path), moe_stream=True, cache_mb=64)
    # Its thread count chosen, so nothing is measured at open: the probe's reads would make
    # experts resident that no recorded load routed, and the recorded loads are the witness.
    window = make_window(config, load=False)
    window.session.threads_chosen = True
    run(window.load_model(config))
    panel = window.expert_map
    assert window.expert_dock.widget() is panel
    assert window.expert_dock in window.tabifiedDockWidgets(window.telemetry_dock)
    assert menu_action(window, "View", "Expert activity").isCheckable()
    assert panel.streaming and panel.model.empty
    assert panel.pages.currentIndex() == 0 and "streaming is on" in panel.message.text()
    assert on_engine(qtbot, window, recorded_loads) == []  # nothing before

    send(qtbot, window, "Hello")  # the telemetry tab is in front: the map only accumulates
    n = window.chat.last_result.summary.n_generated
    assert panel.pages.currentIndex() == 1 and panel.model.tokens == n
    painted = panel.paints
    panel._tick()
    assert panel.dirty and panel.paints == painted and not panel.on_screen
    window.show_dock(window.expert_dock)
    qtbot.waitUntil(lambda: panel.paints > painted and not panel.dirty, timeout=WAIT)

    # The engine's own record: the last n passes over the MoE layers are the generated tokens.
    spec = spec_for("qwen3moe", "tiny")
    moe = moe_layers(spec)
    loads = on_engine(qtbot, window, recorded_loads)
    generated = loads[len(loads) - n * len(moe):]
    expected = np.zeros((spec.n_layer, spec.n_expert))
    for t in range(n):
        for layer, ids in generated[t * len(moe):(t + 1) * len(moe)]:
            expected[layer, ids] += panel.model.decay ** (n - 1 - t)
    assert np.allclose(panel.model.recent, expected, rtol=1e-9, atol=1e-12)
    ever = np.zeros((spec.n_layer, spec.n_expert), dtype=bool)
    for layer, ids in loads:
        ever[layer, ids] = True

    # What the user sees: hot cells coloured, cold cells white, resident experts dotted.
    image = panel.image.image
    assert image.shape == (spec.n_layer * CELL_PX, spec.n_expert * CELL_PX, 4)
    c = CELL_PX // 2
    hottest = np.unravel_index(np.argmax(expected), expected.shape)
    for layer in range(spec.n_layer):
        for e in range(spec.n_expert):
            colour = image[layer * CELL_PX, e * CELL_PX, :3].tolist()
            assert (colour != WHITE) == bool(expected[layer, e] > 0), (layer, e)
            dot = image[layer * CELL_PX + c, e * CELL_PX + c, :3].tolist()
            assert (dot == list(RESIDENT_RGB)) == ever[layer, e], (layer, e)
    assert image[hottest[0] * CELL_PX, hottest[1] * CELL_PX].tolist() == LUT[255].tolist()
    assert "resident in the cache" in panel.residency_label.text()

    # Hovering the hottest cell reads it out.
    box = panel.plot.getViewBox()
    scene = box.mapViewToScene(QPointF(hottest[1], hottest[0]))  # the centre of the cell
    panel._hover((scene,))
    assert panel.readout.text() == (f"layer {hottest[0]}, expert {hottest[1]}: routed "
                                    f"{expected[hottest]:.1f} recent, resident yes")


def test_the_dense_embedded_model_needs_expert_streaming(qtbot, make_window):
    window = make_window()
    panel = window.expert_map
    window.show_dock(window.expert_dock)
    qtbot.waitUntil(lambda: panel.message.isVisible(), timeout=WAIT)
    assert panel.message.text() == NEEDS_STREAMING and not panel.graphics.isVisible()
    send(qtbot, window, "Hi")
    assert panel.model.empty and panel.pages.currentIndex() == 0
    assert panel.message.text() == NEEDS_STREAMING
