"""Window fixtures: a qasync loop inside pytest-qt, a temp data dir, a window on the real model.

The loop is created "already running": pytest-qt spins the Qt event loop (qtbot.waitUntil), and
qasync runs asyncio callbacks from Qt's timers, so coroutines progress while a test waits on a
condition. Tests never sleep; they wait for a state.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import pytest

T = TypeVar("T")
MODEL_WAIT_MS = 120_000  # loading and answering on a busy 2-core machine


@pytest.fixture(autouse=True)
def _collect_on_the_ui_thread() -> Iterator[None]:
    """Qt objects must die on the UI thread (workbench/ui/ui_collector.py): no automatic cycle
    collection during a UI test, whose engine and database threads allocate too, and one
    collection on this thread once the test's widgets are closed (this fixture, set up before
    qtbot, is torn down after it)."""
    gc.disable()
    yield
    gc.collect()
    gc.enable()


@pytest.fixture(autouse=True)
def _sound_qt_binding(request: pytest.FixtureRequest) -> None:
    """Qt tests fail with the reason, instead of aborting the run, on a broken binding."""
    if "qtbot" not in request.fixturenames and "qapp" not in request.fixturenames:
        return
    from workbench.ui.qt_check import binding_problem

    problem = binding_problem()
    if problem:
        pytest.fail(problem, pytrace=False)


@pytest.fixture(autouse=True)
def _model_search_in_a_temporary_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The model picker searches the usual apps' folders (discovery.py): in tests, those of an
    empty temporary home, never the machine's (whose models would change what a test sees).
    Tests that put models there use this fixture's value."""
    from workbench.ui.models import discovery

    home = tmp_path / "home"
    real = discovery.default_sources
    monkeypatch.setattr(discovery, "default_sources",
                        lambda env=None, home_=None: real({"HOME": str(home)}))
    return home


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "data"
    monkeypatch.setenv("WORKBENCH_DATA_DIR", str(path))
    return path


@pytest.fixture
def aloop(qapp: Any) -> Iterator[asyncio.AbstractEventLoop]:
    import qasync

    loop = qasync.QEventLoop(qapp, already_running=True)
    # A plain pool we can join at teardown (qasync's default QThreads outlive the test).
    executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="test-pool")
    loop.set_default_executor(executor)
    asyncio.set_event_loop(loop)
    yield loop
    executor.shutdown(wait=True)
    # Undo what qasync's already_running mode did (it uses the same private asyncio hooks), so
    # later tests may call asyncio.run().
    qapp.aboutToQuit.disconnect(loop._after_run_forever)
    loop._after_run_forever()
    asyncio.events._set_running_loop(None)
    asyncio.set_event_loop(None)


@pytest.fixture
def qasync_policy(aloop: asyncio.AbstractEventLoop) -> Iterator[None]:
    """The global event-loop policy `qasync.run` installs for the window's whole life on this
    Python (below 3.12 a Qt loop policy, so another thread's `asyncio.run` builds a Qt loop;
    from 3.12 none): threads the window starts run under it here as they do in the app."""
    import qasync

    policy = getattr(qasync, "DefaultQEventLoopPolicy", None)
    if policy is None:  # Python 3.12+: qasync.run passes a loop factory instead
        yield
        return
    with qasync._set_event_loop_policy(policy()):
        yield


@pytest.fixture
def run(qtbot: Any, aloop: asyncio.AbstractEventLoop) -> Callable[..., Any]:
    """run(coro, timeout_ms) -> its result, with the Qt loop spinning meanwhile."""

    def runner(coro: Awaitable[T], timeout: int = MODEL_WAIT_MS) -> T:
        task = aloop.create_task(coro)  # type: ignore[arg-type]
        qtbot.waitUntil(task.done, timeout=timeout)
        return task.result()

    return runner


@pytest.fixture
def model_config(embedded_model_path: Path) -> Any:
    from workbench.config import Config

    # No automatic titles: a background title turn would race the tests' checks of the
    # engine's state (tests/ui/test_auto_titles.py turns them on).
    return Config().replace(model=str(embedded_model_path), n_threads=2, n_ctx=512,
                            n_predict=16, auto_title=False)


@pytest.fixture
def make_window(qtbot: Any, run: Callable[..., Any], data_dir: Path, model_config: Any
                ) -> Iterator[Callable[..., Any]]:
    """make_window(config=None, load=True, bridge=None) -> a shown QtMainWindow; shut down after."""
    from workbench.store import default_path
    from workbench.ui.bridge import EngineBridge
    from workbench.ui.db_worker import AsyncStore
    from workbench.ui.qt_main_window import QtMainWindow

    windows: list[QtMainWindow] = []

    def factory(config: Any = None, load: bool = True, bridge: Any = None) -> QtMainWindow:
        db = run(AsyncStore.open(default_path()))
        window = QtMainWindow(bridge or EngineBridge(), db, config or model_config)
        qtbot.addWidget(window)
        window.show()
        windows.append(window)
        run(window.start(load_model=load))
        return window

    yield factory
    for window in windows:
        run(window.shutdown())
