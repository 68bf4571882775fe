"""Ctrl-C during a model load cancels the load and the command exits cleanly.

Regression for issue 12, case 8: the KeyboardInterrupt surfaced inside llama.cpp's ctypes log
callback, which swallowed it (the whole answer then ran), or ended in a traceback.
"""

from __future__ import annotations

import os
import signal
import time

from workbench.cli.main import build_parser
from workbench.engine.session import Session


def test_ctrl_c_during_the_load_cancels_it(embedded_model_path, monkeypatch, capsys):
    real_open = Session.open.__func__
    calls: list[float] = []

    def open_with_a_ctrl_c(cls, config, *, progress=None, **options):
        def first_progress_presses_ctrl_c(fraction: float) -> bool:
            calls.append(fraction)
            if len(calls) == 1:
                os.kill(os.getpid(), signal.SIGINT)  # what the terminal sends on Ctrl-C
                deadline = time.monotonic() + 10
                # The main thread turns the signal into a cancel request; until it has, the
                # load goes on as it would for a user who has not pressed anything yet.
                while progress(fraction) and time.monotonic() < deadline:
                    time.sleep(0.01)
            return progress(fraction)

        return real_open(cls, config, progress=first_progress_presses_ctrl_c, **options)

    monkeypatch.setattr(Session, "open", classmethod(open_with_a_ctrl_c))
    args = build_parser().parse_args(["chat", "-m", str(embedded_model_path), "-p", "Hello",
                                      "-n", "4"])
    code = args.run(args)
    err = capsys.readouterr().err
    assert code == 130, err
    assert "cancelling the load" in err and "loading was cancelled" in err
    assert "generation:" not in err  # no answer ran
    assert calls  # the load really reported progress
