"""freshrl environments: Gymnasium envs that wrap multi-turn text and vision tasks.

Importing this package registers every env under ``freshrl/...`` so ``gymnasium.make`` finds them. Each env
module is imported only when its env is made.
"""

from functools import partial
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import load_env_creator, register, registry

from envs.base import MultiTurnEnv, Outcome, Parsed

_ENVS = {
    "freshrl/Sokoban-v0": ("envs.sokoban:SokobanEnv", {"difficulty": "simple"}),
    "freshrl/SokobanHard-v0": ("envs.sokoban:SokobanEnv", {"difficulty": "hard"}),
    "freshrl/FrozenLake-v0": ("envs.frozen_lake:FrozenLakeEnv", {}),
    "freshrl/FrozenLakeVision-v0": ("envs.frozen_lake:FrozenLakeVisionEnv", {}),
    "freshrl/Math-v0": ("envs.math_task:MathEnv", {}),
    "freshrl/NQSearch-v0": ("envs.search:NQSearchEnv", {}),
    "freshrl/NQSearchTools-v0": ("envs.search_tools:NQSearchToolsEnv", {}),
}


def create(entry_point: str, **kwargs: Any) -> gym.Env:
    """The env class at ``entry_point`` (``"module:Class"``), imported now and built with ``kwargs``.

    Registered through this function rather than the class, so ``gymnasium.make`` passes ``render_mode`` to
    the env unchanged: given the class, it answers ``render_mode="human"`` with a pygame window wrapper
    instead of the env's own error naming the modes it has.
    """
    return load_env_creator(entry_point)(**kwargs)


for _env_id, (_entry_point, _kwargs) in _ENVS.items():
    if _env_id not in registry:
        # The env enforces its own turn limit (max_turns); no TimeLimit wrapper on top.
        register(
            id=_env_id, entry_point=partial(create, _entry_point), kwargs=_kwargs, disable_env_checker=True
        )

ENV_IDS = tuple(_ENVS)

__all__ = ["ENV_IDS", "MultiTurnEnv", "Outcome", "Parsed", "create"]

import envs.ecosystem  # noqa: E402,F401  (registers the ecosystem ids whose library is installed)
