"""Overlong reward shaping (DAPO section 3.4): soft overlong punishment (Eq. 13) and overlong filtering.

Soft overlong punishment, added to the task reward before group normalisation::

    R_length(y) = 0                                  if |y| <= L_max - L_cache
                = ((L_max - L_cache) - |y|) / L_cache  if L_max - L_cache < |y| <= L_max
                = -1                                 if L_max < |y|

The middle branch includes |y| == L_max, where it equals -1, so the function is continuous and reaches -1 at
L_max exactly. In DAPO's runs L_max = 20480 is the generation budget and L_cache = 4096 (expected length
16384). Overlong filtering masks the loss of truncated responses instead of rewarding them.

Multi-turn episodes (``OVERLONG_SCOPES``): DAPO's y is one single-turn response and L_max its generation
budget. freshrl's default scope ``"trajectory"`` reads y as all response tokens of the episode and L_max as
the episode's response budget (``Trajectory.response_budget``: ``max_trajectory_response_tokens``, or by
default ``max_response_tokens`` x the env's ``max_turns``, the most an episode can generate); the episode is
overlong (filtered) when its responses used the whole budget. Scope ``"turn"`` reads y as the longest
response and L_max as the per-turn limit, and an episode is overlong when any response hit the generation
limit. For a single-turn env both scopes are exactly the paper's. L_cache is ``overlong_cache_len`` tokens in
both scopes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from algorithms.trajectory import Trajectory

OVERLONG_SCOPES = ("trajectory", "turn")


def soft_overlong_penalty(
    lengths: np.ndarray | Sequence[int] | int,
    max_len: int,
    cache_len: int,
) -> np.ndarray:
    """R_length of Eq. 13 for each response length, as float64 of the shape of ``lengths``.

    max_len: L_max (> 0). cache_len: L_cache, in (0, max_len].
    """
    if max_len <= 0:
        raise ValueError(f"max_len (L_max) must be > 0, got {max_len}")
    if not 0 < cache_len <= max_len:
        raise ValueError(f"cache_len (L_cache) must be in (0, max_len={max_len}], got {cache_len}")
    y = np.asarray(lengths, dtype=np.float64)
    if np.any(~np.isfinite(y)) or np.any(y < 0):
        raise ValueError("lengths must be finite and >= 0")
    expected = max_len - cache_len
    return np.where(y <= expected, 0.0, np.where(y <= max_len, (expected - y) / cache_len, -1.0))


def overlong_filter_mask(truncated: np.ndarray | Sequence[bool] | bool) -> np.ndarray:
    """1.0 for responses to keep, 0.0 for truncated ones whose loss overlong filtering masks; float64 of the
    shape of ``truncated`` (booleans or 0/1)."""
    t = np.asarray(truncated)
    if not np.all((t == 0) | (t == 1)):
        raise ValueError("truncated must hold booleans or 0/1")
    return np.where(t.astype(bool), 0.0, 1.0)


def overlong_length(trajectory: Trajectory, scope: str, max_response_tokens: int) -> tuple[int, int]:
    """(|y|, L_max) of Eq. 13 for one episode in ``scope`` (module docstring); ``max_response_tokens`` is
    the per-turn generation limit, L_max of the ``"turn"`` scope."""
    if scope == "turn":
        return max(trajectory.response_lengths, default=0), max_response_tokens
    return trajectory.num_response_tokens, _budget(trajectory, scope)


def is_overlong(trajectory: Trajectory, scope: str) -> bool:
    """Whether overlong filtering masks this episode: ``"trajectory"``, its responses used its whole
    response budget and the last was cut there (one that ended by itself on its last budget token is not
    truncated, as in DAPO); ``"turn"``, some response hit the generation limit (finish reason
    ``"length"``)."""
    if scope == "turn":
        return trajectory.response_truncated
    used_up = trajectory.num_response_tokens >= _budget(trajectory, scope)
    return used_up and bool(trajectory.finish_reasons) and trajectory.finish_reasons[-1] == "length"


def _budget(trajectory: Trajectory, scope: str) -> int:
    if scope not in OVERLONG_SCOPES:
        raise ValueError(f"overlong scope must be one of {OVERLONG_SCOPES}, got {scope!r}")
    if trajectory.response_budget is None:
        raise ValueError(
            "overlong scope 'trajectory' needs Trajectory.response_budget: the rollout sets it to "
            "max_trajectory_response_tokens or max_response_tokens x the env's max_turns; for an env without "
            "max_turns set max_trajectory_response_tokens (or overlong_scope='turn'), and set it on "
            "trajectories built by hand"
        )
    return trajectory.response_budget
