"""Evaluation inside the algorithm: the summary of evaluation episodes, the config keys, and
``DAPO.evaluate_policy`` / RLlib's ``evaluate()`` on stand-in runners; the real path on the tiny model is in
test_evaluation_end_to_end.py."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import pytest
from ray.rllib.utils.metrics.metrics_logger import MetricsLogger

from algorithms.dapo import DAPO, DAPOConfig
from algorithms.dapo.dapo import sampling_rngs
from algorithms.dapo.dynamic_sampling import DynamicSampler
from algorithms.dapo.evaluation import METRIC_KEYS, pass_at_ks, summarize_episodes, wilson_interval
from algorithms.trajectory import Trajectory
from envs.seeds import VALIDATION, seeds


def episode(
    success: bool, *, turns: int = 1, invalid: int = 0, tokens: int = 2, reward: float = 0.0, seed: int = 0
):
    ids = [7] * (tokens * turns)
    spans = [(i * tokens, (i + 1) * tokens) for i in range(turns)]
    return Trajectory(
        ids, [1] * len(ids), [0.0] * len(ids), spans, [reward] + [0.0] * (turns - 1), ["stop"] * turns,
        env_seed=seed, group_id=0, collection_step=0, policy_version=0, success=success,
        invalid_turns=invalid,
    )  # fmt: skip


def task(seed: int, successes: int, samples: int) -> list[Trajectory]:
    """One task's group: ``successes`` of ``samples`` episodes succeed."""
    return [episode(i < successes, seed=seed) for i in range(samples)]


# ---------------------------------------------------------------------------------------------- pure parts
def test_wilson_interval_known_values():
    assert wilson_interval(0, 0) == (0.0, 1.0)
    low, high = wilson_interval(5, 10)
    assert low == pytest.approx(0.2366, abs=1e-4) and high == pytest.approx(0.7634, abs=1e-4)
    low, high = wilson_interval(0, 20)
    assert low == 0.0 and high == pytest.approx(0.1611, abs=1e-4)


def test_pass_at_ks_are_powers_of_two_and_the_sample_count():
    assert pass_at_ks(1) == [1]
    assert pass_at_ks(4) == [1, 2, 4]
    assert pass_at_ks(5) == [1, 2, 4, 5]
    assert pass_at_ks(32) == [1, 2, 4, 8, 16, 32]
    with pytest.raises(ValueError, match="samples_per_task"):
        pass_at_ks(0)


def test_summary_of_two_tasks_by_hand():
    first = episode(True, reward=1.0, turns=2, invalid=1, tokens=3, seed=11)
    groups = [
        [first, episode(False, seed=11), episode(False, seed=11)],
        [episode(True, reward=1.0, seed=5) for _ in range(3)],
    ]
    metrics = summarize_episodes(groups, split="validation")
    assert set(metrics) == {*METRIC_KEYS, "pass@1", "pass@2", "pass@3"}
    assert metrics["success"] == pytest.approx(4 / 6)
    assert (metrics["task_seeds"], metrics["task_successes"]) == ([11, 5], [1, 3])
    # Task means 1/3 and 1: sd = sqrt(2/9), half-width t_0.975(1) x sd / sqrt 2 = 12.706 x 0.333 > 1.
    assert (metrics["success_ci95_low"], metrics["success_ci95_high"]) == (0.0, 1.0)
    assert metrics["success_ci95_method"] == "task-clustered t"
    # s^2 k / (p (1 - p)) = (2/9) x 3 / (2/3 x 1/3) = 3.
    assert metrics["design_effect"] == pytest.approx(3.0)
    # pass@k per task: 1 - C(n - c, k) / C(n, k) with n = 3: c = 1 gives 1/3, 2/3, 1; c = 3 gives 1.
    assert metrics["pass@1"] == pytest.approx((1 / 3 + 1) / 2)
    assert metrics["pass@2"] == pytest.approx((2 / 3 + 1) / 2)
    assert metrics["pass@3"] == 1.0
    assert metrics["return_mean"] == pytest.approx(4 / 6)
    assert metrics["format_valid_rate"] == pytest.approx(1 - 1 / 7)  # 7 turns, one invalid
    assert metrics["turns_mean"] == pytest.approx(7 / 6)
    assert metrics["response_length_mean"] == pytest.approx((6 + 5 * 2) / 6)
    assert metrics["mixed_task_rate"] == 0.5
    assert (metrics["num_tasks"], metrics["num_episodes"], metrics["samples_per_task"]) == (2, 6, 3)
    assert metrics["split"] == "validation"


