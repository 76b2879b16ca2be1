"""Small replay statistics the training loop logs under ``replay/``."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def effective_sample_size(weights: np.ndarray) -> float:
    """Kong's effective sample size of importance weights: (sum w)^2 / sum w^2 (0 for no weights)."""
    w = np.asarray(weights, dtype=np.float64)
    sum_sq = float(np.dot(w, w))
    return float(w.sum()) ** 2 / sum_sq if sum_sq > 0 else 0.0


def replay_fraction(num_fresh: int, num_replay: int) -> float:
    """Fraction of an iteration's training samples drawn from the buffer (0 when nothing was trained on)."""
    total = num_fresh + num_replay
    return num_replay / total if total > 0 else 0.0


def batch_metrics(
    is_weights: np.ndarray, ages: np.ndarray, successes: Sequence[bool] | np.ndarray | None = None
) -> dict[str, float]:
    """``replay/*`` metrics of one non-empty replay batch.

    The ESS is scale-free: weights all ~0.01 give ESS ~ n while a replay step then moves the policy ~100x
    less than a fresh one. So the mean and min weight are logged beside it, and the share of successes shows
    whether the priorities starve one outcome (|R| + 1e-6 with 0/1 rewards drew only successes).
    """
    w = np.asarray(is_weights, dtype=np.float64)
    out = {
        "replay/ess": effective_sample_size(w),
        "replay/ess_fraction": effective_sample_size(w) / w.shape[0],
        "replay/is_weight_mean": float(w.mean()),
        "replay/is_weight_min": float(w.min()),
        "replay/batch_mean_age": float(np.mean(ages)),
    }
    if successes is not None:
        s = np.asarray(successes, dtype=np.float64)
        if s.shape != w.shape:
            raise ValueError(f"successes must have one entry per batch item ({w.shape[0]}), got {s.shape}")
        out["replay/success_fraction"] = float(s.mean())
    return out
