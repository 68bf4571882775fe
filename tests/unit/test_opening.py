"""A model opens one way (issue 37): engine/opening.py lays the settings layers in one order,
each over the one below, and the window, `chat` and `serve` open the same model the same way.
The thread count of a streamed model is measured at open unless the user chose it (issue 38)."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.cli.chat import chat_opening
from workbench.cli.main import build_parser
from workbench.cli.serve import serve_opening
from workbench.cli.window import window_opening
from workbench.config import Config
from workbench.engine import model_settings
from workbench.engine.model_defaults import BUNDLED_SETTINGS
from workbench.engine.opening import decide, settle_threads, with_offer
from workbench.engine.thread_choice import ThreadChoice
from workbench.moe.layout import read_model_facts
from workbench.moe.synth import write_synthetic_moe
from workbench.ui.window_memory import WindowMemory, save_memory

OTHER = "/models/other.gguf"  # a model without defaults of its own


@pytest.fixture(scope="module")
def facts(tmp_path_factory):
    path = write_synthetic_moe(tmp_path_factory.mktemp("m") / "moe.gguf", size="tiny")[0]
    return read_model_facts(path)  # trained context 256


# ---- each layer over the one below --------------------------------------------------------------

def test_layer_1_config_defaults():
    assert decide(OTHER).config == Config(model=OTHER)


def test_layer_2_the_models_defaults_over_the_config_defaults():
    bundled = decide("").config
    assert bundled.repeat_penalty == BUNDLED_SETTINGS["repeat_penalty"] != Config().repeat_penalty
    assert bundled.system_prompt == BUNDLED_SETTINGS["system_prompt"]


def test_layer_3_its_own_settings_over_the_defaults(facts):
    model = str(facts.path)
    fitted = decide(model, facts=facts)
    assert fitted.config.n_ctx == 256 and fitted.fitted_to == "its trained context"
    assert not fitted.remembered
    remembered = {model: {"n_ctx": 128, "n_threads": 3}}
    own = decide(model, facts=facts, remembered=remembered)
    assert (own.config.n_ctx, own.config.n_threads) == (128, 3) and own.remembered
    # A remembered thread count was a choice: it is not measured again.
    assert own.explicit == {"n_ctx", "n_threads"}
    # Over the model's defaults too: the bundled model keeps its penalty under its own context.
    bundled = decide("", remembered={"": {"n_ctx": 1024}}).config
    assert bundled.n_ctx == 1024 and bundled.repeat_penalty == BUNDLED_SETTINGS["repeat_penalty"]


def test_layer_4_the_windows_settings_over_the_models_own(facts):
    model = str(facts.path)
    remembered = {model: {"n_ctx": 128}}
    window = Config(model=model, n_ctx=200, temp=0.5, repeat_penalty=1.0)
    got = decide(model, window=window, remembered=remembered, facts=facts).config
    assert (got.n_ctx, got.temp) == (200, 0.5)  # its load-time settings: the same model's
    # Another model's window: only the per-request settings follow (they are the user's).
    elsewhere = decide(model, window=window.replace(model=OTHER, n_ctx=64),
                       remembered=remembered).config
    assert (elsewhere.n_ctx, elsewhere.temp) == (128, 0.5)
    # Over the model's defaults: the window's penalty, not the bundled model's.
    assert decide("", window=Config(repeat_penalty=1.0)).config.repeat_penalty == 1.0


def test_layer_5_what_was_typed_over_everything(facts):
    model = str(facts.path)
    typed = {"n_ctx": 64, "temp": 0.9, "n_threads": 1}
    got = decide(model, typed=typed, window=Config(model=model, n_ctx=200, temp=0.5),
                 remembered={model: {"n_ctx": 128}}, facts=facts)
    assert (got.config.n_ctx, got.config.temp, got.config.n_threads) == (64, 0.9, 1)
    assert {"n_ctx", "temp", "n_threads"} <= got.explicit
    assert decide("", typed={"model": OTHER}).config.model == OTHER  # -m picks the model


def test_the_picker_offer_takes_the_windows_streaming_defaults():
    """Issue 37: the picker's streaming offer left dropping at 0 where the settings panel sets
    75 % for the same boxes ticked."""
    taken = with_offer(Config(), {"moe_stream": True, "cache_mb": 300})
    assert taken.drop_cold_frac == 0.75
    assert with_offer(Config(), {}) == Config()


# ---- the front-ends --------------------------------------------------------------------------

def _parsed(command: str, flags: list[str]):
    return build_parser().parse_args([command, *flags])


@pytest.mark.parametrize("flags", [[], ["-t", "3", "--temp", "0.5", "-c", "512"],
                                   ["-m", OTHER, "--moe-stream", "--cache-mb", "64"]])
def test_window_chat_and_serve_open_a_model_the_same_way(tmp_path: Path, flags):
    chat = chat_opening(_parsed("chat", flags))
    serve = serve_opening(_parsed("serve", flags))
    window = window_opening(_parsed("window", flags), tmp_path)  # a first start: no memory
    assert chat == serve == window
    if not flags:  # serve opens with the model's defaults too (it used to open with Config())
        assert serve.config.repeat_penalty == BUNDLED_SETTINGS["repeat_penalty"]


def test_the_window_opens_the_last_model_with_its_memory(tmp_path: Path, facts):
    model = str(facts.path)
    last = Config(model=model, n_ctx=128, n_predict=64, temp=0.4, n_threads=2, moe_stream=True)
    save_memory(tmp_path, WindowMemory(settings=last.to_dict()))
    opening = window_opening(_parsed("window", []), tmp_path)
    assert opening.config == last
    # The count it ran with last time was measured, not chosen (none is remembered as a
    # choice): it is measured again.
    assert opening.measures_threads
    model_settings.save_remembered(tmp_path, model_settings.with_model({}, last))
    assert not window_opening(_parsed("window", []), tmp_path).measures_threads
    typed = window_opening(_parsed("window", ["-t", "1"]), tmp_path)
    assert typed.config.n_threads == 1 and not typed.measures_threads


def test_a_measured_thread_count_is_not_remembered_as_a_choice():
    config = Config(model=OTHER, n_threads=2, moe_stream=True)
    assert "n_threads" not in model_settings.with_model({}, config, threads_chosen=False)[OTHER]
    assert model_settings.with_model({}, config)[OTHER]["n_threads"] == 2


# ---- the thread count at open (issue 38) -----------------------------------------------------

class _Opened:
    """What settle_threads drives of a session, with the decoding replaced by `step`."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.thread_choice: ThreadChoice | None = None
        self.counts: list[int] = []
        self.resets = 0

    def set_threads(self, n: int) -> None:
        self.counts.append(n)
        self.config = self.config.replace(n_threads=n)

    def reset_conversation(self) -> None:
        self.resets += 1


