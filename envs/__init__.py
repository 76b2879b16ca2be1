"""freshrl environments: Gymnasium envs that wrap multi-turn text and vision tasks.

Importing this package registers every env under ``freshrl/...`` so ``gymnasium.make`` finds them. Entry
points are strings, so a module is imported only when its env is made.
"""

from gymnasium.envs.registration import register, registry

from envs.base import MultiTurnEnv, Outcome, Parsed

_ENVS = {
    "freshrl/Sokoban-v0": ("envs.sokoban:SokobanEnv", {"preset": "simple"}),
    "freshrl/SokobanHard-v0": ("envs.sokoban:SokobanEnv", {"preset": "hard"}),
    "freshrl/FrozenLake-v0": ("envs.frozen_lake:FrozenLakeEnv", {}),
    "freshrl/FrozenLakeVision-v0": ("envs.frozen_lake:FrozenLakeVisionEnv", {}),
    "freshrl/Math-v0": ("envs.math_task:MathEnv", {}),
    "freshrl/NQSearch-v0": ("envs.search:NQSearchEnv", {}),
}

for _env_id, (_entry_point, _kwargs) in _ENVS.items():
    if _env_id not in registry:
        # The env enforces its own turn limit (max_turns); no TimeLimit wrapper on top.
        register(id=_env_id, entry_point=_entry_point, kwargs=_kwargs, disable_env_checker=True)

ENV_IDS = tuple(_ENVS)

__all__ = ["ENV_IDS", "MultiTurnEnv", "Outcome", "Parsed"]
