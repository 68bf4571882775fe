"""Files named or filled in ways the happy path never sees: each opens, or says what is wrong.

Regressions for issue 12, cases 9 and 10.
"""

from __future__ import annotations

import os

import pytest

from workbench.engine.chat import template as template_module
from workbench.engine.requests import GenerateRequest, SessionError


def test_a_model_path_that_is_not_utf8_loads(embedded_model_path, open_session, tmp_path):
    odd = os.path.join(os.fsencode(tmp_path), b"mod\xffel.gguf")
    os.symlink(os.fsencode(embedded_model_path), odd)
    name = os.fsdecode(odd)  # a str with a surrogate escape, as os.listdir would give it
    s = open_session(model=name, n_predict=4)
    result = s.generate(GenerateRequest(text="Hello"))
    assert result.ok and result.summary.n_generated > 0


def test_a_template_file_that_is_not_utf8_is_a_clear_error(
    embedded_model_path, open_session, tmp_path
):
    bad = tmp_path / "latin1.jinja"
    bad.write_bytes("{{ 'caf\xe9' }}".encode("latin-1"))
    with pytest.raises(SessionError, match=r"latin1\.jinja is not UTF-8 text \(byte 7 is 0xe9\)"):
        open_session(model=str(embedded_model_path), chat_template_file=str(bad))


def test_an_empty_template_file_is_refused_not_replaced(embedded_model_path, open_session,
                                                        tmp_path):
    empty = tmp_path / "empty.jinja"
    empty.write_text("  \n")
    with pytest.raises(SessionError, match=r"empty\.jinja is empty.*clear the setting"):
        open_session(model=str(embedded_model_path), chat_template_file=str(empty))


def test_a_runaway_template_file_loads_and_the_turn_says_why_it_went_plain(
    embedded_model_path, open_session, tmp_path, monkeypatch
):
    monkeypatch.setattr(template_module, "RENDER_BUDGET_S", 0.3)
    monkeypatch.setattr(template_module, "_RUNAWAY", set())
    loop = tmp_path / "loop.jinja"
    loop.write_text("{% for i in range(100000) %}{% for j in range(100000) %}{{ i }}"
                    "{% endfor %}{% endfor %}")
    s = open_session(model=str(embedded_model_path), chat_template_file=str(loop), n_predict=4)
    result = s.generate(GenerateRequest(text="Hello"))
    assert result.ok
    assert any("file loop.jinja" in note and "did not finish rendering" in note
               for note in result.notes), result.notes


def test_the_native_boundary_refuses_what_its_c_fields_cannot_hold(embedded_model_path):
    # validate() refuses these first; this is the second line, for any caller that skips it.
    from workbench.backend import llama

    model = llama.Model(embedded_model_path, llama.ModelParams())
    try:
        for params in (llama.ContextParams(n_ctx=2**32 + 16, n_batch=512, n_ubatch=0,
                                           n_threads=2),
                       llama.ContextParams(n_ctx=512, n_batch=512, n_ubatch=0,
                                           n_threads=100_000)):
            with pytest.raises(llama.LlamaError, match=r"outside what llama\.cpp accepts"):
                llama.Context(model, params)
    finally:
        model.close()


def test_a_context_past_the_trained_one_is_warned_about(tiny_moe_path, open_session):
    s = open_session(model=str(tiny_moe_path), chat_template=False, n_ctx=1024, n_predict=4)
    assert any("longer than the 256 this model was trained on" in w for w in s.warnings)
    fits = open_session(model=str(tiny_moe_path), chat_template=False, n_ctx=256, n_predict=4)
    assert not any("trained on" in w for w in fits.warnings)
