"""DAPO's bookkeeping without Ray or vLLM: a DAPO object with stand-in learner and runner groups. What it
counts as optimizer steps, which iteration the learners are told, and which stream seeds evaluation."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from ray.rllib.utils.metrics.metrics_logger import MetricsLogger

from algorithms.dapo import DAPO, DAPOConfig
from algorithms.dapo.dapo import sampling_rngs
from algorithms.dapo.dynamic_sampling import DynamicSampler
from algorithms.trajectory import Trajectory
from envs.seeds import SPLITS


class Call:
    def __init__(self, value: Any):
        self.ok, self.value = True, value

    def get(self) -> Any:
        return self.value


class Learner:
    """Runs ``steps_per_update`` steps, minus the ones it skips (nothing to learn)."""

    def __init__(self, steps_per_update: int, skipped: int):
        self.steps_per_update, self.skipped = steps_per_update, skipped
        self.optimizer_steps = 0
        self.iterations: list[int] = []

    def update_from_trajectories(self, trajectories, weights=None, *, tag="fresh", iteration=0):
        self.iterations.append(iteration)
        self.optimizer_steps += self.steps_per_update - self.skipped
        return {}


class Runner:
    def __init__(self):
        self.sampling_seeds: list[int] = []

    def sample_groups(self, seeds, *, group_ids, sampling_seed, group_size=None, **kwargs):
        self.sampling_seeds.append(sampling_seed)
        return [[trajectory(gid)] * (group_size or 1) for gid in group_ids]

    def get_metrics(self) -> dict[str, Any]:
        return {}


def trajectory(group_id: int) -> Trajectory:
    return Trajectory([1], [1], [0.0], [(0, 1)], [0.0], ["stop"], 0, group_id, 0, 0)


def bare_dapo(iteration: int = 0, learners=(), seed: int = 0) -> DAPO:
    algo = DAPO.__new__(DAPO)
    algo.config = DAPOConfig()
    algo.metrics = MetricsLogger()
    algo._iteration = iteration  # Trainable's counter behind DAPO.training_iteration
    algo._optimizer_steps = algo._policy_version = algo._task_cursor = algo._next_group_id = 0
    algo._rng, _ = sampling_rngs(seed)  # evaluation's stream is derived per policy version
    algo._replay, algo._sampler = None, DynamicSampler(1, 1, filter_groups=False)  # read by DAPO.counters
    algo.learner_group = SimpleNamespace(
        foreach_learner=lambda fn: [Call(fn(learner)) for learner in learners]
    )
    runner = Runner()
    algo.env_runner_group = SimpleNamespace(num_remote_env_runners=lambda: 0, local_env_runner=runner)
    return algo


def test_optimizer_steps_are_the_steps_the_learners_ran():
    """Skipped (empty) steps do not count, so they do not age the replay buffer; every
    update of an iteration, fresh or replay, tells the learners the same iteration (the warm-up's unit)."""
    learners = [Learner(steps_per_update=4, skipped=1), Learner(steps_per_update=4, skipped=1)]
    algo = bare_dapo(iteration=7, learners=learners)
    algo.update_learners([object()] * 8, None, tag="fresh")
    algo.update_learners([object()] * 8, None, tag="replay")
    assert algo.counters.optimizer_steps == 6
    assert learners[0].iterations == learners[1].iterations == [7, 7]


def test_evaluation_does_not_change_what_training_samples_next():
    """Evaluation draws its sampling seeds from its own (deterministic) stream; training's stays put."""
    evaluated = bare_dapo()
    training_stream = evaluated.counters.sampling_rng_state
    evaluated.evaluate_policy(num_tasks=2)
    evaluated.evaluate_policy(num_tasks=2)
    assert evaluated.counters.sampling_rng_state == training_stream
    # Evaluation's own seeds are reproducible (the same weights, the same seed) and not training's.
    again = bare_dapo()
    again.evaluate_policy(num_tasks=2)
    assert again.env_runner.sampling_seeds == evaluated.env_runner.sampling_seeds[:1]
    assert evaluated.env_runner.sampling_seeds[1] == evaluated.env_runner.sampling_seeds[0]
    training, _ = sampling_rngs(0)
    assert evaluated.env_runner.sampling_seeds[0] not in [int(training.integers(2**31 - 1)) for _ in range(2)]


def test_task_offset_moves_the_first_task_and_the_cursor_counts_from_it():
    """RL's tasks start task_offset seeds into the split (past a warm start's demonstrations) and go on in
    order; the cursor counts the tasks drawn, so a checkpoint's cursor means the same under any offset."""
    algo = bare_dapo()
    algo.config = DAPOConfig().training(task_offset=1000)
    train = SPLITS["train"]
    assert algo._next_seeds(3) == [train[1000], train[1001], train[1002]]
    assert algo._next_seeds(2) == [train[1003], train[1004]]
    assert algo.counters.task_cursor == 5


@pytest.mark.parametrize("offset", [-1, 1.5, True, len(SPLITS["train"])])
def test_task_offset_outside_the_split_is_refused_with_its_range(offset):
    with pytest.raises(ValueError, match=r"task_offset must be an integer in \[0, "):
        DAPOConfig().training(task_offset=offset).validate()
