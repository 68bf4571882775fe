"""Salvage's table list follows the schema (issue 27): checked at import, so a table or column
added to the schema and forgotten here fails the import instead of losing rows silently."""

from __future__ import annotations

import dataclasses

import pytest

from workbench.store import salvage, schema


def test_the_table_list_matches_the_schema_as_shipped():
    salvage.check_tables()  # also ran at import


def test_a_table_added_to_the_schema_and_not_to_salvage_fails(monkeypatch):
    monkeypatch.setattr(schema, "MIGRATIONS",
                        [*schema.MIGRATIONS, "CREATE TABLE bookmarks (id INTEGER PRIMARY KEY);"])
    with pytest.raises(salvage.SalvageDrift, match="'bookmarks' is in the schema but not copied"):
        salvage.check_tables()


def test_a_column_salvage_names_that_the_schema_lacks_fails():
    tables = tuple(dataclasses.replace(t, merge=("settings", "colour"))
                   if t.name == "conversations" else t for t in salvage._TABLES)
    with pytest.raises(salvage.SalvageDrift, match=r"conversations\.colour is named"):
        salvage.check_tables(tables)


def test_a_dropped_table_fails():
    tables = tuple(t for t in salvage._TABLES if t.name != "presets")
    with pytest.raises(salvage.SalvageDrift, match="'presets' is in the schema but not copied"):
        salvage.check_tables(tables)
