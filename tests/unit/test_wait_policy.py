"""OpenMP's wait policy: the rule from cores vs threads + lanes, set before llama.cpp loads, the
user's own setting kept (engine/wait_policy.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from workbench.engine import wait_policy as wp


def test_the_measured_two_core_case_keeps_the_runtime_default() -> None:
    # 2 cores, 2 threads + 4 lanes: active lost (23.7 vs 40.8 tok/s, issue 38).
    choice = wp.choose(cores=2, threads=2, lanes=4, streaming=True)
    assert choice.policy == wp.DEFAULT and choice.source == "rule"
    assert "2 compute threads + 4 I/O lanes on 2 cores" in choice.reason


def test_the_measured_sixteen_core_case_spins() -> None:
    # 16 cores, 16 threads + 4 lanes: active won (11.8 vs 3.2-4.7 tok/s at cache 200 MiB).
    assert wp.choose(cores=16, threads=16, lanes=4, streaming=True).policy == "active"
    assert wp.choose(cores=8, threads=4, lanes=4, streaming=False).policy == "active"


def test_more_threads_than_cores_never_spins() -> None:
    choice = wp.choose(cores=8, threads=12, lanes=2, streaming=True)
    assert choice.policy == wp.DEFAULT and "more threads than cores" in choice.reason


def test_below_the_core_threshold_is_default_even_resident() -> None:
    below = wp.MIN_CORES_TO_SPIN - 1
    assert wp.choose(cores=below, threads=1, lanes=4, streaming=False).policy == wp.DEFAULT
    at = wp.MIN_CORES_TO_SPIN
    assert wp.choose(cores=at, threads=at, lanes=4, streaming=True).policy == "active"
    assert "I/O lane" not in wp.choose(cores=at, threads=1, lanes=4, streaming=False).reason


def test_apply_sets_the_variable_before_the_runtime_loads() -> None:
    env: dict[str, str] = {}
    choice = wp.choose(cores=16, threads=8, lanes=4, streaming=True)
    assert wp.apply(choice, env, loaded=False) == choice
    assert env == {wp.ENV: "active"}
    env = {}
    assert wp.apply(wp.choose(cores=2, threads=2, lanes=4, streaming=True), env,
                    loaded=False).policy == wp.DEFAULT
    assert env == {}  # the runtime's default: nothing set


def test_the_users_variable_wins() -> None:
    env = {wp.ENV: "PASSIVE"}
    got = wp.apply(wp.choose(cores=16, threads=8, lanes=4, streaming=True), env, loaded=False)
    assert got.policy == "passive" and got.source == "environment"
    assert env == {wp.ENV: "PASSIVE"}


def test_once_the_runtime_is_loaded_nothing_changes() -> None:
    env: dict[str, str] = {}
    got = wp.apply(wp.choose(cores=16, threads=8, lanes=4, streaming=True), env, loaded=True)
    assert got.source == "too late" and env == {}
    assert "default" in got.describe()


@pytest.mark.parametrize(("flags", "expected"), [
    (["-t", "1"], "1 compute thread "),
    (["-t", "3", "--io-threads", "2"], "3 compute threads"),
])
def test_the_cli_chooses_before_llama_cpp_is_imported(flags: list[str], expected: str) -> None:
    """In a fresh interpreter, as `python -m workbench chat` starts (cli/main.py): the choice
    is made from the command line before anything loads llama.cpp (building the parser does)."""
    code = (
        "import sys\n"
        "from workbench.cli.main import build_parser, choose_wait_policy\n"
        "from workbench.engine import wait_policy\n"
        f"argv = ['chat', *{flags!r}]\n"
        "choose_wait_policy(argv)\n"
        "assert 'llama_cpp' not in sys.modules, 'llama.cpp loaded before the wait policy'\n"
        "build_parser().parse_args(argv)\n"
        "print(wait_policy.in_force().describe())\n"
    )
    env = {k: v for k, v in os.environ.items() if k != wp.ENV}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "(rule:" in out.stdout and expected in out.stdout


def test_chats_summary_says_which_policy_and_why() -> None:
    from workbench.cli.chat import format_perf
    from workbench.engine.metrics import RunSummary

    summary = RunSummary(turn=0, n_generated=10, gen_seconds=0.1, n_prompt=5, n_reused=0,
                         n_past=15, n_ctx=512, load_seconds=1.0, prefill_seconds=0.01,
                         ttft_seconds=0.02, majflt_per_token=0.0, cpu_s_per_token=0.02,
                         loop_overhead_s_per_token=0.0001, stop_reason="length")
    choice = wp.choose(cores=2, threads=2, lanes=4, streaming=True)
    text = format_perf(summary, 2, choice)
    assert "threads: 2 compute, wait policy default (rule: 2 compute threads" in text
    assert "wait policy" not in format_perf(summary, 2)
