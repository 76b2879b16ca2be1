"""Success by the oracle's solution length: the bins, the per-task rates over seeds, the envs without an
oracle."""

from __future__ import annotations

import pytest

from envs.seeds import seeds
from experiments.common import solution_length

LAKE = "freshrl/FrozenLake-v0"
SETTING = {"size": 4, "hole_prob": 0.2, "is_slippery": False, "max_turns": 5, "max_actions_per_turn": 3}


def test_tasks_fall_into_bins_of_moves_and_each_bin_averages_its_tasks():
    lengths = [1, 2, 3, 7, 12]
    rows = solution_length.success_by_length(
        lengths, {"start": [1.0, 0.0, 0.5, 0.0, 0.0], "end": [1.0, 1.0, 1.0, 0.0, 0.5]}
    )
    assert [(row["moves"], row["tasks"]) for row in rows] == [("0-2", 2), ("3-4", 1), ("7-9", 1), ("10+", 1)]
    assert rows[0]["start"] == 0.5 and rows[0]["end"] == 1.0  # empty bins (5-6) are left out
    assert rows[-1]["end"] == 0.5
    with pytest.raises(ValueError, match="end has 2 tasks' rates for 5 tasks' lengths"):
        solution_length.success_by_length(lengths, {"end": [0.0, 1.0]})


def test_a_task_s_rate_is_its_successes_over_its_samples_averaged_over_seeds():
    def run(seeds: list[int], successes: list[int], samples: int) -> dict:
        metrics = {"task_seeds": seeds, "task_successes": successes, "samples_per_task": samples}
        return {"curve": [{"metrics": metrics}, {"metrics": metrics}]}

    runs = [run([7, 9], [2, 0], 2), run([9, 7], [1, 1], 2)]  # matched by task seed, not by position
    assert solution_length.task_rates(runs, 0, [7, 9]) == [0.75, 0.25]


def test_the_oracle_s_moves_are_counted_per_task_and_envs_without_an_oracle_have_none():
    tasks = seeds("validation", 24)
    lengths = solution_length.oracle_lengths(LAKE, SETTING, tasks)
    assert len(lengths) == 24 and all(isinstance(n, int) and n >= 1 for n in lengths)
    assert len(set(lengths)) > 1  # a 4x4 lake's tasks differ in length
    assert solution_length.oracle_lengths(LAKE, SETTING, tasks) == lengths  # the reset seeds fix them
    assert solution_length.oracle_lengths("freshrl/Math-v0", {}, tasks[:2]) is None
    lines = solution_length.markdown_lines([{"moves": "0-2", "tasks": 3, "start": 0.1, "end": 0.3}])
    assert "| 0-2 | 3 | n/a | 10.0% | 30.0% | +20.0 |" in lines
    assert solution_length.markdown_lines(None) == []
