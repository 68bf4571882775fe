"""The embedded model's verification stamp (issue 12, case 11, a sibling): it was written in
place, so a full disk left a 0-byte stamp, and every later start died on it with a JSON
traceback. Now it is written whole or not at all, and a damaged one only costs a re-hash."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from workbench.embedded import gemma_model_path


@pytest.mark.slow
def test_a_damaged_stamp_is_verified_again_not_fatal(embedded_model_path: Path, tmp_path,
                                                      monkeypatch):
    # A cache of our own with a copy of the model: the user's cache is never touched (other
    # runs read it), and the copy is what a real earlier start left.
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path))
    models = tmp_path / "models"
    models.mkdir()
    target = models / embedded_model_path.name
    shutil.copyfile(embedded_model_path, target)
    stamp = target.with_suffix(".verified.json")
    stamp.write_text("")  # what a full disk used to leave

    assert gemma_model_path() == target
    recorded = json.loads(stamp.read_text())
    assert recorded["size"] == target.stat().st_size
    assert sorted(p.name for p in models.iterdir()) == sorted([target.name, stamp.name])
