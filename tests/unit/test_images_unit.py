"""The Qt-free pieces of images: header sizes, the KV stand-in ids, the stats phrase, finding
the projector beside a model."""

from __future__ import annotations

import struct

from workbench.engine.images import image_size, image_token_ids
from workbench.moe.projector import find_beside
from workbench.moe.synth_mmproj import solid_png
from workbench.store import MessageStats
from workbench.store.stats_line import format_stats_line, image_phrase


def test_image_sizes_from_headers():
    assert image_size(solid_png(37, 21, (0, 0, 0))) == (37, 21)
    assert image_size(b"GIF89a" + struct.pack("<HH", 640, 480) + b"\0" * 8) == (640, 480)
    bmp = b"BM" + b"\0" * 16 + struct.pack("<ii", 300, -200) + b"\0" * 8
    assert image_size(bmp) == (300, 200)
    sof = b"\xff\xc0" + struct.pack(">HBHH", 17, 8, 1080, 1920) + b"\0" * 10
    jpeg = b"\xff\xd8" + b"\xff\xe0" + struct.pack(">H", 16) + b"\0" * 14 + sof
    assert image_size(jpeg) == (1920, 1080)
    vp8x = b"RIFF\0\0\0\0WEBPVP8X" + b"\0" * 8 + (999).to_bytes(3, "little") + (499).to_bytes(
        3, "little")
    assert image_size(vp8x) == (1000, 500)
    assert image_size(b"not an image at all, just words") is None
    assert image_size(b"") is None


def test_stand_in_ids_are_negative_int32_and_follow_the_content():
    a = image_token_ids("ab" * 32, 16)
    assert a == image_token_ids("ab" * 32, 16)  # the same image, the same ids: reused
    assert all(-(2**31) <= t < 0 for t in a) and len(set(a)) == 16
    b = image_token_ids("cd" * 32, 16)
    assert a[0] != b[0]  # a different image diverges at its first position


def test_the_stats_phrase_for_images():
    encoded = MessageStats(n_images=1, images_encoded=1, image_tokens=256, image_encode_s=0.8)
    assert image_phrase(encoded) == "1 image, 256 tokens, encoded in 0.80 s"
    assert "1 image, 256 tokens, encoded in 0.80 s" in format_stats_line(encoded)
    reused = MessageStats(n_images=2, images_encoded=0, image_tokens=0, image_encode_s=0.0)
    assert image_phrase(reused) == "2 images reused from memory"
    mixed = MessageStats(n_images=2, images_encoded=1, image_tokens=16, image_encode_s=0.01)
    assert image_phrase(mixed) == "2 images (1 encoded), 16 tokens, encoded in 0.01 s"
    assert image_phrase(MessageStats()) == ""  # no projector: nothing said, no fake zeros
    assert image_phrase(MessageStats(n_images=0, images_encoded=0)) == ""


def test_the_projector_beside_a_model(tmp_path):
    model = tmp_path / "Qwen2.5-VL-7B-Q4_K_M.gguf"
    model.write_bytes(b"GGUF")
    assert find_beside(model) is None
    only = tmp_path / "mmproj-F16.gguf"
    only.write_bytes(b"GGUF")
    assert find_beside(model) == only
    (tmp_path / "mmproj-Other-F16.gguf").write_bytes(b"GGUF")
    assert find_beside(model) is None  # two, neither named after the model: none is guessed
    named = tmp_path / "mmproj-Qwen2.5-VL-7B-f16.gguf"
    named.write_bytes(b"GGUF")
    assert find_beside(model) == named
