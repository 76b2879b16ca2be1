"""Overlong reward shaping (DAPO section 3.4): soft overlong punishment (Eq. 13) and overlong filtering.

Soft overlong punishment, added to the task reward before group normalisation::

    R_length(y) = 0                                  if |y| <= L_max - L_cache
                = ((L_max - L_cache) - |y|) / L_cache  if L_max - L_cache < |y| <= L_max
                = -1                                 if L_max < |y|

The middle branch includes |y| == L_max, where it equals -1, so the function is continuous and reaches -1 at
L_max exactly. In DAPO's runs L_max = 20480 is the generation budget and L_cache = 4096 (expected length
16384). |y| is the number of response tokens the caller counts: for multi-turn episodes, per turn or for the
whole trajectory, matching the budget L_max stands for.

Overlong filtering masks the loss of truncated responses instead of rewarding them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def soft_overlong_penalty(
    lengths: np.ndarray | Sequence[int] | int,
    max_len: int,
    cache_len: int,
    *,
    penalty_factor: float = 1.0,
) -> np.ndarray:
    """R_length of Eq. 13 for each response length, as float64 of the shape of ``lengths``.

    max_len: L_max (> 0). cache_len: L_cache, in (0, max_len]. penalty_factor: scales the penalty (the -1 of
    the paper becomes -penalty_factor; verl's ``overlong_buffer.penalty_factor``) for rewards not in [-1, 1].
    """
    if max_len <= 0:
        raise ValueError(f"max_len (L_max) must be > 0, got {max_len}")
    if not 0 < cache_len <= max_len:
        raise ValueError(f"cache_len (L_cache) must be in (0, max_len={max_len}], got {cache_len}")
    if penalty_factor < 0:
        raise ValueError(f"penalty_factor must be >= 0, got {penalty_factor}")
    y = np.asarray(lengths, dtype=np.float64)
    if np.any(~np.isfinite(y)) or np.any(y < 0):
        raise ValueError("lengths must be finite and >= 0")
    expected = max_len - cache_len
    penalty = np.where(y <= expected, 0.0, np.where(y <= max_len, (expected - y) / cache_len, -1.0))
    return penalty * penalty_factor


def overlong_filter_mask(truncated: np.ndarray | Sequence[bool] | bool) -> np.ndarray:
    """1.0 for responses to keep, 0.0 for truncated ones whose loss overlong filtering masks; float64 of the
    shape of ``truncated`` (booleans or 0/1)."""
    t = np.asarray(truncated)
    if not np.all((t == 0) | (t == 1)):
        raise ValueError("truncated must hold booleans or 0/1")
    return np.where(t.astype(bool), 0.0, 1.0)
