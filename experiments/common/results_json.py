"""Results files are strict JSON: NaN and infinities (a metric that was never measured) become null.

Python's ``json`` writes ``NaN`` by default, which is not JSON: ``jq``, JavaScript and most other readers
reject the whole file. Every JSON file the entry points write goes through :func:`write_json`, and records
the dtypes its run computed in (:func:`dtype_record`): "auto" resolves by the machine, so a number means
little without them.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from algorithms.dapo import DAPOConfig


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


def dtype_record(config: DAPOConfig) -> dict[str, str]:
    """The learner and engine dtypes ``config`` resolved to, with their reasons
    (``DAPOConfig.resolved_dtypes``), and torch's capability string of this CPU ("AVX2", "AVX512", ...)."""
    from models.dtype import cpu_capability

    return {"cpu_capability": cpu_capability(), **config.resolved_dtypes()}