def test_task_clustered_interval_of_four_tasks_by_hand():
    # 3, 2, 2 and 1 successes of 4: task means 0.75, 0.5, 0.5, 0.25, mean 0.5, variance (2 x 0.0625) / 3
    # = 1/24; t_0.975(3) = 3.182446 (the t table), half-width 3.182446 x sqrt(1/24) / sqrt(4) = 0.324808.
    metrics = summarize_episodes([task(1, 3, 4), task(2, 2, 4), task(3, 2, 4), task(4, 1, 4)], split="test")
    assert metrics["success_ci95_method"] == "task-clustered t"
    assert metrics["success_ci95_low"] == pytest.approx(0.5 - 0.324808, abs=1e-6)
    assert metrics["success_ci95_high"] == pytest.approx(0.5 + 0.324808, abs=1e-6)
    # Against 16 independent episodes the clustering here shrinks the variance: (1/24) x 4 / 0.25 = 2/3.
    assert metrics["design_effect"] == pytest.approx(2 / 3)
    assert (metrics["task_seeds"], metrics["task_successes"]) == ([1, 2, 3, 4], [3, 2, 2, 1])


def test_one_sample_a_task_or_no_spread_between_tasks_keeps_wilson():
    single = summarize_episodes([task(7, 1, 1), task(8, 0, 1), task(9, 1, 1)], split="validation")
    assert single["success_ci95_method"] == "wilson" and single["design_effect"] == 1.0
    assert (single["success_ci95_low"], single["success_ci95_high"]) == wilson_interval(2, 3)
    assert (single["task_seeds"], single["task_successes"]) == ([7, 8, 9], [1, 0, 1])
    # No success at all on 2 x 4 episodes: a t interval would have no width; the design effect is undefined.
    none = summarize_episodes([task(1, 0, 4), task(2, 0, 4)], split="validation")
    assert none["success_ci95_method"] == "wilson" and math.isnan(none["design_effect"])
    assert (none["success_ci95_low"], none["success_ci95_high"]) == wilson_interval(0, 8)


def test_summary_reads_only_the_endpoint_fields_of_an_episode():
    # An evaluation of an endpoint hands objects with these fields only.
    fields = dict(num_turns=1, invalid_turns=0, episode_return=0.0, num_response_tokens=3)
    groups = [[SimpleNamespace(success=s, env_seed=seed, **fields) for s in (True, False)] for seed in (4, 6)]
    metrics = summarize_episodes(groups, split="validation")
    assert metrics["success"] == 0.5 and metrics["task_successes"] == [1, 1]


def test_summary_rejects_uneven_or_empty_groups():
    with pytest.raises(ValueError, match="same number of samples"):
        summarize_episodes([[episode(True)], [episode(True), episode(False)]], split="validation")
    with pytest.raises(ValueError, match="at least one"):
        summarize_episodes([], split="validation")
    with pytest.raises(ValueError, match=r"a group is one task, but its episodes have the env seeds \[1, 2"):
        summarize_episodes([[episode(True, seed=1), episode(True, seed=2)]], split="validation")


# ---------------------------------------------------------------------------------------------- config
def test_evaluation_keys_and_rllibs_own_pass_through():
    config = DAPOConfig().evaluation(
        evaluation_interval=2, evaluation_num_tasks=8, evaluation_samples_per_task=4, evaluation_top_p=0.7
    )
    assert (config.evaluation_interval, config.evaluation_num_tasks) == (2, 8)
    assert (config.evaluation_samples_per_task, config.evaluation_top_p) == (4, 0.7)
    assert config.evaluation_split == "validation" and config.evaluation_temperature is None
    config.validate()
    # Tune's param_space and checkpoints carry the config as a dict.
    again = DAPOConfig().update_from_dict(config.to_dict())
    assert (again.evaluation_num_tasks, again.evaluation_samples_per_task) == (8, 4)
    assert DAPOConfig().evaluation_interval is None  # never inside train() unless asked


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"evaluation_num_tasks": 0}, r"evaluation_num_tasks must be an integer in \[1, 100000\]"),
        ({"evaluation_num_tasks": len(VALIDATION) + 1}, "evaluation_num_tasks"),
        ({"evaluation_samples_per_task": 0}, "evaluation_samples_per_task must be an integer >= 1"),
        ({"evaluation_split": "dev"}, "evaluation_split must be one of"),
        ({"evaluation_top_p": 0.0}, r"evaluation_top_p must be in \(0, 1\]"),
        ({"evaluation_temperature": -1.0}, "evaluation_temperature must be >= 0"),
        ({"evaluation_interval": -1}, "evaluation_interval must be an integer >= 1"),
        ({"evaluation_num_env_runners": 2}, "evaluation runs on the training EnvRunners"),
    ],
)
def test_bad_evaluation_settings_are_named(settings, message):
    with pytest.raises(ValueError, match=message):
        DAPOConfig().evaluation(**settings).validate()


