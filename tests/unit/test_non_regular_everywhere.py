"""Every reader of a path from a user, a flag, a setting or the data folder refuses a FIFO before
it opens it (`file_kind.regular_file`): opening a FIFO for reading waits for a writer forever,
so each call runs under a deadline and a regression fails instead of hanging the suite."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from workbench.file_kind import NotRegularFileError, read_text, regular_file

DEADLINE_S = 20


def within_deadline(fn: Callable[[], object], fifo: Path) -> tuple[object, BaseException | None]:
    """fn()'s result or exception; fails the test if it is still running after the deadline
    (and then opens the FIFO's other end so the stuck thread can finish)."""
    box: dict[str, object] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the test thread
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(DEADLINE_S)
    if thread.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("the call blocked on the FIFO instead of refusing it")
    return box.get("value"), box.get("error")  # type: ignore[return-value]


@pytest.fixture
def fifo(tmp_path) -> Path:
    path = tmp_path / "input"
    os.mkfifo(path)
    return path


def test_the_helper_refuses_before_opening_and_passes_regular_files(fifo, tmp_path):
    _, error = within_deadline(lambda: read_text(fifo, "a prompt file"), fifo)
    assert isinstance(error, NotRegularFileError) and isinstance(error, OSError)
    assert str(error) == f"{fifo} is a named pipe (FIFO), not a prompt file"
    with pytest.raises(NotRegularFileError, match="a folder"):
        regular_file(tmp_path)
    regular = tmp_path / "x.txt"
    regular.write_text("ok")
    assert read_text(regular) == "ok"
    link = tmp_path / "link"
    link.symlink_to(regular)
    assert regular_file(link) == link  # a link to a regular file is one
    with pytest.raises(FileNotFoundError):  # missing: the caller's own message, as before
        read_text(tmp_path / "missing")


def _store_open(path: Path) -> object:
    from workbench.store import Store

    return Store.open(path, recover=False)


def _store_health(path: Path) -> object:
    from workbench.store.health import check_file
    from workbench.store.schema import SCHEMA_VERSION

    return check_file(path, SCHEMA_VERSION)


def _draft(path: Path) -> object:
    from workbench.engine.model_load import check_draft_model
    from workbench.moe.layout import ModelFacts

    return check_draft_model(path, ModelFacts.__new__(ModelFacts))


def _warm_start(path: Path) -> object:
    from workbench.engine.warm_start import load_frequencies

    counts, why = load_frequencies(path, (2, 4))
    assert counts is None
    return why  # a warning, and a cold start


def _data_folder(load: Callable[[Path], object], name: str) -> Callable[[Path], object]:
    def run(fifo: Path) -> object:
        (fifo.parent / "data").mkdir()
        os.mkfifo(fifo.parent / "data" / name)
        return load(fifo.parent / "data")
    return run


def _window_memory(data: Path) -> object:
    from workbench.ui.window_memory import WindowMemory, load_memory

    assert load_memory(data) == WindowMemory()  # a first start
    return "default"


def _model_settings(data: Path) -> object:
    from workbench.engine.model_settings import load_remembered

    assert load_remembered(data) == {}
    return "default"


def _folders(data: Path) -> object:
    from workbench.ui.models.discovery import load_folders

    assert load_folders(data) == []
    return "default"


def _recent(data: Path) -> object:
    from workbench.ui.models.recent import load_recent

    assert load_recent(data / "recent_models.json") == []
    return "default"


def _reader(module: str, name: str) -> Callable[[Path], object]:
    def run(path: Path) -> object:
        import importlib

        return getattr(importlib.import_module(module), name)(path)
    return run


# What each reader does with a FIFO: raise (an error the command reports), or carry on with a
# default (data-folder files, the warm start) as it does with a damaged file.
READERS: dict[str, Callable[[Path], object]] = {
    "route trace (replay)": _reader("workbench.moe.route_trace", "read_trace"),
    "metrics file (explain, compare)": _reader("workbench.engine.metrics_reader",
                                               "read_metrics_csv"),
    "preset file (bench matrix)": _reader("workbench.presets", "load_preset_file"),
    "prompt file (bench matrix)": _reader("workbench.bench.arms", "read_prompts"),
    "store (--db)": _store_open,
    "store health check": _store_health,
    "draft model": _draft,
    "expert tensors (explain --model)": _reader("workbench.moe.layout", "expert_tensors"),
    "warm-start routing file": _warm_start,
    "window memory": _data_folder(_window_memory, "window.json"),
    "model settings": _data_folder(_model_settings, "model_settings.json"),
    "model folders": _data_folder(_folders, "model_folders.json"),
    "recent models": _data_folder(_recent, "recent_models.json"),
}


@pytest.mark.parametrize("name", list(READERS))
def test_every_reader_refuses_a_fifo_without_opening_it(fifo, name):
    value, error = within_deadline(lambda: READERS[name](fifo), fifo)
    if error is not None:
        assert "named pipe (FIFO)" in str(error), f"{type(error).__name__}: {error}"
    else:
        assert value is not None
        if isinstance(value, str) and value != "default":
            assert "named pipe (FIFO)" in value
    assert fifo.exists()
