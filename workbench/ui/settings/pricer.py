"""Price it: score a configuration against its lossless reference in the background and record
the scored run, so the settings panel can show what a lossy setting costs (Qt-free).

Scoring blocks for as long as the text takes to read twice, so it runs on a thread of its own
(never the UI thread, never the loop's shared executor), and every llama.cpp call of it on an
engine thread that ends with the pricing (`bench.engine.engine_that_ends`: a thread that stayed
would keep a second OpenMP team, and the window's decodes ran 56 % slower after one pricing);
the window's own engine thread and its open model are not touched. Progress crosses to the loop with
call_soon_threadsafe; Stop sets an event the scorer checks after every position, and a stopped
pricing records nothing.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from workbench.bench import quality
from workbench.bench.engine import engine_that_ends
from workbench.config import Config
from workbench.engine.requests import SessionError
from workbench.ui.settings.preset_store import StoreCall

# Positions of the bundled text a pricing reads (twice: the reference, then the setting). Enough
# for a KL interval that separates the rungs on the bench model, short enough to wait for.
PRICE_TOKENS = 256
PRICE_LABEL = "price"

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True, slots=True)
class Priced:
    run_id: int | None  # the recorded scored run; None when nothing was measured
    note: str = ""  # why nothing was measured (stopped, refused, failed)


class Pricer:
    def __init__(self, call: StoreCall, tokens: int = PRICE_TOKENS) -> None:
        self.call, self.tokens = call, tokens
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="price")
        self._stop: threading.Event | None = None

    @property
    def running(self) -> bool:
        return self._stop is not None

    def stop(self) -> None:
        if self._stop is not None:
            self._stop.set()

    async def price(self, config: Config, progress: Progress) -> Priced:
        """Score `config` (its model, its lossy levers) and record the run; one at a time."""
        if self._stop is not None:
            return Priced(None, "another pricing is running")
        loop = asyncio.get_running_loop()
        stop = self._stop = threading.Event()

        def report_progress(phase: str, done: int, total: int) -> None:
            loop.call_soon_threadsafe(progress, phase, done, total)

        def score() -> quality.QualityReport:
            path = quality.default_text_path()
            with engine_that_ends("price-engine"):
                return quality.score_text(config, quality.read_text(path), text_name=path.name,
                                          max_tokens=self.tokens, progress=report_progress,
                                          stop=stop)

        try:
            report = await loop.run_in_executor(self._pool, score)
        except (quality.QualityError, SessionError) as exc:
            return Priced(None, "stopped" if stop.is_set() else str(exc))
        finally:
            self._stop = None
        run_id = await self.call(lambda s: quality.save_scored_run(s, report, label=PRICE_LABEL))
        return Priced(run_id)

    def close(self) -> None:
        """Stop any pricing and let its thread end (it finishes the position it is reading)."""
        self.stop()
        self._pool.shutdown(wait=False)
