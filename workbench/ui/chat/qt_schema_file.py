"""The conversation settings dialog's "Load answer schema…": a JSON schema from a file, read off
the UI thread (qt_file_button.py), becomes the pending answer schema (and the schema format). A
file that cannot be read says why under the button; the pending settings are left as they
were."""

from __future__ import annotations

from pathlib import Path

from workbench.file_kind import TextFileError, read_utf8_text
from workbench.ui.chat.qt_file_button import QtFileButton

MAX_SCHEMA_BYTES = 1 << 20  # a schema is text a person wrote; more is another file


def read_schema_file(path: str) -> str:
    """The schema file's text; ValueError says what is wrong with the file (not the schema:
    the settings panel checks that, under the schema's row)."""
    subject = f"the schema file {Path(path).name}"
    try:
        if Path(path).is_file() and Path(path).stat().st_size > MAX_SCHEMA_BYTES:
            raise ValueError(f"{subject} is larger than {MAX_SCHEMA_BYTES >> 20} MiB; "
                             "choose a JSON schema file")
        return read_utf8_text(path)
    except TextFileError as exc:
        raise ValueError(exc.sentence(subject) + "; choose a JSON schema file") from None
    except OSError as exc:
        raise ValueError(f"cannot read {subject}: {exc.strerror or exc}") from None


def schema_file_button() -> QtFileButton:
    """"Load answer schema…": `loaded` carries the schema file's text."""
    return QtFileButton("Load answer schema…", "Read a JSON schema file into the answer schema "
                        "(the answer format becomes schema)", "Choose a JSON schema file",
                        "JSON schemas (*.json);;All files (*)", read_schema_file)
