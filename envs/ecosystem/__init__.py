"""Envs adapted from env ecosystems: reasoning-gym, textarena and minigrid's BabyAI (docs/adding_an_env.md),
and a client that plays any OpenEnv env server.

Each library is in the optional ``ecosystem`` extra (pyproject.toml). Importing this package imports none
of them: it registers the curated ids of every library that is installed (``importlib.util.find_spec``),
and an adapter module imports its library only when its env is made: ``import envs`` works without the
extra. The OpenEnv client needs no library (the standard library speaks the protocol), so its id,
``openenv/Client-v0``, is always registered; it takes the server as ``base_url=``.
"""

from __future__ import annotations

import importlib.util
from functools import partial

from gymnasium.envs.registration import register, registry

from envs.ecosystem.catalog import (
    BABYAI_LEVELS,
    BABYAI_VISION_LEVELS,
    REASONING_GYM_DATASETS,
    TEXTARENA_GAMES,
)


def _ids() -> dict[str, tuple[str, str, dict]]:
    """{env id: (library module, entry point, kwargs)} of every curated env."""
    ids: dict[str, tuple[str, str, dict]] = {}
    for name, dataset in REASONING_GYM_DATASETS.items():
        ids[f"reasoning_gym/{name}-v0"] = (
            "reasoning_gym",
            "envs.ecosystem.reasoning_gym_env:ReasoningGymEnv",
            {"dataset": dataset},
        )
    for game in TEXTARENA_GAMES:
        ids[f"textarena/{game}"] = ("textarena", "envs.ecosystem.textarena_env:TextArenaEnv", {"game": game})
    for name, level in BABYAI_LEVELS.items():
        ids[f"babyai/{name}-v0"] = ("minigrid", "envs.ecosystem.babyai:BabyAIEnv", {"level": level})
    for name, level in BABYAI_VISION_LEVELS.items():
        ids[f"babyai/{name}Vision-v0"] = (
            "minigrid",
            "envs.ecosystem.babyai:BabyAIVisionEnv",
            {"level": level},
        )
    return ids


ALL_IDS = _ids()
OPENENV_CLIENT_ID = "openenv/Client-v0"
# The ids whose library is installed, registered with gymnasium.
ECOSYSTEM_IDS = tuple(
    env_id for env_id, (library, _, _) in ALL_IDS.items() if importlib.util.find_spec(library) is not None
)


def _register() -> None:
    from envs import create  # the same creator as freshrl's own ids: the env's own render_mode errors

    for env_id in ECOSYSTEM_IDS:
        if env_id not in registry:
            _, entry_point, kwargs = ALL_IDS[env_id]
            register(
                id=env_id, entry_point=partial(create, entry_point), kwargs=kwargs, disable_env_checker=True
            )
    if OPENENV_CLIENT_ID not in registry:
        entry_point = "envs.ecosystem.openenv_client:OpenEnvClientEnv"
        register(id=OPENENV_CLIENT_ID, entry_point=partial(create, entry_point), disable_env_checker=True)


_register()

__all__ = ["ALL_IDS", "ECOSYSTEM_IDS", "OPENENV_CLIENT_ID"]
