"""Reading RLlib's training results: the numeric leaves of a result, one metric by name, and whether an
iteration trained anything. Shared by the entry points that train (train, sweep, compare, evaluate)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

# A run is flagged when more than this share of its iterations trained nothing (no informative group).
MOSTLY_UNTRAINED_SHARE = 0.5


def flatten(result: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """Numeric leaves of an RLlib result dict as {"a/b/c": value}."""
    flat: dict[str, float] = {}
    for key, value in result.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, f"{name}/"))
        elif isinstance(value, bool | int | float) and not isinstance(value, bool):
            flat[name] = float(value)
    return flat


def pick(flat: dict[str, float], suffix: str) -> float:
    """The first metric whose name ends with ``suffix`` (NaN when absent)."""
    return next((v for k, v in flat.items() if k.endswith(suffix)), float("nan"))


def measured(flat: Mapping[str, Any], suffix: str) -> float | None:
    """The first metric whose name ends with ``suffix`` as a float, None when absent or not a finite number
    (a run saved to JSON writes an iteration's missing or NaN metric as null)."""
    for key, value in flat.items():
        if key.endswith(suffix):
            return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None
    return None


def trained_nothing(flat: dict[str, float]) -> bool:
    """No informative group this iteration (fresh or from the surplus), so the learner did not step."""
    kept = pick(flat, "rollout/groups_kept") + pick(flat, "rollout/groups_from_surplus")
    return kept == 0
