"""Math splits: generated train, validation and test problems never share a text, and a
seed outside every split range is an error, for generated problems and for datasets alike."""

import gymnasium as gym
import pytest

import envs  # noqa: F401  (registers the envs)
from envs.math_data import PROMPT_SUFFIX, MathProblem
from envs.math_task import MathEnv
from envs.seeds import seeds

COUNTS = {"train": 20_000, "validation": 2_000, "test": 2_000}
OUTSIDE = [-1, 10_100_000, 19_999_999, 20_100_000, 2**40]
DATASET = [MathProblem(prompt=f"What is {i} + 1?\n\n{PROMPT_SUFFIX}", answer=str(i + 1)) for i in range(5)]


@pytest.mark.parametrize("difficulty", [1, None])
def test_no_generated_problem_is_shared_between_splits(difficulty):
    env = gym.make("freshrl/Math-v0", difficulty=difficulty).unwrapped
    by_split = {}
    for split, count in COUNTS.items():
        prompts = set()
        for seed in seeds(split, count):
            env.reset(seed=seed)
            prompts.add(env.problem.prompt)
        by_split[split] = prompts
    shared = {
        (a, b): len(by_split[a] & by_split[b])
        for a, b in (("train", "validation"), ("train", "test"), ("validation", "test"))
    }
    assert shared == dict.fromkeys(shared, 0)
    # The held-out splits are not degenerate (difficulty 1 holds about 19,000 problems, 5% per held-out one).
    assert len(by_split["validation"]) > 500 and len(by_split["test"]) > 500


@pytest.mark.parametrize("dataset", [None, DATASET], ids=["generated", "dataset"])
@pytest.mark.parametrize("seed", OUTSIDE)
def test_a_seed_outside_every_split_is_an_error(dataset, seed):
    env = MathEnv(dataset=dataset)
    env.reset(seed=seeds("test", 1)[0])
    before = env.problem
    with pytest.raises(ValueError, match="outside every split range"):
        env.reset(seed=seed)
    assert env.problem == before  # the bad seed changed nothing


@pytest.mark.parametrize("dataset", [None, DATASET], ids=["generated", "dataset"])
def test_seed_none_still_draws_a_training_task(dataset):
    env = MathEnv(dataset=dataset)
    observation, _ = env.reset(seed=None)
    assert observation == env.problem.prompt
    if dataset is not None:
        assert env.problem in DATASET
