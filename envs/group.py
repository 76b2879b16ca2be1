"""GRPO groups: G copies of one env, all reset with the same seed so they start from the same task.

Group-relative advantages compare G rollouts of one task, so every copy must see the same first observation;
``reset(seed=s)`` fully determines the task, so each copy is reset with ``s``. Each copy also gets
``options["member"] = i`` (its index in the group): an env with random dynamics (slippery FrozenLake) draws
them from a stream keyed by the seed and ``i``, so the members share the task but not their luck, and a
group is still reproducible. Envs with deterministic dynamics ignore the option.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import gymnasium as gym


class Group(NamedTuple):
    """The envs of a group and what their ``reset`` returned, index-aligned."""

    envs: list[gym.Env]
    observations: list[Any]
    infos: list[dict[str, Any]]


def reset_group(envs: Sequence[gym.Env], seed: int, options: dict[str, Any] | None = None) -> Group:
    """Reset every env with ``seed`` and its member index (a new group on existing envs)."""
    observations, infos = [], []
    for member, env in enumerate(envs):
        observation, info = env.reset(seed=seed, options={**(options or {}), "member": member})
        observations.append(observation)
        infos.append(info)
    return Group(list(envs), observations, infos)


def make_group(env: str | Callable[[], gym.Env], group_size: int, seed: int, **make_kwargs: Any) -> Group:
    """``group_size`` new envs, each reset with ``seed``: a GRPO group.

    ``env`` is a registered id (made with ``gymnasium.make(env, **make_kwargs)``) or a factory.
    """
    if group_size < 1:
        raise ValueError(f"a group needs at least one env, got group_size={group_size}")
    if isinstance(env, str):
        envs = [gym.make(env, **make_kwargs) for _ in range(group_size)]
    else:
        if make_kwargs:
            raise ValueError("make_kwargs apply to an env id, not to a factory")
        envs = [env() for _ in range(group_size)]
    return reset_group(envs, seed)
