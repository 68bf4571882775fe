"""Shared fixtures: the real embedded model, a synthetic MoE, sessions that always close."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# Nothing a test runs writes to the user's data folder (conversations, window memory, the
# expert-routing frequencies warm start keeps): its commands and subprocesses get a folder of
# the run's own. A test that needs another sets WORKBENCH_DATA_DIR itself.
os.environ.setdefault("WORKBENCH_DATA_DIR", tempfile.mkdtemp(prefix="workbench-test-data-"))

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"


@pytest.fixture(scope="session")
def embedded_model_path() -> Path:
    """gemma-3-270m: the tests' pinned tokens, templates and logits were taken on it."""
    from workbench.embedded import gemma_model_path

    return gemma_model_path()


@pytest.fixture(scope="session")
def chat_model_path() -> Path:
    """SmolLM2-135M-Instruct, the default the window and `chat` open (it answers questions)."""
    from workbench.embedded import chat_model_path

    return chat_model_path()


@pytest.fixture(scope="session")
def tiny_moe_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from workbench.moe.synth import write_synthetic_moe

    out = tmp_path_factory.mktemp("models") / "tiny-qwen3moe.gguf"
    return write_synthetic_moe(out, arch="qwen3moe", size="tiny")[0]


@pytest.fixture(scope="session")
def tiny_mmproj_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A synthetic image projector that fits the tiny model (16 tokens per image). In a folder
    of its own: beside the model it would be found by every test that opens that model."""
    from workbench.moe.synth import spec_for
    from workbench.moe.synth_mmproj import ProjectorSpec, write_projector

    out = tmp_path_factory.mktemp("projectors") / "mmproj-tiny.gguf"
    return write_projector(out, ProjectorSpec(n_embd_out=spec_for("qwen3moe", "tiny").n_embd))


@pytest.fixture
def open_session() -> Iterator[Callable[..., object]]:
    """Factory: open_session(**config_changes) -> Session; every session is closed afterwards."""
    from workbench.config import Config
    from workbench.engine.session import Session

    opened: list[Session] = []

    def factory(sink=None, kv_dir=None, **changes: object) -> Session:
        changes.setdefault("n_threads", 2)
        session = Session.open(Config().replace(**changes), sink=sink, kv_dir=kv_dir)
        opened.append(session)
        return session

    yield factory
    for session in opened:
        session.close()


# ---- tests by cost --------------------------------------------------------------------------
# The fast set (the default `pytest`: unit and widget tests, minutes) loads no model; the slow
# set (`-m slow`) is every test that runs a real model, and is marked here from what the test
# uses, so a new test lands in the right set without a decorator. scripts/test and CI run both.
# A test left in the fast set that opens a model all the same fails (see _fast_means_no_model).
SLOW_DIRS = frozenset({"engine", "gates", "cli", "packaging"})  # every test there runs a model
MODEL_FIXTURES = frozenset({"embedded_model_path", "chat_model_path", "open_session",
                            "model_config", "make_window"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tests = REPO / "tests"
    for item in items:
        parts = Path(str(item.fspath)).resolve().relative_to(tests).parts
        uses = set(getattr(item, "fixturenames", ()))
        if (parts[0] in SLOW_DIRS or uses & MODEL_FIXTURES) and not item.get_closest_marker(
                "bundle"):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _fast_means_no_model(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
                         ) -> Iterator[None]:
    """A test in the fast set must not open a model: it would make the fast set slow."""
    if request.node.get_closest_marker("slow") or request.node.get_closest_marker("bundle"):
        yield
        return
    from workbench.engine.session import Session

    opened: list[str] = []
    real = Session.open.__func__  # type: ignore[attr-defined]

    def counting(cls, config, **kwargs):
        opened.append(config.model or "the bundled model")
        return real(cls, config, **kwargs)

    monkeypatch.setattr(Session, "open", classmethod(counting))
    yield
    if opened:
        pytest.fail(f"{request.node.nodeid} opened a model ({opened[0]}) but is not in the "
                    "slow set: give it a model fixture (tests/conftest.py MODEL_FIXTURES) or "
                    "mark it @pytest.mark.slow")