def test_measures_threads_only_when_streaming_and_not_chosen():
    assert decide(OTHER, typed={"moe_stream": True}).measures_threads
    assert not decide(OTHER).measures_threads  # resident
    assert not decide(OTHER, typed={"moe_stream": True, "n_threads": 4}).measures_threads


def test_the_open_path_measures_and_applies_the_fastest_count():
    session = _Opened(Config(moe_stream=True, n_threads=4))
    timings = {1: 0.030, 2: 0.010, 4: 0.020}
    asked: list[int] = []

    def step(threads: int) -> float:
        asked.append(threads)
        return timings[threads]

    choice = settle_threads(session, measure=True, cores=4, step=step)
    assert choice is not None and choice.threads == 2 and session.config.n_threads == 2
    assert sorted(set(asked)) == [1, 2, 4] and len(asked) == 6  # two alternating rounds
    assert session.counts[-1] == 2 and session.thread_choice is choice and session.resets == 1
    assert "fastest measured at open" in choice.describe() and "s at open" in choice.describe()


def test_an_explicit_count_is_not_measured():
    session = _Opened(Config(moe_stream=True, n_threads=3))

    def step(threads: int) -> float:
        raise AssertionError("measured although the count was chosen")

    choice = settle_threads(session, measure=False, cores=4, step=step)
    assert choice is not None and choice.threads == 3 and session.counts == []
    assert "set explicitly" in choice.describe()
    resident = _Opened(Config(n_threads=3))
    assert settle_threads(resident, measure=False, step=step) is None


def test_a_failed_measurement_falls_back_to_the_recommended_count():
    session = _Opened(Config(moe_stream=True, n_threads=1))

    def step(threads: int) -> float:
        raise RuntimeError("the decode was stopped")

    choice = settle_threads(session, measure=True, cores=8, step=step)
    assert choice is not None and choice.threads == 4 == session.config.n_threads
    assert "recommended for 8 cores" in choice.reason and "the decode was stopped" in choice.reason


def test_the_choice_reaches_the_chat_summary():
    from workbench.cli.chat import format_perf
    from workbench.engine.metrics import RunSummary

    summary = RunSummary(turn=0, n_generated=10, gen_seconds=0.1, n_prompt=5, n_reused=0,
                         n_past=15, n_ctx=512, load_seconds=1.0, prefill_seconds=0.01,
                         ttft_seconds=0.02, majflt_per_token=0.0, cpu_s_per_token=0.02,
                         loop_overhead_s_per_token=0.0001, stop_reason="length")
    choice = ThreadChoice(2, "fastest measured at open (tok/s by threads 1:5.0 2:9.0)", 0.42)
    text = format_perf(summary, 2, None, choice)
    assert ("threads: 2 compute threads (fastest measured at open (tok/s by threads 1:5.0 "
            "2:9.0); measuring took 0.42 s at open)") in text