# ---------------------------------------------------------------------------------------------- algorithm
class Runner:
    """Answers each task with ``group_size`` episodes, success when the seed is even; may lose tasks once."""

    def __init__(self, lose_first_call: int = 0):
        self.calls: list[dict[str, Any]] = []
        self.lose = lose_first_call
        self.metrics_read = 0

    def sample_groups(self, seeds, *, group_ids, group_size=None, **kwargs):
        self.calls.append({"seeds": list(seeds), "group_size": group_size, **kwargs})
        groups = []
        for seed, gid in zip(seeds, group_ids, strict=True):
            group = [episode(seed % 2 == 0) for _ in range(group_size)]
            for t in group:
                t.group_id, t.env_seed = gid, seed
            groups.append(group)
        lost, self.lose = self.lose, 0
        return groups[lost:]

    def get_metrics(self) -> dict[str, Any]:
        self.metrics_read += 1
        return {}


def bare_dapo(runner: Runner, **evaluation) -> DAPO:
    algo = DAPO.__new__(DAPO)
    algo.config = DAPOConfig().evaluation(**evaluation)
    algo.metrics = MetricsLogger()
    algo._iteration = 0
    algo._optimizer_steps = algo._policy_version = algo._task_cursor = algo._next_group_id = 0
    algo._rng, _ = sampling_rngs(0)
    algo._replay, algo._sampler = None, DynamicSampler(1, 1, filter_groups=False)  # read by DAPO.counters
    algo.env_runner_group = SimpleNamespace(
        num_remote_env_runners=lambda: 0,
        local_env_runner=runner,
        probe_unhealthy_env_runners=lambda: [],
        num_healthy_remote_env_runners=lambda: 0,
    )
    return algo


def test_evaluate_policy_rolls_out_the_splits_first_tasks_without_touching_training():
    runner = Runner()
    algo = bare_dapo(runner, evaluation_num_tasks=4, evaluation_samples_per_task=2, evaluation_top_p=0.7)
    training_state = algo.counters
    metrics = algo.evaluate_policy()
    (call,) = runner.calls
    assert call["seeds"] == seeds("validation", 4) and call["group_size"] == 2
    assert call["top_p"] == 0.7 and call["temperature"] is None and call["log_metrics"] is False
    assert metrics["success"] == 0.5 and metrics["pass@2"] == 0.5 and metrics["num_episodes"] == 8
    # Per-task outcomes by the split's task seeds (the stand-in solves the even ones).
    assert metrics["task_seeds"] == seeds("validation", 4)
    assert metrics["task_successes"] == [2 if seed % 2 == 0 else 0 for seed in seeds("validation", 4)]
    # Nothing of training moved: its cursor, group ids, sampling stream and metrics.
    assert algo.counters == training_state
    assert runner.metrics_read == 0 and algo.metrics.reduce() == {}
    # RLlib's hook is the same evaluation with the config's settings; arguments override them.
    assert algo.evaluate()["num_tasks"] == 4
    small = algo.evaluate_policy(num_tasks=1, samples_per_task=1, split="test")
    assert runner.calls[-1]["seeds"] == seeds("test", 1) and small["split"] == "test"
    with pytest.raises(ValueError, match=r"DAPO.evaluate_policy: num_tasks must be an integer"):
        algo.evaluate_policy(num_tasks=0)


def test_tasks_lost_to_a_crashed_runner_are_evaluated_again():
    runner = Runner(lose_first_call=1)
    algo = bare_dapo(runner, evaluation_num_tasks=3)
    metrics = algo.evaluate_policy()
    assert [call["seeds"] for call in runner.calls] == [seeds("validation", 3), seeds("validation", 1)]
    assert metrics["num_tasks"] == 3 and math.isclose(metrics["success"], 2 / 3)


def test_no_second_env_runner_group_even_when_evaluating_inside_train():
    config = DAPOConfig().evaluation(evaluation_interval=1)
    assert DAPO._should_create_evaluation_env_runners(config.get_evaluation_config_object()) is False
