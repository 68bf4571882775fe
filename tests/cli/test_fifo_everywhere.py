"""Every command's file-taking flag and every file-taking setting, given a FIFO: refused with a
message that names it, never opened (opening a FIFO for reading waits for a writer forever, so
each command runs as a process under a timeout and a hang fails the test). The list of flags is
walked from the parser itself: a new file flag without a case here fails
`test_every_file_flag_is_walked`."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.cli.main import build_parser
from workbench.config import SETTINGS

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 120
FILE_METAVARS = {"FILE", "PATH", "CSV", "TRACE", "RUN.csv", "MODEL.gguf", "PROJ.gguf",
                 "FILE.png", "DIR"}
# Files these flags write (atomic_write.py renames a whole file over the name), not read.
OUTPUTS = {("chat", "--csv"), ("chat", "--route-trace"), ("serve", "--csv"),
           ("runs show", "--csv"), ("conversations export", "-o"), ("make-model", "-o"),
           ("screenshot", "-o"), ("bench matrix", "-o"), ("make-model", "--mmproj"),
           ("replay", "--plot")}


def file_flags() -> set[tuple[str, str]]:
    """(command, flag or positional) for every argument that names a file, by its metavar."""
    found: set[tuple[str, str]] = set()

    def walk(parser: argparse.ArgumentParser, command: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{command} {name}".strip())
            elif action.metavar in FILE_METAVARS or (isinstance(action.type, type) and \
                    issubclass(action.type, Path)):
                found.add((command, action.option_strings[0] if action.option_strings
                           else action.dest))
    walk(build_parser(), "")
    return found


# (command, flag) -> the argument list after the command, {fifo} for the FIFO, {model} for a
# real model. Each must exit non-zero in time with "named pipe (FIFO)" on stderr.
CASES: dict[tuple[str, str], list[str]] = {
    ("chat", "-m"): ["-m", "{fifo}", "-p", "Hi", "-n", "1"],
    ("chat", "--image"): ["-m", "{model}", "--image", "{fifo}", "-p", "Hi", "-n", "1"],
    ("serve", "-m"): ["-m", "{fifo}", "--port", "0"],
    ("screenshot", "--image"): ["-o", "{out}", "--image", "{fifo}", "-m", "{model}"],
    ("inspect", "model"): ["{fifo}"],
    ("inspect", "--mmproj"): ["{model}", "--mmproj", "{fifo}"],
    ("make-model", "--mmproj-for"): ["--mmproj", "{out}", "--mmproj-for", "{fifo}"],
    ("replay", "trace"): ["{fifo}"],
    ("compare", "files"): ["{fifo}", "{fifo}"],
    ("explain", "files"): ["{fifo}"],
    ("explain", "--model"): ["{csv}", "--model", "{fifo}"],
    ("advise", "model"): ["{fifo}", "--no-probe"],
    ("conversations import", "file"): ["{fifo}"],
    ("bench matrix", "--preset-file"): ["--preset-file", "{fifo}"],
    ("bench matrix", "--prompts"): ["--prompts", "{fifo}"],
    ("bench matrix", "--score-text"): ["--score", "--score-text", "{fifo}", "--preset",
                                       "a=n_threads=1", "--preset", "b=n_threads=2"],
    ("bench stream", "-m"): ["-m", "{fifo}"],
    ("bench drop", "-m"): ["-m", "{fifo}"],
    ("bench policy", "-m"): ["-m", "{fifo}"],
    ("bench curve", "-m"): ["-m", "{fifo}"],
    ("bench curve", "--text"): ["--text", "{fifo}"],
    ("score", "text"): ["{fifo}"],
    ("score", "--choices"): ["--choices", "{fifo}"],
    ("score", "--db"): ["--db", "{fifo}"],
}
for command in ("conversations list", "conversations show", "conversations export",
                "conversations import", "conversations delete", "runs list", "runs show",
                "runs compare"):
    CASES[(command, "--db")] = {
        "conversations list": ["--db", "{fifo}"], "runs list": ["--db", "{fifo}"],
        "conversations show": ["1", "--db", "{fifo}"], "runs show": ["1", "--db", "{fifo}"],
        "conversations export": ["1", "--db", "{fifo}"],
        "conversations import": ["{json}", "--db", "{fifo}"],
        "conversations delete": ["1", "--db", "{fifo}"],
        "runs compare": ["1", "2", "--db", "{fifo}"],
    }[command]
# Every settings flag that names a file (model, chat template, projector, draft model), on each
# command that takes the settings: walked in test_every_file_setting_refuses_a_fifo.
PATH_SETTINGS = [s for s in SETTINGS if s.metavar == "PATH"]


def _run(command: str, args: list[str], paths: dict[str, Path],
         env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    argv = [a.format(**{k: str(v) for k, v in paths.items()}) for a in args]
    try:
        return subprocess.run([sys.executable, "-m", "workbench", *command.split(), *argv],
                              capture_output=True, text=True, timeout=TIMEOUT_S, cwd=REPO,
                              env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})
    except subprocess.TimeoutExpired:
        pytest.fail(f"`{command} {' '.join(argv)}` hung on the FIFO instead of refusing it")


@pytest.fixture
def paths(tmp_path, chat_model_path) -> dict[str, Path]:
    fifo = tmp_path / "input.fifo"
    os.mkfifo(fifo)
    csv = tmp_path / "run.csv"
    csv.write_text((REPO.parent / "shared/fixtures/upstream/bmoe-v1-desktop-qwen36.csv")
                    .read_text())
    export = tmp_path / "conv.json"
    export.write_text("{}")
    return {"fifo": fifo, "model": chat_model_path, "csv": csv, "json": export,
            "out": tmp_path / "out.gguf"}


def test_every_file_flag_is_walked():
    flags = file_flags() - OUTPUTS
    settings_flags = {s.flags[0] for s in PATH_SETTINGS} | {
        f for s in PATH_SETTINGS for f in s.flags}
    missing = {(c, f) for c, f in flags if (c, f) not in CASES and f not in settings_flags}
    assert not missing, f"file flags with no FIFO case: {sorted(missing)}"


@pytest.mark.parametrize("key", list(CASES), ids=lambda k: f"{k[0]} {k[1]}")
def test_every_file_flag_refuses_a_fifo(paths, key):
    command, _ = key
    done = _run(command, CASES[key], paths)
    assert done.returncode != 0, done.stderr
    assert "named pipe (FIFO)" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert paths["fifo"].exists()


@pytest.mark.parametrize("setting", PATH_SETTINGS, ids=lambda s: s.name)
@pytest.mark.parametrize("command", ["chat", "serve", "bench overhead", "bench spec",
                                     "bench kv"])
def test_every_file_setting_refuses_a_fifo(paths, setting, command):
    args = [setting.flags[0], "{fifo}"]
    if setting.name != "model":
        args += ["-m", "{model}"]
    if setting.name == "spec_draft_model":
        args += ["--spec", "draft"] if command != "bench spec" else ["--drafter", "draft"]
    extra = {"chat": ["-p", "Hi", "-n", "1"], "serve": ["--port", "0"]}.get(command, [])
    done = _run(command, args + extra, paths)
    assert done.returncode != 0, done.stderr
    assert "named pipe (FIFO)" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr


def test_a_fifo_as_the_warm_start_file_starts_cold(tmp_path, tiny_moe_path):
    from workbench.engine.warm_start import frequency_path

    data = tmp_path / "data"
    fifo = frequency_path(data / "expert-routing", tiny_moe_path)
    fifo.parent.mkdir(parents=True)
    os.mkfifo(fifo)
    done = _run("chat", ["-m", str(tiny_moe_path), "-p", "Hi", "-n", "4", "-t", "1",
                         "--moe-stream", "--cache-mb", "1"], {},
                env={"WORKBENCH_DATA_DIR": str(data)})
    assert done.returncode == 0, done.stderr
    assert "warm start" in done.stderr and "named pipe (FIFO)" in done.stderr, done.stderr
    assert fifo.exists() and not fifo.is_file()  # neither read nor replaced
