"""Results files are strict JSON: NaN and infinities (a metric that was never measured) become null.

Python's ``json`` writes ``NaN`` by default, which is not JSON: ``jq``, JavaScript and most other readers
reject the whole file. Every JSON file the entry points write goes through :func:`write_json`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


def json_safe(value: Any) -> Any:
    """``value`` with every non-finite float (NaN, inf) replaced by None, in dicts, lists and tuples."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(item) for item in value]
    return value


def dumps(value: Any, indent: int | None = 2) -> str:
    """Strict JSON text of ``value`` (``allow_nan=False`` after :func:`json_safe`)."""
    return json.dumps(json_safe(value), indent=indent, allow_nan=False)


def write_json(path: str | Path, value: Any, indent: int | None = 2) -> None:
    Path(path).write_text(dumps(value, indent) + "\n")
