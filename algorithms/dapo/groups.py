"""Per-group preparation before dynamic sampling: overlong shaping, then group-normalised advantages."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from algorithms.dapo.advantages import group_advantages
from algorithms.dapo.overlong import soft_overlong_penalty
from algorithms.trajectory import Trajectory


def shape_and_score_group(
    group: Sequence[Trajectory],
    *,
    overlong_punishment: bool,
    max_response_tokens: int,
    overlong_cache_len: int,
    advantage_eps: float,
) -> None:
    """Set ``reward`` and ``advantage`` of every trajectory of one group, in place.

    reward = episode return (+ soft overlong penalty, DAPO Eq. 13, with L_max = max_response_tokens, on the
    longest response of the episode: for a single turn exactly the paper's |y|). The penalty goes into the
    reward before group normalisation (DAPO section 3.4), so dynamic sampling filters on the shaped reward
    too (verl filters on accuracy and ignores it: shared/notes/anchors.md).
    advantage = (R - mean_G) / (std_G + eps), 0 for all-equal groups.
    """
    rewards = np.array([t.episode_return for t in group], dtype=np.float64)
    if overlong_punishment:
        longest = [max(t.response_lengths, default=0) for t in group]
        rewards += soft_overlong_penalty(longest, max_response_tokens, overlong_cache_len)
    advantages = group_advantages(rewards[None, :], eps=advantage_eps)[0]
    for trajectory, reward, advantage in zip(group, rewards, advantages, strict=True):
        trajectory.reward = float(reward)
        trajectory.advantage = float(advantage)


def group_rewards(group: Sequence[Trajectory]) -> list[float]:
    """The values dynamic sampling compares: the shaped rewards."""
    return [t.reward for t in group]
