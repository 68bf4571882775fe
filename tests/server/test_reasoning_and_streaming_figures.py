"""Reasoning comes back as `reasoning_content` (the engine's reasoning parser, as llama.cpp's
server returns it), and on a model that streams its experts x_workbench carries the measured
hit rate and bytes read, the same figures the engine's own summary holds."""

from __future__ import annotations

import pytest

from tests.server.conftest import start_server
from workbench.config import Config

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

# ChatML, as SmolLM2's own, but the assistant's turn opens a reasoning span: everything the
# model writes until it closes the span is reasoning.
THINKING_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}")


@pytest.fixture(scope="module")
def thinking_engine(chat_model_path, tmp_path_factory):
    from workbench.server.engine_host import OwnEngine

    template = tmp_path_factory.mktemp("template") / "thinking.jinja"
    template.write_text(THINKING_TEMPLATE)
    engine = OwnEngine()
    engine.open(Config().replace(model=str(chat_model_path), n_threads=1, n_ctx=512,
                                 n_predict=64, chat_template_file=str(template)))
    yield engine
    engine.close()


def test_reasoning_is_returned_as_reasoning_content(thinking_engine):
    served, stop = start_server(thinking_engine)
    try:
        client = served.client()
        messages = [{"role": "user", "content": "Is 7 a prime number?"}]
        reply = client.chat.completions.create(model="any", messages=messages, max_tokens=12,
                                               temperature=0)
        message = reply.choices[0].message
        reasoning = message.model_extra.get("reasoning_content")
        assert reasoning and reasoning.strip()
        # What the parser kept as reasoning is not in the answer.
        assert reasoning not in (message.content or "")
        _, result = served.recorder.ended[-1]
        assert result.reasoning == reasoning and result.text == message.content
        chunks = list(client.chat.completions.create(model="any", messages=messages,
                                                     max_tokens=12, temperature=0, stream=True))
        streamed = "".join((c.choices[0].delta.model_extra or {}).get("reasoning_content") or ""
                           for c in chunks if c.choices)
        assert streamed == reasoning
        assert "".join(c.choices[0].delta.content or "" for c in chunks
                       if c.choices) == message.content
    finally:
        stop()


def test_a_streaming_moe_reports_its_hit_rate_and_bytes_read(tiny_moe_path):
    from workbench.server.engine_host import OwnEngine

    engine = OwnEngine()
    engine.open(Config().replace(model=str(tiny_moe_path), n_threads=1, n_ctx=256,
                                 n_predict=32, moe_stream=True, cache_mb=4, chat_template=False))
    served, stop = start_server(engine)
    try:
        reply = served.client().completions.create(model="any", prompt="hello there",
                                                   max_tokens=6, temperature=0)
        figures = reply.model_extra["x_workbench"]
        summary = served.recorder.ended[-1][1].summary
        assert figures["read_bytes"] > 0
        assert figures["read_bytes"] == int(summary.moe_read_mib * (1 << 20))
        assert 0 <= figures["cache_hit_pct"] <= 100
        assert figures["cache_hit_pct"] == round(summary.cache_hit_pct, 3)
        assert figures["tokens_per_second"] == round(summary.tokens_per_second, 3)
    finally:
        stop()
        engine.close()
