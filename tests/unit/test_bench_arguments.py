"""Every `bench` subcommand checks its arguments as `chat` does: a bad value is one clear line,
exit 2, never a traceback, and it is caught before any model is generated or loaded (this is
the fast set: a model opened here fails the test, tests/conftest.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from workbench.cli.main import build_parser, main


@pytest.fixture
def files(tmp_path) -> dict[str, Path]:
    import numpy as np
    from gguf import GGUFWriter

    fifo = tmp_path / "pipe.gguf"
    os.mkfifo(fifo)
    text = tmp_path / "notes.gguf"
    text.write_text("not a model\n")
    models = {}
    for name, n_vocab in (("small-vocab", 8), ("big-vocab", 12)):
        path = tmp_path / f"{name}.gguf"
        writer = GGUFWriter(str(path), "llama")
        writer.add_block_count(1)
        writer.add_token_list([f"t{i}" for i in range(n_vocab)])
        writer.add_tensor("token_embd.weight", np.zeros((n_vocab, 4), dtype=np.float32))
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        models[name] = path
    return {"fifo": fifo, "text": text, **models}


CASES = [
    # (arguments, words the message must hold)
    ("overhead --repeats 0", "--repeats"),
    ("overhead --warmup -1", "--warmup"),
    ("overhead -t 0", "n_threads"),
    ("overhead -n 0", "n_predict"),
    ("overhead -m {fifo}", "named pipe"),
    ("overhead -m {text}", "GGUF"),
    ("stream --repeats 0", "--repeats"),
    ("stream --repeats -3", "--repeats"),
    ("stream -n 0", "--tokens"),
    ("stream -t 0", "--threads"),
    ("stream -t 100000", "--threads"),
    ("stream --lanes 0", "--lanes"),
    ("stream --lanes 99", "--lanes"),
    ("stream --gib 0", "--gib"),
    ("stream --gib nan", "--gib"),
    ("stream --gib inf", "--gib"),
    ("stream --leave-mib -1", "--leave-mib"),
    ("stream --floor-mb -1", "--floor-mb"),
    ("stream --cache-mb -1", "--cache-mb"),
    ("stream --which machinery,bogus", "bogus"),
    ("stream --which ,", "--which"),
    ("stream -m {fifo}", "named pipe"),
    ("stream -m {text}", "GGUF"),
    ("stream -m {small-vocab}", "not a Mixture-of-Experts"),
    ("drop --frac 0", "--frac"),
    ("drop --repeats 0", "--repeats"),
    ("drop -n 0", "--tokens"),
    ("drop -t 0", "--threads"),
    ("drop -m {fifo}", "named pipe"),
    ("spec --repeats 0", "--repeats"),
    ("spec --tasks bogus", "bogus"),
    ("spec --drafter draft", "--spec-draft-model"),
    ("spec -m {small-vocab} --drafter draft --spec-draft-model {fifo}", "named pipe"),
    ("spec -m {small-vocab} --drafter draft --spec-draft-model {text}", "GGUF"),
    ("spec -m {small-vocab} --drafter draft --spec-draft-model {big-vocab}", "vocabulary"),
    ("spec -m {fifo}", "named pipe"),
    ("policy --budgets 0", "--budgets"),
    ("policy --budgets x", "--budgets"),
    ("policy --repeats 0", "--repeats"),
    ("policy --lanes 0", "--lanes"),
    ("policy --skip bogus", "bogus"),
    ("policy -m {text}", "GGUF"),
    ("kv --repeats 0", "--repeats"),
    ("kv --history-tokens 0", "--history-tokens"),
    ("kv -t 0", "n_threads"),
    ("kv -m {fifo}", "named pipe"),
    ("matrix --repeats 0", "--repeats"),
    ("matrix --trim -1", "--trim"),
    ("matrix --preset-file {fifo}", "named pipe"),
    ("matrix --prompts {fifo}", "named pipe"),
    ("matrix -m {text}", "GGUF"),
    ("threads --repeats 0", "--repeats"),
    ("threads -n 0", "--tokens"),
    ("threads --counts 1,0", "--counts"),
    ("threads --counts 1,x", "not a whole number"),
    ("threads --counts 100000", "--counts"),
    ("threads --cache-mb 200,-5", "--cache-mb"),
    ("threads --cache-mb lots", "--cache-mb"),
    ("threads -m {small-vocab}", "not a Mixture-of-Experts"),
    ("threads -m {fifo}", "named pipe"),
    ("curve -n 0", "--tokens"),
    ("curve -t 0", "--threads"),
    ("curve --gib 0", "--gib"),
    ("curve -m {fifo}", "named pipe"),
    ("curve -m {small-vocab}", "not a Mixture-of-Experts"),
    ("ui --repeats 0", "--repeats"),
    ("ui --tokens 0", "--tokens"),
    ("ui -m {fifo}", "named pipe"),
]


@pytest.mark.parametrize(("line", "words"), CASES, ids=[c[0] for c in CASES])
def test_a_bad_bench_argument_is_exit_2_with_a_clear_line(capsys, files, line, words):
    argv = ["bench", *(a.format(**{k: str(v) for k, v in files.items()}) for a in line.split())]
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    assert err.startswith("error: ") and words in err, err
    assert "Traceback" not in err
    assert files["fifo"].exists()


def test_every_bench_subcommand_has_bad_arguments_checked():
    import argparse

    bench = build_parser()._subparsers._group_actions[0].choices["bench"]  # type: ignore[union-attr]
    kinds = next(a for a in bench._actions if isinstance(a, argparse._SubParsersAction))
    assert set(kinds.choices) == {line.split()[0] for line, _ in CASES}
