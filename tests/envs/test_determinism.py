"""Determinism: a seed fixes the layout, a seed and an action list fix the trajectory, in any process.

The golden hashes below were computed once and checked in; they are recomputed here in this process and in
fresh interpreters with different ``PYTHONHASHSEED`` values, so neither the global RNGs nor ``hash()``
randomisation can change a task. They were regenerated when splits became content-based (a seed now
yields only tasks of its own split, which changed the tasks of some seeds) and when the envs began to report
``info["state_key"]`` (the observations, rewards and oracles hashed the same without it).
"""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401  (registers the envs)

CASES = {
    "sokoban": ("freshrl/Sokoban-v0", {}),
    "sokoban_hard": ("freshrl/SokobanHard-v0", {}),
    "frozen_lake": ("freshrl/FrozenLake-v0", {}),
    "frozen_lake_slippery": ("freshrl/FrozenLake-v0", {"is_slippery": True, "max_turns": 8}),
    "frozen_lake_vision": ("freshrl/FrozenLakeVision-v0", {"is_slippery": True}),
}
SEEDS = [0, 1, 2, 10_000_000, 20_000_000]
ACTIONS = [
    "<answer>Up, Left</answer>",
    "<answer>Down</answer>",
    "not an answer",
    "then Right right",
    "<answer>Right, Down, Left</answer>",
    "<answer>Left, Left, Up</answer>",
    "<answer>Down, Right</answer>",
    "<answer>Up</answer>",
]

GOLDEN = {
    "sokoban/layout": "dbe509a62958d6d4",
    "sokoban/trajectory": "8704f339b8f5c645",
    "sokoban/oracle": "29a623d7fc7b8e07",
    "sokoban_hard/layout": "6dd1ab2fc29ab7bb",
    "sokoban_hard/trajectory": "385cebea2d0af0da",
    "sokoban_hard/oracle": "b87cc0f7ec57daf3",
    "frozen_lake/layout": "96e6f5ff5c2780d4",
    "frozen_lake/trajectory": "44b04710672420f9",
    "frozen_lake/oracle": "8f5ab235701face6",
    "frozen_lake_slippery/layout": "1f772bc6f4677352",
    "frozen_lake_slippery/trajectory": "f3437e833913a8da",
    "frozen_lake_slippery/oracle": "8f5ab235701face6",
    "frozen_lake_vision/layout": "75363ae138a94268",
    "frozen_lake_vision/trajectory": "c23bf152a74b8901",
    "frozen_lake_vision/oracle": "8f5ab235701face6",
}


def _digest(*parts) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.tobytes() if isinstance(part, np.ndarray) else repr(part).encode())
    return h.hexdigest()[:16]


def _obs_parts(obs):
    return (obs["text"], obs["image"]) if isinstance(obs, dict) else (obs,)


def _episode(env, seed: int) -> dict[str, str]:
    """Hashes of one seed's first observation (the layout), its trajectory under ACTIONS, and its oracle."""
    obs, info = env.reset(seed=seed)
    layout = _digest(*_obs_parts(obs), sorted(info.items()))
    steps = []
    for action in ACTIONS:
        obs, reward, terminated, truncated, info = env.step(action)
        steps.append((*_obs_parts(obs), round(reward, 9), terminated, truncated, sorted(info.items())))
        if terminated or truncated:
            break
    env.reset(seed=seed)
    trajectory = _digest(*[part for step in steps for part in step])
    return {"layout": layout, "trajectory": trajectory, "oracle": _digest(env.oracle_actions())}


def fingerprints() -> dict[str, str]:
    """For every case: one hash over all SEEDS for each of layout, trajectory and oracle."""
    out = {}
    for name, (env_id, kwargs) in CASES.items():
        env = gym.make(env_id, **kwargs).unwrapped
        episodes = [_episode(env, seed) for seed in SEEDS]
        for kind in ("layout", "trajectory", "oracle"):
            out[f"{name}/{kind}"] = _digest([e[kind] for e in episodes])
    return out


def test_same_seed_same_everything_in_process():
    assert fingerprints() == fingerprints()


def test_fingerprints_match_the_checked_in_golden_values():
    assert fingerprints() == GOLDEN


@pytest.mark.parametrize("hash_seed", ["0", "12345"])
def test_fingerprints_match_in_a_fresh_interpreter(hash_seed):
    code = f"import json, runpy; print(json.dumps(runpy.run_path({str(Path(__file__))!r})['fingerprints']()))"
    result = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONHASHSEED": hash_seed},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert json.loads(result.stdout.strip().splitlines()[-1]) == GOLDEN


@pytest.mark.parametrize("name", sorted(CASES))
def test_different_seeds_give_different_layouts(name):
    # Small maps repeat now and then (a 6x6 room with one box has few short puzzles); most must differ.
    env_id, kwargs = CASES[name]
    env = gym.make(env_id, **kwargs).unwrapped
    layouts = {_digest(*_obs_parts(env.reset(seed=seed)[0])) for seed in range(200)}
    assert len(layouts) >= 180
