"""The gates' one way to run a generation in a session of its own, closed after the test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.gates.gate_runs import Run, gate_config, generate
from workbench.engine.session import Session

RunFactory = Callable[..., Run]


@pytest.fixture
def run() -> Iterator[RunFactory]:
    """Factory: run(model, record_routes=False, **config_changes) -> Run, a fresh session's
    recorded generation of the gates' prompt. A module whose gates need other defaults (the
    drop gates' n_ubatch 1) overrides this fixture with a `functools.partial` of it."""
    sessions: list[Session] = []

    def factory(model: Path, record_routes: bool = False, **changes: object) -> Run:
        session = Session.open(gate_config(model, **changes), record_routes=record_routes)
        sessions.append(session)
        return generate(session)

    yield factory
    for s in sessions:
        s.close()
