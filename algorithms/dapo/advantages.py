"""Group-relative advantages (GRPO; DAPO section 3): A_i = (R_i - mean(R_group)) / (std(R_group) + eps).

Every trajectory of a group shares one advantage over all its response tokens (outcome supervision).

Which std: the GRPO and DAPO papers write ``std`` without saying. verl (``compute_grpo_outcome_advantage``),
TRL and OpenRLHF call ``torch.std``, the unbiased sample std (ddof=1); verl also gives a one-trajectory group
mean 0 and std 1, so its advantage is its raw reward. freshrl defaults to the population std (ddof=0), so that
every group's advantages have unit root-mean-square whatever its size and groups of unequal sizes are
weighted alike; a one-trajectory group gets advantage 0 (it carries no relative information). With equal
group sizes the two stds differ by the constant factor sqrt(G / (G - 1)) (1.033 at G = 16). Pass ``ddof=1``
for verl's std. ``std_normalize=False`` gives Dr. GRPO's centred rewards R_i - mean (Liu et al., 2025).

A group whose rewards are all equal gets exactly zero advantages (no float residue from the mean): the groups
reward-variance dynamic sampling (``dynamic_sampling_metric="reward"``) drops are exactly the zero-advantage
ones.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def group_advantages(
    rewards: np.ndarray | Sequence[Sequence[float]],
    eps: float = 1e-6,
    std_normalize: bool = True,
    *,
    ddof: int = 0,
) -> np.ndarray:
    """Advantages of a [P, G] array of rewards (P groups of G trajectories), as [P, G] float64.

    eps: added to the std (ignored for all-equal groups, which get 0). ddof: 0 population std, 1 sample std;
    a group of at most ``ddof`` trajectories has std 0.
    """
    _check_args(eps, ddof)
    r = _as_finite(rewards)
    if r.ndim != 2:
        raise ValueError(f"rewards must be [P, G] (P groups of G trajectories), got shape {r.shape}")
    if r.shape[1] == 0:
        return r.copy()
    mean = r.mean(axis=1, keepdims=True)
    std = r.std(axis=1, ddof=ddof, keepdims=True) if r.shape[1] > ddof else np.zeros_like(mean)
    equal = (r.max(axis=1) == r.min(axis=1))[:, None]
    return _normalize(r, mean, std, equal, eps, std_normalize)


def _normalize(
    r: np.ndarray, mean: np.ndarray, std: np.ndarray, equal: np.ndarray, eps: float, std_normalize: bool
) -> np.ndarray:
    centred = np.where(equal, 0.0, r - mean)
    if not std_normalize:
        return centred
    # An all-equal group has centred == 0 and std == 0; dividing by 1 there avoids 0 / 0 when eps == 0.
    return centred / np.where(equal, 1.0, std + eps)


def _as_finite(x: np.ndarray | Sequence[float]) -> np.ndarray:
    r = np.asarray(x, dtype=np.float64)
    if not np.all(np.isfinite(r)):
        raise ValueError("rewards must be finite")
    return r


def _check_args(eps: float, ddof: int) -> None:
    if eps < 0:
        raise ValueError(f"eps must be >= 0, got {eps}")
    if ddof not in (0, 1):
        raise ValueError(f"ddof must be 0 or 1, got {ddof}")
