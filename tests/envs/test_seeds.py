"""Seed splits: disjoint ranges, and tasks drawn from them never repeat between splits."""

import gymnasium as gym
import pytest

import envs  # noqa: F401  (registers the envs)
from envs.seeds import SPLITS, seeds, split_of


def test_split_ranges_are_disjoint():
    names = sorted(SPLITS)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            ra, rb = SPLITS[a], SPLITS[b]
            assert ra.stop <= rb.start or rb.stop <= ra.start, (a, b)


def test_seeds_belong_to_their_split():
    for name in SPLITS:
        chosen = seeds(name, 100, offset=7)
        assert len(set(chosen)) == 100
        assert all(split_of(s) == name for s in chosen)
    assert split_of(-1) is None
    with pytest.raises(ValueError):
        seeds("holdout", 1)
    with pytest.raises(ValueError):
        seeds("validation", len(SPLITS["validation"]) + 1)


@pytest.mark.parametrize("env_id", ["freshrl/SokobanHard-v0", "freshrl/FrozenLake-v0"])
def test_train_and_test_tasks_differ(env_id):
    env = gym.make(env_id).unwrapped

    def first_observations(split):
        return {env.reset(seed=s)[0] for s in seeds(split, 100)}

    train, test = first_observations("train"), first_observations("test")
    assert len(train) >= 95 and len(test) >= 95
    assert not train & test  # splits by content (tests/envs/test_splits.py has the full check)


@pytest.mark.parametrize(("count", "offset"), [(-1, 0), (-3, 10), (2.5, 0), (1, -1), (True, 0)])
def test_seeds_rejects_a_count_or_offset_that_is_no_natural_number(count, offset):
    with pytest.raises(ValueError, match="count|offset"):
        seeds("train", count, offset=offset)
