"""Commands as scripts use them, against inputs no one meant: `--json` output that a strict parser
reads (no NaN or Infinity), text that never spells out a 300-digit number, another program's
SQLite file given as the store (refused, and left byte for byte as it was), and the lists of a
data folder where nothing has been saved yet (empty, exit 0)."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest

from workbench.cli.main import main

UPSTREAM = (Path(__file__).resolve().parents[3] / "shared/fixtures/upstream"
            / "bmoe-v1-desktop-qwen36.csv")


def strict_loads(text: str) -> object:
    def refuse(constant: str) -> object:
        raise ValueError(f"not strict JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def data_dir(tmp_path, monkeypatch) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    monkeypatch.setenv("WORKBENCH_DATA_DIR", str(data))
    return data


def _hostile_metrics(tmp_path: Path) -> Path:
    """The upstream fixture with figures no machine measures: huge, infinite and not-a-number
    walls and reads."""
    lines = UPSTREAM.read_text().splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("step,"))
    for offset, value in ((1, "1e300"), (2, "inf"), (3, "nan"), (4, "1e308")):
        cells = lines[header + offset].split(",")
        cells[2] = value  # wall_ms
        cells[5] = "1e300"  # read_bytes
        lines[header + offset] = ",".join(cells)
    out = tmp_path / "hostile.csv"
    out.write_text("\n".join(lines) + "\n")
    return out


def test_explain_json_is_strict_and_its_text_has_no_endless_numbers(capsys, tmp_path):
    csv = _hostile_metrics(tmp_path)
    for factor in ("1.5", "1e300"):
        code, out, err = cli(capsys, "explain", str(csv), "--json", "--factor", factor)
        assert code == 0, err
        doc = strict_loads(out)
        assert isinstance(doc, dict) and doc["turns"]
        code, out, err = cli(capsys, "explain", str(csv), "--limit", "0", "--factor", factor)
        assert code == 0, err
        longest = max((len(m) for m in re.findall(r"\d+", out)), default=0)
        assert longest < 20, f"a {longest}-digit number in: {out[:400]}"


def test_compare_text_has_no_endless_numbers(capsys, tmp_path):
    csv = _hostile_metrics(tmp_path)
    code, out, err = cli(capsys, "compare", str(UPSTREAM), str(csv))
    assert code == 0, err
    longest = max((len(m) for m in re.findall(r"\d+", out)), default=0)
    assert longest < 20, f"a {longest}-digit number in: {out[:400]}"


def test_store_json_with_non_finite_figures_is_strict(capsys, data_dir):
    from workbench.cli.store_access import print_json

    print_json({"tok_s": float("nan"), "rows": [float("inf"), -float("inf"), 1.5],
                "nested": {"x": (float("nan"),)}})
    doc = strict_loads(capsys.readouterr().out)
    assert doc == {"tok_s": None, "rows": [None, None, 1.5], "nested": {"x": [None]}}


# ---- a fresh data folder ---------------------------------------------------------------------

@pytest.mark.parametrize("command", ["conversations", "runs"])
def test_lists_of_a_fresh_data_folder_are_empty_and_create_nothing(capsys, data_dir, command):
    code, out, err = cli(capsys, command, "list", "--json")
    assert code == 0, err
    assert strict_loads(out) == []
    code, out, err = cli(capsys, command, "list")
    assert code == 0 and out.strip() == f"no {command}", (out, err)
    assert list(data_dir.iterdir()) == []
    # A --db that names no file is a typing mistake: still said.
    code, _, err = cli(capsys, command, "list", "--db", str(data_dir / "typo.db"))
    assert code == 1 and "no store at" in err


# ---- another program's database --------------------------------------------------------------

def _foreign(folder: Path, journal: str) -> Path:
    path = folder / "their-app.sqlite"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA journal_mode={journal}")
    conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO customers (name) VALUES ('ann'), ('bob')")
    conn.execute("PRAGMA user_version = 7")
    conn.commit()
    conn.close()
    return path


@pytest.mark.parametrize("journal", ["delete", "wal"])
@pytest.mark.parametrize("command", [
    ["conversations", "list"], ["conversations", "list", "--json"], ["runs", "list"],
    ["conversations", "show", "1"], ["runs", "show", "1"], ["conversations", "delete", "1"],
])
def test_another_programs_sqlite_file_is_refused_and_left_byte_identical(capsys, tmp_path,
                                                                        data_dir, journal,
                                                                        command):
    folder = tmp_path / "theirs"
    folder.mkdir()
    path = _foreign(folder, journal)
    before = path.read_bytes()
    listing = sorted(p.name for p in folder.iterdir())
    code, out, err = cli(capsys, *command, "--db", str(path))
    assert code == 1, (out, err)
    assert "not a workbench store" in err and "customers" in err
    assert "Traceback" not in err
    assert path.read_bytes() == before
    assert sorted(p.name for p in folder.iterdir()) == listing  # no -wal, -shm, -journal, lock
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == journal
    conn.close()


def test_the_store_refuses_a_foreign_file_as_damaged_and_never_writes(tmp_path):
    from workbench.store import Store
    from workbench.store.faults import ForeignStore, StoreDamaged

    path = _foreign(tmp_path, "delete")
    before = path.read_bytes()
    with pytest.raises(ForeignStore) as caught:
        Store.open(path)
    assert isinstance(caught.value, StoreDamaged)  # the window offers what it offers for one
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == [
        path.name]
    # An empty file and a workbench store still open.
    empty = tmp_path / "empty.db"
    empty.touch()
    Store.open(empty, recover=False).close()
    Store.open(empty, recover=False).close()
