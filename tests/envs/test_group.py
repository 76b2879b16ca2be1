"""GRPO groups and Gymnasium's SyncVectorEnv on every grid env."""

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401  (registers the envs)
from envs.frozen_lake import FrozenLakeEnv
from envs.group import make_group, reset_group

ENV_IDS = [
    "freshrl/Sokoban-v0",
    "freshrl/SokobanHard-v0",
    "freshrl/FrozenLake-v0",
    "freshrl/FrozenLakeVision-v0",
]


def same(a, b) -> bool:
    if isinstance(a, dict):
        return a["text"] == b["text"] and np.array_equal(a["image"], b["image"])
    return a == b


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_group_members_start_from_the_same_task(env_id):
    group = make_group(env_id, group_size=4, seed=321)
    envs_, observations, infos = group
    assert len(envs_) == len(observations) == len(infos) == 4
    assert len({id(e) for e in envs_}) == 4, "copies, not one env four times"
    assert all(same(observations[0], o) for o in observations[1:])
    assert all(info == infos[0] for info in infos)
    # A new group on the same envs: a different task, again shared by all.
    _, observations2, _ = reset_group(envs_, seed=322)
    assert not same(observations[0], observations2[0])
    assert all(same(observations2[0], o) for o in observations2[1:])


def test_group_from_a_factory_and_member_independence():
    def factory():
        return FrozenLakeEnv(is_slippery=True, max_turns=20, max_actions_per_turn=1)

    group = make_group(factory, 16, seed=5)
    # Same map, independent slips: the same actions lead different copies to different places.
    positions = set()
    for env in group.envs:
        for _ in range(3):
            _, _, terminated, truncated, _ = env.step("<answer>Down</answer>")
            if terminated or truncated:
                break
        positions.add(env.map_text())
    assert len(positions) > 1
    # ... reproducibly: the same group again gives the same places.
    again = make_group(factory, 16, seed=5)
    for env, position in zip(again.envs, [e.map_text() for e in group.envs], strict=True):
        for _ in range(3):
            _, _, terminated, truncated, _ = env.step("<answer>Down</answer>")
            if terminated or truncated:
                break
        assert env.map_text() == position
    with pytest.raises(ValueError):
        make_group(lambda: FrozenLakeEnv(), 2, seed=0, size=5)
    sized = make_group("freshrl/FrozenLake-v0", 2, seed=0, size=6)  # env kwargs pass through
    assert len(sized.envs[0].unwrapped.desc) == 6
    with pytest.raises(ValueError):
        make_group("freshrl/FrozenLake-v0", 0, seed=0)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_sync_vector_env_steps_and_autoresets(env_id):
    n = 3
    vec = gym.vector.SyncVectorEnv([lambda: gym.make(env_id) for _ in range(n)])
    observations, infos = vec.reset(seed=[9, 9, 10])
    if isinstance(observations, dict):  # the vision text has no map; the image has
        layouts = [image.tobytes() for image in observations["image"]]
    else:
        layouts = list(observations)
    assert len(layouts) == n and layouts[0] == layouts[1] != layouts[2]
    if isinstance(observations, dict):
        assert observations["image"].shape == (n, *vec.single_observation_space["image"].shape)
        assert observations["image"].dtype == np.uint8
    assert vec.observation_space.contains(observations)
    max_turns = vec.envs[0].unwrapped.max_turns
    ended = np.zeros(n, dtype=bool)
    for _ in range(max_turns + 2):
        actions = ("<answer>Left</answer>", "nonsense", "<answer>Up, Up</answer>")
        observations, rewards, terminated, truncated, infos = vec.step(actions)
        assert rewards.shape == (n,) and np.isfinite(rewards).all()
        assert vec.observation_space.contains(observations)
        ended |= terminated | truncated
    assert ended.all(), "every sub-env ended (turn limit at the latest) and was reset automatically"
    vec.close()
