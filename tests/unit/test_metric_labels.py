"""Metric labels and units come from the one metric table (issue 27): the run curves and the
plot readout name a figure and its unit as metric_labels says, and a column's unit is the
table's; "unmeasured becomes NaN" is one helper that every reader of figures uses."""

from __future__ import annotations

import math

import pytest

from workbench.engine import metric_columns, metric_labels
from workbench.engine.measured import as_measured
from workbench.engine.metric_labels import Shown
from workbench.ui.runs import curves
from workbench.ui.telemetry import series


def test_a_columns_unit_is_the_tables():
    for shown in metric_labels.SHOWN:
        if not shown.of:
            assert shown.unit == metric_columns.BY_NAME[shown.name].unit


def test_the_run_curves_and_the_readout_use_the_table():
    for metric in curves.METRICS:
        assert (metric.label, metric.unit) == (metric_labels.label(metric.key),
                                               metric_labels.unit(metric.key))
    assert curves.BY_KEY["majflt"].unit == metric_columns.BY_NAME["majflt"].unit == "count"
    assert {name for name, _ in series.READOUT} <= metric_labels.BY_NAME.keys()


def test_a_label_table_that_drifts_from_the_columns_fails():
    with pytest.raises(metric_columns.ColumnsDrift, match="neither a column"):
        metric_labels._check((Shown("no_such_ms", "nothing", "nil"),))
    with pytest.raises(metric_columns.ColumnsDrift, match="do not repeat it"):
        metric_labels._check((Shown("wall_ms", "wall", "wall", derived_unit="s"),))
    with pytest.raises(metric_columns.ColumnsDrift, match="names no unit"):
        metric_labels._check((Shown("read_mib", "read", "read", of="read_bytes"),))


def test_readout_values_print_in_the_tables_units():
    assert metric_labels.readout_value("wall_ms", 20.04, 1) == "20.0 ms"
    assert metric_labels.readout_value("cache_hit_pct", 12.5, 1) == "12.5%"
    assert metric_labels.readout_value("majflt", 3, 0) == "3"


@pytest.mark.parametrize("value", [-1, -1.0, -5, None, "12", True, False])
def test_unmeasured_is_nan(value):
    assert math.isnan(as_measured(value))


def test_measured_values_pass_through():
    assert as_measured(0) == 0.0 and as_measured(41.5) == 41.5 and as_measured(7) == 7.0
