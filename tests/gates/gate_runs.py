"""What every gate does: run a session's generation with its full logits recorded, and compare
two runs bit for bit."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tests.logits import recorded_logits
from workbench.config import Config
from workbench.engine.requests import GenerateRequest
from workbench.engine.session import Session
from workbench.moe.routes import RouteLoad

PROMPT = "Hello world, this is a streaming test."
N_PREDICT = 24


@dataclass
class Run:
    text: str
    token_ids: list[int]
    logits: list[np.ndarray]
    session: Session


def gate_config(model: Path, **changes: object) -> Config:
    return Config(model=str(model), chat_template=False, n_predict=N_PREDICT, n_ctx=256,
                  n_threads=2, **changes)


def generate(session: Session, text: str = PROMPT, **request: object) -> Run:
    """Generates while recording a copy of the full logits each token is picked from."""
    with recorded_logits(session) as logits:
        result = session.generate(GenerateRequest(text=text, **request))
    assert result.ok, result.error
    ids = [m for m in session.kv_tokens[-result.summary.n_generated:]]
    return Run(result.text, ids, logits, session)


def recorded(session: Session) -> list[RouteLoad]:
    """Every layer load the session recorded (opened with record_routes), in order."""
    assert session.streaming is not None and session.streaming.routes is not None
    return [load for _, load in session.streaming.routes.loads()]


def assert_identical(a: Run, b: Run) -> None:
    assert len(a.logits) == len(b.logits) == N_PREDICT
    for step, (x, y) in enumerate(zip(a.logits, b.logits, strict=True)):
        assert np.array_equal(x, y), f"logits differ at step {step}: max |d| {np.abs(x - y).max()}"
    assert a.token_ids == b.token_ids and a.text == b.text
