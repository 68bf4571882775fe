"""Images on M-RoPE models take one KV cell per embedding, more than the positions they count.

No M-RoPE vision model can be made here (the synthetic projector gives an image as many
positions as embeddings), so the image's chunk records are made to say what an M-RoPE model's
say: more embeddings (`n_tokens`) than positions (`n_pos`). Everything else is real: llama.cpp,
libmtmd, the encode and the decode (which read the real chunk); only the session's accounting
sees the larger count, which is the part under test.
"""

from __future__ import annotations

import pytest

from tests.engine.test_images import RED, TOKENS_PER_IMAGE
from workbench.backend import mtmd
from workbench.engine.images import image_token_ids, kv_cells
from workbench.engine.requests import GenerateRequest

EXTRA = 15 * TOKENS_PER_IMAGE  # embeddings beyond the image's positions (240)


@pytest.fixture
def mrope(monkeypatch):
    real = mtmd.Chunks.__init__

    def like_mrope(self, ptr):
        real(self, ptr)
        for chunk in self.items:
            if chunk.kind != mtmd.CHUNK_TEXT:
                chunk.n_tokens = chunk.n_pos + EXTRA

    monkeypatch.setattr(mtmd.Chunks, "__init__", like_mrope)


@pytest.fixture
def vision(tiny_moe_path, tiny_mmproj_path, open_session):
    def factory(**changes):
        changes.setdefault("n_predict", 6)
        return open_session(model=str(tiny_moe_path), mmproj=str(tiny_mmproj_path), **changes)
    return factory


def test_cells_count_each_images_embeddings_wherever_its_stand_ins_are():
    ids = image_token_ids("ab" * 32, 4)
    tokens = [1, 2, *ids, 3]
    assert kv_cells(tokens, {}) == 7
    assert kv_cells(tokens, {ids[0]: 12}) == 19
    assert kv_cells(tokens[:2], {ids[0]: 12}) == 2  # a prefix before the image


def test_a_prompt_whose_cells_overflow_the_context_is_refused(vision, mrope):
    # Positions fit (the prompt is ~26 of 256), cells do not (+240 for the image).
    s = vision(n_ctx=256)  # llama.cpp's smallest context
    r = s.generate(GenerateRequest("Describe", images=(RED,)))
    assert not r.ok and "more than the context of 256 tokens" in r.error
    assert s.kv_tokens == []  # nothing was read


def test_the_gauge_and_the_forecast_count_cells(vision, mrope):
    s = vision(n_ctx=512)
    r = s.generate(GenerateRequest("Describe", images=(RED,)))
    assert r.ok, r.error
    assert s.kv_cells == len(s.kv_tokens) + EXTRA  # what the context gauge shows
    f = s.forecast(GenerateRequest("And now?", history=r.history))
    # The held conversation (with its image) is reused: counted in cells on both sides.
    assert f.n_reused == kv_cells(s.kv_tokens[:f.n_reused], s._p.prompts.extra_cells)
    assert f.n_reused >= len(s.kv_tokens) - r.summary.n_generated + EXTRA - 1
    assert f.n_prompt > f.n_reused
