"""reasoning-gym adapter: the env contract on every exposed dataset, and the corrected scorers."""

import gymnasium as gym
import pytest

pytest.importorskip("reasoning_gym", reason="the ecosystem extra (reasoning-gym) is not installed")

from envs.contract import contract_test  # noqa: E402
from envs.ecosystem import ECOSYSTEM_IDS  # noqa: E402
from envs.seeds import seeds  # noqa: E402

IDS = [env_id for env_id in ECOSYSTEM_IDS if env_id.startswith("reasoning_gym/")]
# Few samples and split tasks (a held-out question takes ~20 items): the full sizes take minutes here.
FAST = {"fuzz_samples": 8, "split_tasks": 6, "oracle_episodes": 4, "fresh_interpreter": False}

test_reasoning_gym_contract = contract_test(*IDS, **FAST)


def make(name: str, **kwargs):
    return gym.make(f"reasoning_gym/{name}-v0", **kwargs).unwrapped


def library_score(env, answer: str) -> float:
    """reasoning-gym's own scorer of the env's dataset on its current item (it reads the item only)."""
    import reasoning_gym

    dataset = reasoning_gym.create_dataset(env.dataset, seed=0, size=1, **env.dataset_config)
    return dataset.score_answer(answer, env.item)


def test_game_of_life_halting_scores_only_the_reference_answer():
    env = make("GameOfLifeHalting")
    env.reset(seed=seeds("train", 1)[0])
    reference = env.item["answer"]
    wrong = "False" if reference == "True" else "True"
    # The library's own scorer gives any non-empty answer 1.0; this is the bug the adapter corrects.
    assert library_score(env, wrong) == 1.0
    _, reward, terminated, _, info = env.step(f"<answer>{wrong}</answer>")
    assert (reward, info["success"], info["score"], terminated) == (0.0, False, 0.0, True)
    env.reset(seed=seeds("train", 1)[0])
    _, reward, _, _, info = env.step(f"<answer> {reference.lower()} </answer>")
    assert (reward, info["success"]) == (1.0, True)


def test_prime_factorization_non_numeric_answer_is_invalid_not_a_crash():
    env = make("PrimeFactorization")
    env.reset(seed=seeds("train", 1)[0])
    with pytest.raises(ValueError):
        library_score(env, "two times three")  # the library raises
    observation, reward, terminated, truncated, info = env.step("<answer>two times three</answer>")
    assert not info["action_valid"] and reward == env.invalid_penalty and not terminated
    assert "could not be scored (ValueError)" in observation


def test_partial_credit_is_in_info_and_only_the_full_score_succeeds():
    for partial in (False, True):
        env = make("PrimeFactorization", partial_credit=partial)
        for seed in seeds("train", 50):
            env.reset(seed=seed)
            factors = [int(f) for f in env.item["answer"].split("×")]
            if len(factors) > 1:
                break
        number = factors[0] * factors[1]
        other = [number, *factors[2:]]  # the same product, not the factorization: 0.5 from reasoning-gym
        _, reward, _, _, info = env.step(f"<answer>{' × '.join(map(str, other))}</answer>")
        assert info["score"] == 0.5 and not info["success"]
        assert reward == (0.5 if partial else 0.0)


def test_oracle_solves_every_exposed_dataset():
    for env_id in IDS:
        env = gym.make(env_id).unwrapped
        for seed in seeds("validation", 3):
            env.reset(seed=seed)
            _, reward, terminated, _, info = env.step(env.oracle_responses()[0])
            assert (reward, terminated, info["success"]) == (1.0, True, True), env_id
