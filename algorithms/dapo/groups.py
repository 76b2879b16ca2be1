"""Per-group preparation before dynamic sampling: overlong shaping, then the run's advantage estimator."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from algorithms.dapo.advantage_estimators import AdvantageEstimator
from algorithms.dapo.overlong import overlong_length, soft_overlong_penalty
from algorithms.trajectory import Trajectory


def shape_and_score_group(
    group: Sequence[Trajectory],
    *,
    overlong_punishment: bool,
    overlong_scope: str,
    max_response_tokens: int,
    overlong_cache_len: int,
    estimator: AdvantageEstimator,
) -> None:
    """Set ``reward``, ``advantage`` and ``turn_advantages`` of every trajectory of one group, in place.

    reward = episode return (+ soft overlong penalty, DAPO Eq. 13, of the episode's length in
    ``overlong_scope``: algorithms/dapo/overlong.py). The penalty goes into the reward before the advantages
    (DAPO section 3.4); it shapes the advantages inside a group but does not decide whether dynamic sampling
    keeps the group (``dynamic_sampling_metric``, by default success).
    advantage, turn_advantages: the run's ``estimator`` (``DAPOConfig.advantage_estimator``), with
    ``turn_advantages`` empty where it gives every turn the episode's advantage.
    """
    rewards = np.array([t.episode_return for t in group], dtype=np.float64)
    if overlong_punishment:
        lengths = [overlong_length(t, overlong_scope, max_response_tokens) for t in group]
        rewards += [float(soft_overlong_penalty(y, l_max, overlong_cache_len)) for y, l_max in lengths]
    advantages = estimator.advantages(group, rewards)
    turns = advantages.turns if advantages.turns is not None else [[] for _ in group]
    for trajectory, reward, advantage, turn_advantages in zip(
        group, rewards, advantages.episode, turns, strict=True
    ):
        trajectory.reward = float(reward)
        trajectory.advantage = float(advantage)
        trajectory.turn_advantages = turn_advantages
