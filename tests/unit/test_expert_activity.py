"""The expert activity map's model: exact decay arithmetic, hover text and the rendered image."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.engine.requests import ExpertActivity
from workbench.ui.telemetry.expert_activity import (
    CELL_PX,
    DENSE_RGB,
    LUT,
    RESIDENT_RGB,
    ExpertActivityMap,
)


def activity(routed, resident=None, moe_layers=None, cached=True) -> ExpertActivity:
    routed = np.asarray(routed, dtype=np.uint32)
    return ExpertActivity(
        routed=routed,
        resident=np.zeros(routed.shape, bool) if resident is None else np.asarray(resident),
        moe_layers=np.ones(routed.shape[0], bool) if moe_layers is None
        else np.asarray(moe_layers),
        cached=cached,
    )


def test_half_life_one_token_halves_each_step_exactly():
    m = ExpertActivityMap(half_life=1)
    assert m.decay == 0.5 and m.steady_max == 2.0
    for routed in ([[1, 0]], [[0, 1]], [[1, 1]]):
        m.add(activity(routed))
    # (1 * .5 + 0) * .5 + 1 and (0 * .5 + 1) * .5 + 1
    assert m.recent.tolist() == [[1.25, 1.5]]
    assert m.total.tolist() == [[2, 2]] and m.tokens == 3


def test_default_half_life_is_sixteen_tokens():
    m = ExpertActivityMap()
    assert m.half_life == 16 and m.decay == pytest.approx(0.957603280698574, abs=1e-15)
    m.add(activity([[1, 0, 0]]))
    for _ in range(16):
        m.add(activity([[0, 0, 0]]))
    assert m.recent[0, 0] == pytest.approx(0.5, abs=1e-12)
    for _ in range(16):
        m.add(activity([[0, 0, 0]]))
    assert m.recent[0, 0] == pytest.approx(0.25, abs=1e-12)


def test_an_expert_routed_every_token_settles_at_the_steady_maximum():
    m = ExpertActivityMap()
    for _ in range(2000):
        m.add(activity([[1, 0]]))
    assert m.steady_max == pytest.approx(23.58673, abs=1e-5)
    assert m.recent[0, 0] == pytest.approx(m.steady_max, rel=1e-12) and m.recent[0, 1] == 0


def test_a_new_shape_starts_over_and_residency_is_the_latest():
    m = ExpertActivityMap(half_life=1)
    m.add(activity([[3, 0]], resident=[[True, False]]))
    m.add(activity([[0, 0]], resident=[[False, True]]))
    assert m.resident.tolist() == [[False, True]] and m.version == 2
    m.add(activity([[0, 1, 0], [2, 0, 0]]))
    assert m.shape == (2, 3) and m.tokens == 1
    assert m.recent.tolist() == [[0, 1, 0], [2, 0, 0]]
    with pytest.raises(ValueError):
        ExpertActivityMap(half_life=0)


def test_hover_text_names_layer_expert_recent_routing_and_residency():
    m = ExpertActivityMap(half_life=1)
    m.add(activity([[0, 0], [1, 0]], resident=[[False, False], [True, False]],
                   moe_layers=[False, True]))
    m.add(activity([[0, 0], [1, 2]], resident=[[False, False], [True, False]],
                   moe_layers=[False, True]))
    assert m.describe(1, 0) == "layer 1, expert 0: routed 1.5 recent, resident yes"
    assert m.describe(1, 1) == "layer 1, expert 1: routed 2.0 recent, resident no"
    assert m.describe(0, 1) == "layer 0: dense (no experts to route)"
    assert m.describe(2, 0) == "" and m.describe(1, -1) == ""
    m.add(activity([[0, 0], [0, 0]], moe_layers=[False, True], cached=False))
    assert m.describe(1, 0).endswith("resident no (the expert cache is off)")


def test_image_colours_cells_by_recent_routing_marks_residents_and_greys_dense_rows():
    m = ExpertActivityMap(half_life=1)
    m.add(activity([[0, 0, 0], [4, 2, 0]], resident=[[False] * 3, [False, True, True]],
                   moe_layers=[False, True]))
    image = m.rgba()
    assert image.shape == (2 * CELL_PX, 3 * CELL_PX, 4) and image.dtype == np.uint8
    c = CELL_PX // 2

    def corner(layer, expert):
        return image[layer * CELL_PX, expert * CELL_PX].tolist()

    def centre(layer, expert):
        return image[layer * CELL_PX + c, expert * CELL_PX + c, :3].tolist()

    assert corner(1, 0) == LUT[255].tolist()  # the hottest cell
    assert corner(1, 1) == LUT[128].tolist()  # half as hot: round(0.5 * 255)
    assert corner(1, 2) == [255, 255, 255, 255]  # not routed: white
    assert corner(0, 1)[:3] == list(DENSE_RGB)
    assert centre(1, 1) == centre(1, 2) == list(RESIDENT_RGB)
    assert centre(1, 0) == LUT[255][:3].tolist()  # not resident: no dot
    assert (image[..., 3] == 255).all()


def test_an_empty_map_renders_an_empty_image():
    m = ExpertActivityMap()
    assert m.empty and m.hottest() == 0.0 and m.rgba().shape == (0, 0, 4)


def test_axis_ticks_are_whole_and_about_eight() -> None:
    from workbench.ui.telemetry.expert_activity import tick_step

    assert [tick_step(n) for n in (3, 8, 9, 24, 48, 128, 256)] == [1, 1, 2, 5, 10, 20, 50]


def test_the_map_shows_what_the_cache_holds_per_cell():
    from workbench.ui.telemetry.expert_activity import AHEAD_RGB, TRANSIENT_RGB

    holds = np.array([[0, 1, 2, 3]], dtype=np.uint8)
    m = ExpertActivityMap()
    m.add(ExpertActivity(routed=np.ones((1, 4), np.uint32), resident=holds > 0,
                         moe_layers=np.ones(1, bool), cached=True, holds=holds, policy="lfru"))
    assert m.policy == "lfru"
    assert m.describe(0, 0).endswith("resident no")
    assert m.describe(0, 1).endswith("resident yes")
    assert "transient" in m.describe(0, 2) and "read ahead" in m.describe(0, 3)
    centre = CELL_PX // 2
    dots = m.rgba()[centre::CELL_PX, centre::CELL_PX, :3]
    assert tuple(dots[0, 1]) == RESIDENT_RGB
    assert tuple(dots[0, 2]) == TRANSIENT_RGB and tuple(dots[0, 3]) == AHEAD_RGB
