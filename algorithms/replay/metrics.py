"""Small replay statistics the training loop logs under ``replay/``."""

from __future__ import annotations

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
