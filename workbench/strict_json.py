"""`--json` output as strict JSON (RFC 8259): what every command prints for scripts.

Python's json writes NaN and Infinity by default, which strict parsers (JavaScript's, jq's,
`json.loads` with `parse_constant` raising) refuse. A figure that was not measured, or that
came out non-finite, is `null` instead; anything left that JSON cannot hold raises rather than
being written loosely. It imports nothing of the package (it sits at the bottom of the layers).
"""

from __future__ import annotations

import json
import math
from typing import Any


def finite_or_null(value: Any) -> Any:
    """`value` with every non-finite float (NaN, +-Infinity), however deep, made None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_or_null(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_or_null(v) for v in value]
    return value


def dumps(doc: Any, *, indent: int | None = 2, default: Any = None) -> str:
    """Strict JSON text for `doc`: non-finite floats as null, never NaN or Infinity."""
    if default is not None:  # objects JSON cannot hold become plain values first, then checked
        doc = json.loads(json.dumps(doc, default=default, allow_nan=True))
    return json.dumps(finite_or_null(doc), indent=indent, ensure_ascii=False, allow_nan=False)
