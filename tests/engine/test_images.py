"""Images through libmtmd on the synthetic projector: real llama.cpp, real mtmd, real encode.

The projector's output is noise; these tests assert the mechanics: image tokens counted,
positions advanced in the real KV memory, the same image reused from the KV (the session's
encode counter does not move), a different image encoded, cancel during an encode, bad input.
"""

from __future__ import annotations

import shutil

import pytest

from workbench.engine.images import ImageInput, ImageInputError, read_image
from workbench.engine.requests import NO_PROJECTOR, GenerateRequest, SessionError, StopReason
from workbench.moe.synth_mmproj import ProjectorSpec, solid_png, write_projector

TOKENS_PER_IMAGE = ProjectorSpec().tokens_per_image  # 16
RED = ImageInput(solid_png(48, 40, (255, 0, 0)), "red.png")
BLUE = ImageInput(solid_png(40, 48, (0, 0, 255)), "blue.png")


@pytest.fixture
def vision(tiny_moe_path, tiny_mmproj_path, open_session):
    def factory(**changes):
        changes.setdefault("n_ctx", 256)
        changes.setdefault("n_predict", 6)
        return open_session(model=str(tiny_moe_path), mmproj=str(tiny_mmproj_path), **changes)
    return factory


def _image_positions(session) -> int:
    return sum(1 for t in session.kv_tokens if t < 0)


def test_an_image_is_counted_and_takes_its_positions_in_the_kv(vision):
    s = vision()
    r = s.generate(GenerateRequest("Describe", images=(RED,)))
    assert r.ok, r.error
    summary = r.summary
    assert (summary.n_images, summary.images_encoded, summary.image_tokens) == (
        1, 1, TOKENS_PER_IMAGE)
    assert summary.image_encode_seconds > 0
    assert summary.ttft_seconds >= summary.image_encode_seconds  # TTFT includes the encode
    assert s.image_encodes == 1
    assert _image_positions(s) == TOKENS_PER_IMAGE
    # The mirror and the real memory agree position for position, images included.
    assert summary.n_past == len(s.kv_tokens) == s._p.ctx.pos_max() + 1
    assert summary.n_prompt == len(s.kv_tokens) - summary.n_generated
    assert r.history[0]["images"] == RED.sha256


def test_the_same_image_in_a_later_turn_is_reused_not_encoded(vision):
    s = vision()
    first = s.generate(GenerateRequest("Describe", images=(RED,)))
    held = len(s.kv_tokens)
    r = s.generate(GenerateRequest("And now?", history=first.history))
    assert r.ok, r.error
    assert (r.summary.n_images, r.summary.images_encoded, r.summary.image_tokens) == (1, 0, 0)
    assert s.image_encodes == 1  # the counter proves the image was not encoded again
    assert r.summary.n_reused >= held - 1  # everything up to the last answer token is kept
    assert _image_positions(s) == TOKENS_PER_IMAGE


def test_a_different_image_is_encoded_and_the_first_still_reused(vision):
    s = vision()
    first = s.generate(GenerateRequest("Describe", images=(RED,)))
    r = s.generate(GenerateRequest("Compare", history=first.history, images=(BLUE,)))
    assert r.ok, r.error
    assert (r.summary.n_images, r.summary.images_encoded) == (2, 1)
    assert r.summary.image_tokens == TOKENS_PER_IMAGE
    assert s.image_encodes == 2
    assert _image_positions(s) == 2 * TOKENS_PER_IMAGE


def test_a_reused_image_answers_as_a_fresh_read_of_the_whole_conversation(vision):
    """The KV mirror is exact, image positions included: the second turn's answer on the
    reused KV equals the answer of a new session that reads everything from scratch."""
    s = vision()
    first = s.generate(GenerateRequest("Describe", images=(RED,)))
    reused = s.generate(GenerateRequest("More", history=first.history))
    fresh = vision()
    again = fresh.generate(GenerateRequest("More", history=reused.history[:2],
                                           history_images=(RED,)))
    assert again.summary.images_encoded == 1 and again.summary.n_reused == 0
    assert again.text == reused.text


def test_changing_an_earlier_image_re_reads_from_it(vision):
    s = vision()
    first = s.generate(GenerateRequest("Describe", images=(RED,)))
    history = [dict(m) for m in first.history]
    history[0]["images"] = BLUE.sha256
    r = s.generate(GenerateRequest("More", history=tuple(history), history_images=(BLUE,)))
    assert r.ok, r.error
    assert r.summary.images_encoded == 1
    assert r.summary.n_reused < len(s.kv_tokens) - r.summary.n_prompt + 1
    assert r.summary.n_reused <= next(i for i, t in enumerate(s.kv_tokens) if t < 0)


