"""Brute-force references for the replay tests: every priority recomputed directly, in float64."""

from __future__ import annotations

import numpy as np
import pytest


def reference_probabilities(base: np.ndarray, steps: np.ndarray, t: float, decay, alpha: float) -> np.ndarray:
    """P(i) = (p_base_i * d(t - t_i))^alpha / sum_k (...)^alpha, computed directly."""
    p = base * decay.factor(t - steps)
    q = p**alpha
    return q / q.sum()


def reference_is_weights(probs_all: np.ndarray, probs_drawn: np.ndarray, beta: float) -> np.ndarray:
    """w_i = (N P(i))^-beta / max_j (N P(j))^-beta with the max over the whole buffer."""
    n = probs_all.shape[0]
    return (n * probs_drawn) ** -beta / np.max((n * probs_all) ** -beta)


@pytest.fixture
def reference():
    return reference_probabilities, reference_is_weights
