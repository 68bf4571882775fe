"""A template that never finishes rendering is stopped, named, and not waited for again.

Regression for issue 12, case 10: nested loops in a chat template hung the model load, because
the thinking probe rendered it with no limit.
"""

from __future__ import annotations

import sys

import pytest

from workbench.engine.chat import template as template_module
from workbench.engine.chat.template import ChatTemplate, TemplateError
from workbench.engine.chat.think import ThinkControl, probe_think_control

RUNAWAY = ("{% for i in range(100000) %}{% for j in range(100000) %}{{ i }}{% endfor %}"
           "{% endfor %}")
GROWING = "{% set xs = [1] %}{% for x in xs %}{% do xs.append(x) %}{% endfor %}"
FINE = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
HI = [{"role": "user", "content": "hi"}]


@pytest.fixture(autouse=True)
def short_budget(monkeypatch):
    monkeypatch.setattr(template_module, "RENDER_BUDGET_S", 0.3)
    monkeypatch.setattr(template_module, "_RUNAWAY", set())


@pytest.fixture
def renders(monkeypatch) -> list[str]:
    """Every bounded render that starts (how often a template was really run), counted without
    a clock: no timing asserts in unit tests; a render that never ended would meet the suite's
    timeout instead."""
    started: list[str] = []
    bounded = template_module._render_bounded

    def counting(template, context):
        started.append("render")
        return bounded(template, context)

    monkeypatch.setattr(template_module, "_render_bounded", counting)
    return started


@pytest.mark.parametrize("source", [RUNAWAY, GROWING], ids=["nested-ranges", "growing-list"])
def test_a_runaway_render_stops_with_a_message_naming_the_template(source, renders):
    t = ChatTemplate(source=source, bos_token="", eos_token="", name="the template file x.jinja")
    with pytest.raises(TemplateError, match=r"x\.jinja did not finish rendering within 0\.3 s"):
        t.render(HI)
    assert renders == ["render"] and source in template_module._RUNAWAY
    # Remembered: the next render fails at once, without running the template again.
    with pytest.raises(TemplateError, match="did not finish"):
        t.render(HI)
    assert renders == ["render"]


def test_the_thinking_probe_of_a_runaway_template_ends(renders):
    t = ChatTemplate(source=RUNAWAY + "x", bos_token="", eos_token="")
    assert probe_think_control(t) is ThinkControl.TEMPLATE
    assert len(renders) == 1  # the probe's first render hit the budget; the rest were skipped


def test_an_ordinary_template_renders_and_the_tracer_is_restored():
    sentinel = sys.gettrace()
    t = ChatTemplate(source=FINE, bos_token="", eos_token="")
    assert t.render(HI) == "<user>hi"
    assert sys.gettrace() is sentinel
