"""A committed 32 tasks x 4 samples evaluation (docs/results/benchmark/frozenlake-tiny-32x4/report.json)
keeps its per-task outcomes, and its task-clustered interval is recomputed here from them alone, with the t
quantile from a table rather than the statistics module."""

from __future__ import annotations

import json
import math

import pytest

from experiments.common.results_json import REPOSITORY

RECORD = REPOSITORY / "docs/results/benchmark/frozenlake-tiny-32x4/report.json"
T_975_31 = 2.039513  # Student's t, 0.975 quantile, 31 degrees of freedom (any t table)


def test_a_32_by_4_record_reproduces_its_clustered_interval_from_its_per_task_outcomes():
    metrics = json.loads(RECORD.read_text())["envs"]["FrozenLake"]["metrics"]
    assert (metrics["num_tasks"], metrics["samples_per_task"], metrics["num_episodes"]) == (32, 4, 128)
    successes = metrics["task_successes"]
    assert len(successes) == len(set(metrics["task_seeds"])) == 32
    assert all(0 <= count <= 4 for count in successes)
    means = [count / 4 for count in successes]
    mean = sum(means) / 32
    sd = math.sqrt(sum((m - mean) ** 2 for m in means) / 31)
    half = T_975_31 * sd / math.sqrt(32)
    assert metrics["success"] == pytest.approx(mean, abs=1e-12)
    assert metrics["success_ci95_method"] == "task-clustered t"
    assert metrics["success_ci95_low"] == pytest.approx(max(0.0, mean - half), abs=1e-5)
    assert metrics["success_ci95_high"] == pytest.approx(min(1.0, mean + half), abs=1e-5)
    # The design effect: the variance of the task means against a binomial's over k = 4 samples.
    assert metrics["design_effect"] == pytest.approx(sd**2 * 4 / (mean * (1 - mean)), rel=1e-9)
