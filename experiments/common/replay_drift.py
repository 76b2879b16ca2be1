"""How fast replayed data goes stale in a run, and the age decay constant FreshPER's model gives for it.

FreshPER (Eq. 11-13) bounds a replayed sample's effective contribution by exp(-KL) between the policy that
collected it and the one training on it, models that KL as c x age, and sets the decay constant tau = 1/c.
The paper then tunes tau (500 steps, 1000 for FrozenLake); here c is measured. Each iteration with a replay
batch gives one point: the batch's mean age (``replay/batch_mean_age``) and its per-token KL above the fresh
batch's, which removes what is not staleness (the engine/learner mismatch, the update pass's own drift):

- with the mismatch correction on, ``train/mismatch_kl_replay - train/mismatch_kl_fresh`` (the learner's
  pi_old at the pass start against the collecting sampler's logprobs);
- without it, ``train/approx_kl_replay - train/approx_kl_fresh`` (the current policy against them).

c is the least-squares slope through the origin, sum(age x kl) / sum(age^2), over a run's iterations (or
several runs'). docs/replay.md ("tau in the paper's units") reads the result.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from experiments.common.training_metrics import measured

MIN_POINTS = 3  # fewer iterations with a replay batch give no slope worth reporting
KL_PAIRS = (
    ("train/mismatch_kl_replay", "train/mismatch_kl_fresh"),
    ("train/approx_kl_replay", "train/approx_kl_fresh"),
)


def staleness_point(flat: Mapping[str, Any]) -> tuple[float, float] | None:
    """(mean age of the replay batch, its per-token KL above the fresh batch's) of one iteration's flat
    metrics; None for an iteration without a replay batch or without the KL metrics."""
    age = measured(flat, "replay/batch_mean_age")
    if age is None or age <= 0:
        return None
    for replay_key, fresh_key in KL_PAIRS:
        replayed = measured(flat, replay_key)
        if replayed is not None:
            return age, replayed - (measured(flat, fresh_key) or 0.0)
    return None


def drift(rows: Iterable[Mapping[str, Any]]) -> dict[str, float | int] | None:
    """``{"kl_per_age": c, "tau": 1/c, "points": n}`` fitted over the iterations of ``rows`` (flat metrics,
    one per iteration, of one or more runs); None with fewer than MIN_POINTS replay iterations or no
    positive drift (nothing goes stale measurably: tau would be infinite)."""
    points = [point for point in map(staleness_point, rows) if point is not None]
    if len(points) < MIN_POINTS:
        return None
    slope = sum(age * kl for age, kl in points) / sum(age * age for age, _ in points)
    if slope <= 0:
        return None
    return {"kl_per_age": slope, "tau": 1.0 / slope, "points": len(points)}
