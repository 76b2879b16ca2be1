"""Per-group preparation before dynamic sampling (overlong shaping, group-normalised advantages) and the
values dynamic sampling compares."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from algorithms.dapo.advantages import group_advantages
from algorithms.dapo.gigpo import gigpo_credit, has_state_keys
from algorithms.dapo.overlong import overlong_length, soft_overlong_penalty
from algorithms.trajectory import Trajectory


def shape_and_score_group(
    group: Sequence[Trajectory],
    *,
    overlong_punishment: bool,
    overlong_scope: str,
    max_response_tokens: int,
    overlong_cache_len: int,
    advantage_eps: float,
    advantage_std_normalize: bool,
    advantage_estimator: str,
    gigpo_gamma: float,
    gigpo_step_weight: float,
) -> None:
    """Set ``reward`` and ``advantage`` (and, for GiGPO, ``turn_advantages``) of every trajectory of one
    group, in place.

    reward = episode return (+ soft overlong penalty, DAPO Eq. 13, of the episode's length in
    ``overlong_scope``: algorithms/dapo/overlong.py). The penalty goes into the reward before group
    normalisation (DAPO section 3.4); it shapes the advantages inside a group but does not decide whether
    dynamic sampling keeps the group (``dynamic_sampling_metric``, by default success).
    advantage = (R - mean_G) / (std_G + eps), 0 for all-equal groups; R - mean_G without
    ``advantage_std_normalize`` (Dr. GRPO).
    ``advantage_estimator="gigpo"``: each turn's tokens get advantage + omega x its step advantage within its
    anchor-state group (algorithms/dapo/gigpo.py; omega = ``gigpo_step_weight``, discount ``gigpo_gamma``).
    A group without state keys (the env reports none) keeps episode advantages.
    """
    rewards = np.array([t.episode_return for t in group], dtype=np.float64)
    if overlong_punishment:
        lengths = [overlong_length(t, overlong_scope, max_response_tokens) for t in group]
        rewards += [float(soft_overlong_penalty(y, l_max, overlong_cache_len)) for y, l_max in lengths]
    advantages = group_advantages(rewards[None, :], eps=advantage_eps, std_normalize=advantage_std_normalize)
    for trajectory, reward, episode_advantage in zip(group, rewards, advantages[0], strict=True):
        trajectory.reward = float(reward)
        trajectory.advantage = float(episode_advantage)
        trajectory.turn_advantages = []
    if advantage_estimator != "gigpo" or not has_state_keys(group):
        return
    credit = gigpo_credit(
        group,
        gamma=gigpo_gamma,
        step_weight=gigpo_step_weight,
        eps=advantage_eps,
        std_normalize=advantage_std_normalize,
    )
    for trajectory, turn_advantages in zip(group, credit.turn_advantages, strict=True):
        trajectory.turn_advantages = turn_advantages


def group_successes(group: Sequence[Trajectory]) -> list[float]:
    """Accuracy: 1 for a successful episode (``info["success"]``), else 0. Equal values mean #correct is 0 or
    G, the groups DAPO's constraint 0 < #correct < G drops (DAPO Eq. 11, section 3.2)."""
    return [float(t.success) for t in group]


def group_rewards(group: Sequence[Trajectory]) -> list[float]:
    """The shaped rewards (overlong penalty included): equal values mean zero advantages. For envs whose
    success is not binary (partial credit), where accuracy cannot say whether a group is informative."""
    return [t.reward for t in group]


def has_step_signal(group: Sequence[Trajectory]) -> bool:
    """Whether a turn of the group has a non-zero GiGPO step advantage (arXiv 2505.10978 Eq. 7): its turn
    advantage differs from its episode's (``turn_advantages`` = advantage + omega x step advantage, Eq. 8).
    A group whose episodes tie on the dynamic-sampling metric (equal returns, say all failed) can still reach
    a shared state and act differently there: DAPO's Eq. 11 filter would drop exactly the groups GiGPO's
    turn-level credit is for. False for episode advantages (no ``turn_advantages``)."""
    return any(a != t.advantage for t in group for a in t.turn_advantages)


# DAPOConfig.dynamic_sampling_metric -> the values of a group that must not be all equal for it to be kept.
DYNAMIC_SAMPLING_METRICS: dict[str, Callable[[Sequence[Trajectory]], list[float]]] = {
    "success": group_successes,
    "reward": group_rewards,
}
