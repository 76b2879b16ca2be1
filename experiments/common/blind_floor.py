"""The blind floor of a learning-lab entry: the held-out success of a policy that never looks at the
observation, answering every turn with the env's ``blind_response`` (uniform moves, as many as a turn
allows), on the validation tasks the entry's evaluations play.

A start below the floor is signal of the wrong kind: a policy that RL lifts to the floor may only have learnt
to answer with more moves, not to read the board. The lab reports each entry's start and end beside its floor
(docs/learning_lab.md, "The blind floor"). Envs without ``blind_response`` (Math, search: there is no small
answer vocabulary to draw from) have no floor.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

import envs  # noqa: F401  (registers the ids)
from experiments.common.significance import mean_over_seeds

# Blind episodes per task: with 512 tasks, 4 keep the floor's 95% interval within about +-2 points.
DEFAULT_REPEATS = 4


def blind_floor(
    env_id: str,
    env_config: dict[str, Any],
    task_seeds: Sequence[int],
    repeats: int = DEFAULT_REPEATS,
    seed: int = 0,
) -> dict[str, Any] | None:
    """The blind policy's success on the tasks ``task_seeds`` (reset seeds: those an evaluation played),
    ``repeats`` episodes each: the mean over tasks of each task's rate, with the 95% t interval over tasks (a
    task's episodes are one cluster), and each task's rate (``task_rates``, in the order of ``task_seeds``);
    None where the env has no ``blind_response``."""
    env = gym.make(env_id, **env_config).unwrapped
    if not hasattr(env, "blind_response"):
        env.close()
        return None
    rng = np.random.default_rng(seed)
    rates = []
    for task in task_seeds:
        wins = 0
        for _ in range(repeats):
            env.reset(seed=int(task))
            done, info = False, {}
            while not done:
                _, _, terminated, truncated, info = env.step(env.blind_response(rng))
                done = terminated or truncated
            wins += bool(info.get("success"))
        rates.append(wins / repeats)
    env.close()
    figure = mean_over_seeds(rates)
    return {
        "success": figure["mean"],
        "ci95": figure["ci95"],
        "tasks": len(task_seeds),
        "repeats": repeats,
        "seed": seed,
        "policy": "blind: each turn the env's blind_response (uniform moves, as many as a turn allows)",
        "task_rates": rates,
    }