def test_cancel_during_an_encode_leaves_the_conversation_continuable(vision):
    s = vision()
    hello = s.generate(GenerateRequest("Hello"))
    before_tokens, before_history = list(s.kv_tokens), hello.history
    projector = s._p.projector
    real_encode = projector.encode

    def encode_with_a_stop_arriving(chunk):
        s.cancel()  # the Stop lands while the (uninterruptible) encoder runs
        return real_encode(chunk)

    projector.encode = encode_with_a_stop_arriving
    r = s.generate(GenerateRequest("Describe", history=before_history, images=(RED,)))
    projector.encode = real_encode
    assert r.stop_reason is StopReason.STOPPED
    assert r.history == before_history
    assert s.kv_tokens == before_tokens[: len(s.kv_tokens)]
    assert s._p.ctx.pos_max() + 1 == len(s.kv_tokens)  # no stray image positions in the memory
    r = s.generate(GenerateRequest("Describe", history=before_history, images=(RED,)))
    assert r.ok and r.stop_reason is not StopReason.STOPPED, r.error
    assert r.summary.images_encoded == 1
    assert len(r.history) == len(before_history) + 2


def test_attaching_without_a_projector_says_how_to_fix_it(tiny_moe_path, open_session):
    s = open_session(model=str(tiny_moe_path), n_ctx=256, n_predict=4)
    r = s.generate(GenerateRequest("Describe", images=(RED,)))
    assert r.stop_reason is StopReason.REJECTED
    assert r.error == NO_PROJECTOR and "mmproj" in r.error and "model picker" in r.error
    assert r.history == () and s.kv_tokens == []
    assert r.summary is None


def test_a_conversation_with_images_reopened_without_a_projector_is_usable(
        vision, tiny_moe_path, open_session):
    s = vision()
    first = s.generate(GenerateRequest("Describe", images=(RED,)))
    plain = open_session(model=str(tiny_moe_path), n_ctx=256, n_predict=4)
    r = plain.generate(GenerateRequest("And the text?", history=first.history,
                                       history_images=(RED,)))
    assert r.ok, r.error
    assert any("cannot see" in n and "mmproj" in n for n in r.notes)
    assert r.summary.n_images == -1  # unmeasured: this session has no projector
    assert _image_positions(plain) == 0


@pytest.mark.parametrize(("data", "says"), [
    (b"", "empty (0 bytes)"),
    (b"this is not an image at all", "not a usable image"),
    (solid_png(4, 4, (1, 2, 3))[:40], "not a usable image"),  # truncated PNG
])
def test_bad_images_are_refused_and_nothing_is_lost(vision, data, says):
    s = vision()
    history, tokens = s.generate(GenerateRequest("Hello")).history, list(s.kv_tokens)
    r = s.generate(GenerateRequest("Describe", history=history,
                                   images=(ImageInput(data, "x.png"),)))
    assert r.stop_reason is StopReason.REJECTED
    assert says in r.error and "x.png" in r.error and "nothing was lost" in r.error
    assert r.history == history and s.kv_tokens == tokens
    assert s.generate(GenerateRequest("Still there?", history=history)).ok


def test_a_20000_px_png_is_refused_with_the_limit_before_decoding(vision):
    import struct
    import zlib

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    header = struct.pack(">IIBBBBB", 20000, 20000, 8, 2, 0, 0, 0)
    huge = ImageInput(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
                      + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b""), "big.png")
    r = vision().generate(GenerateRequest("Describe", images=(huge,)))
    assert r.stop_reason is StopReason.REJECTED
    assert "20000 × 20000" in r.error and "8192" in r.error


def test_an_image_path_that_vanished_says_so(tmp_path):
    path = tmp_path / "photo.png"
    path.write_bytes(RED.data)
    assert read_image(path).sha256 == RED.sha256
    path.unlink()
    with pytest.raises(ImageInputError, match="gone"):
        read_image(path)


def test_a_projector_of_another_width_is_refused(tiny_moe_path, tmp_path, open_session):
    narrow = write_projector(tmp_path / "mmproj-narrow.gguf", ProjectorSpec(n_embd_out=64))
    with pytest.raises(SessionError, match=r"64 wide .* reads 128"):
        open_session(model=str(tiny_moe_path), mmproj=str(narrow), n_ctx=256, n_predict=4)


def test_files_that_are_not_projectors_are_refused(tiny_moe_path, tiny_mmproj_path, tmp_path,
                                                    open_session):
    random_bytes = tmp_path / "random.gguf"
    random_bytes.write_bytes(bytes(range(256)) * 40)
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(tiny_mmproj_path.read_bytes()[: tiny_mmproj_path.stat().st_size // 2])
    language_model = tmp_path / "model-copy.gguf"
    shutil.copy(tiny_moe_path, language_model)
    for path, says in ((random_bytes, "not a GGUF file"), (truncated, "truncated"),
                       (language_model, "language model, not an image projector"),
                       (tmp_path / "missing.gguf", "does not exist")):
        with pytest.raises(SessionError, match=says):
            open_session(model=str(tiny_moe_path), mmproj=str(path), n_ctx=256, n_predict=4)
