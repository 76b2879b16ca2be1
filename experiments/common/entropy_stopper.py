"""Early stopping on entropy collapse: a Tune ``Stopper`` that ends a sweep trial whose token entropy (the
learner's mean over the iteration's response tokens, ``learners/train/entropy``) stayed below ``min_entropy``
for ``patience`` consecutive iterations (``python -m experiments.sweep --min-entropy``).

A policy whose entropy collapsed samples nearly the same response every time: its groups stop being
informative and its success stalls or falls (docs/entropy_guard.md), so its remaining iterations would spend
the sweep's budget on a run that no longer explores.

Only iterations that report the entropy count: the learner logs it only when it trained on response tokens (an
iteration that trained nothing reports none, or NaN), and such an iteration neither extends nor breaks a
streak. A trial's count is kept by trial id, across the pauses of PBT (``--resume`` starts it again, from
Tune's copy of the stopper as the sweep began). The stopper writes its reason into the result that it stops
(``stopped_early``): Tune hands that same dict on to its loggers and keeps it as the trial's last result, so
``result.json`` and the sweep's summary name the reason.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, MutableMapping
from typing import Any

from ray import tune

ENTROPY_KEY = "learners/train/entropy"
STOPPED_EARLY_KEY = "stopped_early"


def result_value(result: Mapping[str, Any], key: str) -> float | None:
    """The number at ``key`` ("a/b/c") of a Tune result, nested as RLlib reports it (``{"learners":
    {"train/entropy": x}}``), flat as Tune's loggers write it, or anything between; None where it is absent or
    not a finite number."""
    if key in result:
        value = result[key]
        real = isinstance(value, numbers.Real) and not isinstance(value, bool)
        return float(value) if real and math.isfinite(value) else None
    for position, char in enumerate(key):
        if char == "/" and isinstance(result.get(key[:position]), Mapping):
            value = result_value(result[key[:position]], key[position + 1 :])
            if value is not None:
                return value
    return None


class EntropyCollapseStopper(tune.Stopper):
    """Stops a trial after ``patience`` consecutive reported iterations with entropy below ``min_entropy``."""

    def __init__(self, min_entropy: float, patience: int) -> None:
        if not min_entropy > 0 or patience < 1:
            raise ValueError(f"min_entropy must be > 0 and patience >= 1, got {min_entropy}, {patience}")
        self.min_entropy = min_entropy
        self.patience = patience
        self._low: dict[str, int] = {}  # trial id -> consecutive reported iterations below min_entropy

    @property
    def reason(self) -> str:
        return f"entropy below {self.min_entropy:g} for {self.patience} iteration{'s' * (self.patience != 1)}"

    def __call__(self, trial_id: str, result: MutableMapping[str, Any]) -> bool:
        entropy = result_value(result, ENTROPY_KEY)
        if entropy is None:
            return False
        low = self._low.get(trial_id, 0) + 1 if entropy < self.min_entropy else 0
        self._low[trial_id] = low
        if low < self.patience:
            return False
        result[STOPPED_EARLY_KEY] = self.reason
        return True

    def stop_all(self) -> bool:
        return False
