"""GiGPO: turn-level credit from anchor-state groups (Feng et al., 2025, "Group-in-Group Policy Optimization
for LLM Agent Training", arXiv 2505.10978; docs/credit_assignment.md).

A group holds G episodes of one task. Episode i's turn t starts from the state the env reports as
``key[i][t]`` (``Trajectory.turn_state_keys``), earns the env's reward ``r[i][t]`` and has

    R[i][t] = sum_{k >= t} gamma^(k - t) r[i][k]                    discounted return-to-go       (Eq. 5)
    S(s)    = {(i, t) : key[i][t] = s}                              anchor-state step group       (Eq. 6)
    A_S[i][t] = (R[i][t] - mean_S(s) R) / (std_S(s) R + eps)        step relative advantage       (Eq. 7)
    A[i][t] = A_E[i] + omega A_S[i][t]                              the turn's tokens' advantage  (Eq. 8)

A_E is the episode advantage (Eq. 3: DAPO Eq. 9's group advantage of the shaped reward, which shaping stores
as ``Trajectory.advantage``). Turns of one episode that start from the same state join one step group, as in
verl-agent (``build_step_group`` groups every step of the group's episodes by its anchor observation). A step
group of one turn, or whose returns are all equal, gets A_S = 0: nothing to compare it with.

The normalisation follows the episode advantage's: ``std_normalize=False`` drops the std (verl-agent's
``mean_norm``), and the std is the population std (ddof 0), as freshrl's episode advantages (verl-agent uses
torch.std, ddof 1). The returns are the env's turn rewards only: the overlong penalty (DAPO Eq. 13) shapes
the episode reward, not a turn's.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from algorithms.dapo.advantages import group_advantages
from algorithms.trajectory import Trajectory


class GiGPOFallbackWarning(UserWarning):
    """GiGPO was asked for, but the env reports no ``info["state_key"]``: episode advantages are used."""


@dataclass(frozen=True)
class GroupCredit:
    """GiGPO's credit for one group, index-aligned with its trajectories and their turns.

    turn_advantages: A[i][t] (Eq. 8). step_advantages: A_S[i][t] (Eq. 7). step_group_sizes: |S(s)| of each
    step group (Eq. 6), a turn without a state key counting as a group of its own.
    """

    turn_advantages: list[list[float]]
    step_advantages: list[list[float]]
    step_group_sizes: list[int]


def discounted_returns(rewards: Sequence[float], gamma: float) -> np.ndarray:
    """R[t] = sum_{k >= t} gamma^(k - t) r[k] of one episode's turn rewards (GiGPO Eq. 5)."""
    returns = np.zeros(len(rewards), dtype=np.float64)
    following = 0.0
    for t in reversed(range(len(rewards))):
        following = float(rewards[t]) + gamma * following
        returns[t] = following
    return returns


def step_groups(turn_state_keys: Sequence[Sequence[Hashable | None]]) -> list[list[tuple[int, int]]]:
    """The (episode, turn) pairs of each anchor state, in order of first visit (GiGPO Eq. 6). A turn whose key
    is None (the env reports none) is a group of its own."""
    groups: dict[Hashable, list[tuple[int, int]]] = {}
    alone: list[list[tuple[int, int]]] = []
    for i, keys in enumerate(turn_state_keys):
        for t, key in enumerate(keys):
            if key is None:
                alone.append([(i, t)])
            else:
                groups.setdefault(key, []).append((i, t))
    return list(groups.values()) + alone


def has_state_keys(group: Sequence[Trajectory]) -> bool:
    """Whether any turn of the group has a state key (otherwise GiGPO has no step groups to form)."""
    return any(key is not None for t in group for key in t.turn_state_keys)


def gigpo_credit(
    group: Sequence[Trajectory],
    episode_advantages: Sequence[float],
    *,
    gamma: float,
    step_weight: float,
    eps: float,
    std_normalize: bool,
) -> GroupCredit:
    """GiGPO's turn advantages of one group, given its episode advantages A_E (one per trajectory)."""
    for trajectory in group:
        if len(trajectory.turn_state_keys) != trajectory.num_turns:
            raise ValueError(
                f"trajectory of group {trajectory.group_id} has {trajectory.num_turns} turns but "
                f"{len(trajectory.turn_state_keys)} state keys: GiGPO needs one per turn (None where the env "
                "reports none), as algorithms/rollout.py records them"
            )
    returns = [discounted_returns(t.turn_rewards, gamma) for t in group]
    steps = [np.zeros(t.num_turns) for t in group]
    groups = step_groups([t.turn_state_keys for t in group])
    for members in groups:
        values = np.array([[returns[i][t] for i, t in members]])
        relative = group_advantages(values, eps=eps, std_normalize=std_normalize)[0]
        for (i, t), value in zip(members, relative, strict=True):
            steps[i][t] = value
    return GroupCredit(
        turn_advantages=[
            (episode + step_weight * s).tolist() for episode, s in zip(episode_advantages, steps, strict=True)
        ],
        step_advantages=[s.tolist() for s in steps],
        step_group_sizes=[len(members) for members in groups],
    )


def has_step_signal(group: Sequence[Trajectory]) -> bool:
    """Whether a turn of the shaped group has a non-zero step advantage (Eq. 7): its turn advantage differs
    from its episode's (``turn_advantages`` = advantage + omega x step advantage, Eq. 8). A group whose
    episodes tie on the dynamic-sampling metric (equal returns, say all failed) can still reach a shared state
    and act differently there: DAPO's Eq. 11 filter would drop exactly the groups GiGPO's turn-level credit is
    for. False for episode advantages (no ``turn_advantages``)."""
    return any(a != t.advantage for t in group for a in t.turn_advantages)


def step_group_metrics(credits: Sequence[GroupCredit]) -> dict[str, float]:
    """``gigpo/shared_turn_fraction`` (turns whose step group has other turns: those that get a step
    advantage), ``gigpo/step_group_size_mean`` (turns per step group) and ``gigpo/step_advantage_std`` (the
    spread of A_S over all turns) of some groups' credit; {} without turns."""
    sizes = np.array([size for credit in credits for size in credit.step_group_sizes])
    steps = np.array([a for credit in credits for turns in credit.step_advantages for a in turns])
    if sizes.size == 0:
        return {}
    return {
        "gigpo/shared_turn_fraction": float(sizes[sizes > 1].sum() / sizes.sum()),
        "gigpo/step_group_size_mean": float(sizes.mean()),
        "gigpo/step_advantage_std": float(steps.std()),
    }
