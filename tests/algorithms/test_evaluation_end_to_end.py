"""Evaluation inside ``train()`` on the tiny model and the real vLLM engine: every
evaluated iteration's result carries ``evaluation/...`` in range, and evaluating changes nothing of training
(same training metrics, same weights as a run that never evaluates)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from algorithms.dapo import DAPO
from algorithms.dapo.evaluation import METRIC_KEYS, pass_at_ks

SAMPLES = 4
# Wall-clock, throughput and machine-load figures differ between any two runs (RLlib's timers and perf/ too).
NONDETERMINISTIC_GROUPS = ("timing", "timers", "perf")
NONDETERMINISTIC_LEAVES = ("date", "hostname", "pid", "node_ip", "trial_id")


def deterministic(key: str) -> bool:
    *groups, leaf = key.split("/")
    return not (
        any(group in NONDETERMINISTIC_GROUPS for group in groups)
        or leaf in NONDETERMINISTIC_LEAVES
        or leaf.startswith("time")
        or leaf.endswith("_s")
    )


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat.update(flatten(value, f"{prefix}{key}/"))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def training_metrics(result: dict[str, Any]) -> dict[str, Any]:
    flat = flatten({k: v for k, v in result.items() if k not in ("evaluation", "config")})
    return {k: v for k, v in flat.items() if deterministic(k)}


def weights(algo: DAPO) -> dict[str, torch.Tensor]:
    state = algo.learner_group.get_state(components="learner/rl_module")
    return state["learner"]["rl_module"]["default_policy"]


def run(make, evaluation_interval: int | None, evaluate_first: bool):
    config = make(
        "freshrl/FrozenLake-v0",
        None,
        # The untrained tiny model fails almost every episode and fills every response: without these,
        # nothing would be trained and the weights would trivially agree.
        dynamic_sampling=False,
        overlong_filtering=False,
    ).evaluation(
        evaluation_interval=evaluation_interval,
        evaluation_num_tasks=3,
        evaluation_samples_per_task=SAMPLES,
    )
    algo = config.build_algo()
    try:
        assert algo.eval_env_runner_group is None  # no second EnvRunnerGroup, no second engine
        first = algo.evaluate() if evaluate_first else None
        results = [algo.train() for _ in range(2)]
        return first, results, {k: v.clone() for k, v in weights(algo).items()}
    finally:
        algo.stop()


def check_metrics(metrics: dict[str, Any]) -> None:
    ks = pass_at_ks(SAMPLES)
    assert set(metrics) == {*METRIC_KEYS, *(f"pass@{k}" for k in ks)}
    assert (metrics["num_tasks"], metrics["num_episodes"], metrics["samples_per_task"]) == (3, 12, SAMPLES)
    assert metrics["split"] == "validation"
    for key in ("success", "success_ci95_low", "success_ci95_high", "format_valid_rate", "mixed_task_rate"):
        assert 0.0 <= metrics[key] <= 1.0, key
    assert metrics["success_ci95_low"] <= metrics["success"] <= metrics["success_ci95_high"]
    assert metrics["success_ci95_high"] - metrics["success_ci95_low"] > 0
    pass_at = [metrics[f"pass@{k}"] for k in ks]
    assert pass_at == sorted(pass_at) and pass_at[0] == pytest.approx(metrics["success"])
    assert metrics["turns_mean"] >= 1 and metrics["response_length_mean"] > 0


def test_train_carries_evaluation_and_evaluating_changes_nothing_of_training(small_dapo_config):
    first, evaluated, evaluated_weights = run(small_dapo_config, 1, evaluate_first=True)
    check_metrics(first)
    for result in evaluated:
        check_metrics(result["evaluation"])

    _, plain, plain_weights = run(small_dapo_config, None, evaluate_first=False)
    assert all("evaluation" not in result for result in plain)
    for with_eval, without in zip(evaluated, plain, strict=True):
        compared = training_metrics(without)
        for key in (
            "rollout/groups_sampled",
            "learners/train/loss",
            "env_runners/num_env_steps_sampled_lifetime",
        ):
            assert key in compared, key
        assert training_metrics(with_eval) == compared
    assert evaluated_weights.keys() == plain_weights.keys()
    for name, tensor in plain_weights.items():
        assert torch.equal(evaluated_weights[name], tensor), name
