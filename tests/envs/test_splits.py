"""Task splits by content: train, validation and test tasks never share a map or level.

Tasks are generated through each env's own ``reset``; a task's fingerprint is its full map or level text, and
for Sokoban also its room (walls and targets), which decides the split of every level dug in it.
"""

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401  (registers the envs)
from envs.base import draw_in_split
from envs.frozen_lake import FrozenLakeEnv
from envs.seeds import seeds, split_of_content
from envs.sokoban import SokobanEnv

ENV_IDS = [
    "freshrl/FrozenLake-v0",
    "freshrl/FrozenLakeVision-v0",
    "freshrl/Sokoban-v0",
    "freshrl/SokobanHard-v0",
]
# FrozenLakeVision draws FrozenLake's maps (test_vision_maps_are_frozen_lakes): the 24,000 resets of the
# split test run on FrozenLake only, without drawing an image for each.
SPLIT_TESTED = [env_id for env_id in ENV_IDS if env_id != "freshrl/FrozenLakeVision-v0"]
COUNTS = {"train": 20_000, "validation": 2_000, "test": 2_000}
PAIRS = (("train", "validation"), ("train", "test"), ("validation", "test"))


def fingerprints(env) -> tuple[str, ...]:
    """The task's content: the FrozenLake map rows; the Sokoban level at its start state, and its room."""
    if isinstance(env, FrozenLakeEnv):
        return ("\n".join(env.desc),)
    room = np.where(env.level.walls, "#", "_")
    for cell in env.level.targets:
        room[cell] = "O"
    return env.map_text(), "\n".join(" ".join(row) for row in room)


def tasks(env, split: str, count: int) -> list[set[str]]:
    """One set per fingerprint kind over the first ``count`` seeds of ``split``."""
    out: list[set[str]] = []
    for seed in seeds(split, count):
        env.reset(seed=seed)
        prints = fingerprints(env)
        out = out or [set() for _ in prints]
        for kind, value in zip(out, prints, strict=True):
            kind.add(value)
    return out


@pytest.mark.parametrize("env_id", SPLIT_TESTED)
def test_no_task_is_shared_between_splits(env_id):
    env = gym.make(env_id).unwrapped
    by_split = {split: tasks(env, split, count) for split, count in COUNTS.items()}
    for kind in range(len(by_split["train"])):
        shared = {(a, b): len(by_split[a][kind] & by_split[b][kind]) for a, b in PAIRS}
        assert shared == dict.fromkeys(PAIRS, 0), f"fingerprint {kind}"
    # The held-out splits are not degenerate: most of their tasks are distinct (4x4 FrozenLake maps and
    # 6x6 one-box levels repeat within a split: their most likely maps carry a lot of probability).
    assert len(by_split["validation"][0]) > 1_000 and len(by_split["test"][0]) > 1_000


def test_vision_maps_are_frozen_lakes():
    """Seed for seed, FrozenLakeVision's task is FrozenLake's, in every split: so FrozenLake's split test
    covers it."""
    text, vision = (
        gym.make("freshrl/FrozenLake-v0").unwrapped,
        gym.make("freshrl/FrozenLakeVision-v0").unwrapped,
    )
    for split in COUNTS:
        for seed in seeds(split, 300):
            text.reset(seed=seed)
            vision.reset(seed=seed)
            assert fingerprints(vision) == fingerprints(text), (split, seed)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_every_task_hashes_to_its_seeds_split_and_none_draws_train(env_id):
    env = gym.make(env_id).unwrapped
    for split in COUNTS:
        for seed in seeds(split, 20):
            env.reset(seed=seed)
            assert split_of_content(_split_key(env)) == split
    env.reset(seed=3)
    for _ in range(20):
        env.reset()
        assert split_of_content(_split_key(env)) == "train"


def _split_key(env) -> str:
    """The text that decides a task's split: the map rows (FrozenLake) or the room with its targets."""
    return fingerprints(env)[1 if isinstance(env, SokobanEnv) else 0]


@pytest.mark.parametrize("env_id", ENV_IDS)
@pytest.mark.parametrize("seed", [-1, 10_100_000, 19_999_999, 20_100_000, 2**40])
def test_a_seed_outside_every_split_is_an_error(env_id, seed):
    env = gym.make(env_id).unwrapped
    with pytest.raises(ValueError, match="outside every split range"):
        env.reset(seed=seed)


def test_a_split_without_tasks_at_the_settings_is_a_clear_error():
    # A 2x2 lake without holes has 12 maps, none of which hashes to the validation split.
    env = FrozenLakeEnv(size=2, hole_prob=0.0)
    env.reset(seed=seeds("train", 1)[0])
    with pytest.raises(RuntimeError, match=r"no validation task .* size=2, hole_prob=0.0"):
        env.reset(seed=seeds("validation", 1)[0])


def test_draw_in_split_is_bounded_and_keeps_the_first_match():
    draws = iter(range(1_000_000))
    key = str
    first_test = next(str(i) for i in range(1_000) if split_of_content(str(i)) == "test")
    assert draw_in_split(lambda: next(draws), key, "test", settings="counting") == int(first_test)
    with pytest.raises(RuntimeError, match="no validation task in 50 draws at constant"):
        draw_in_split(
            lambda: 0, lambda _: "always the same", "validation", settings="constant", max_attempts=50
        )


def test_the_vision_env_plays_the_text_envs_map_for_every_seed():
    text, vision = gym.make(ENV_IDS[0]).unwrapped, gym.make(ENV_IDS[1]).unwrapped
    for split in COUNTS:
        for seed in seeds(split, 30):
            text.reset(seed=seed)
            vision.reset(seed=seed)
            assert vision.desc == text.desc
