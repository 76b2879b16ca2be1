"""The replay study's primary metric (docs/replay.md, "The replay study: pre-registration"): the area under a
run's held-out success curve against the environment episodes it trained on, over one episode budget B.

A run is what ``experiments.compare`` saves (``experiments/common/comparison_runs.py``): ``curve``, its
evaluations ({iteration, success, metrics}; iteration 0 before training), and ``training``, one flat row of
metrics per iteration. An evaluation sits at the run's cumulative count of training episodes after its
iteration: every group dynamic sampling generated (``rollout/groups_sampled``, those it discarded included)
x the group size; evaluation episodes are not training and are not counted. The curve is linear between
evaluations, and AUC = (1 / B) x integral from 0 to B of success(e) de, a mean success over the budget. B is
the smallest final episode count among the runs compared (:func:`budget`), so no run is extrapolated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from experiments.common.significance import task_outcomes
from experiments.common.training_metrics import measured

SAMPLED = "rollout/groups_sampled"  # groups generated in an iteration, kept or discarded


def episode_curve(run: Mapping[str, Any], group_size: int) -> tuple[list[float], list[float]]:
    """The run's evaluations as (cumulative training episodes, success) at each, the first (iteration 0) at
    0 episodes. ValueError when an iteration up to the last evaluation did not log :data:`SAMPLED`."""
    return episodes_at_evaluations(run, group_size), [point["success"] for point in run["curve"]]


def episodes_at_evaluations(run: Mapping[str, Any], group_size: int) -> list[float]:
    """The cumulative count of training episodes after the iteration of each of the run's evaluations."""
    rows = run["training"]
    last = max(point["iteration"] for point in run["curve"])
    if last > len(rows):
        raise ValueError(f"the run was evaluated after iteration {last} but holds {len(rows)} training rows")
    cumulative = [0.0]
    for iteration, row in enumerate(rows[:last], start=1):
        groups = measured(row, SAMPLED)
        if groups is None:
            raise ValueError(
                f"iteration {iteration} of the run did not log {SAMPLED}: its episodes are unknown"
            )
        cumulative.append(cumulative[-1] + groups * group_size)
    return [cumulative[point["iteration"]] for point in run["curve"]]


def budget(runs: Sequence[Mapping[str, Any]], group_size: int) -> float:
    """B: the smallest final count of training episodes among ``runs``."""
    return min(episodes_at_evaluations(run, group_size)[-1] for run in runs)


def auc_weights(episodes: Sequence[float], budget: float) -> np.ndarray:
    """The weights w of each evaluation such that AUC = w . values for any values at ``episodes``: the
    trapezoids of the segments inside [0, budget], the last one cut at the budget where the value there is
    interpolated. One weighting serves the success curve and every task's outcome curve alike. ValueError
    for a budget beyond the last evaluation (no extrapolation), episodes that do not start at 0 or go
    down."""
    e = np.asarray(episodes, dtype=float)
    if len(e) < 2 or e[0] != 0 or np.any(np.diff(e) < 0):
        raise ValueError(f"an episode curve starts at 0 and never goes down, with 2+ points: got {list(e)}")
    if not 0 < budget <= e[-1]:
        raise ValueError(
            f"budget {budget:g} episodes is outside the curve's (0, {e[-1]:g}]: a run is not extrapolated"
        )
    weights = np.zeros(len(e))
    for i in range(len(e) - 1):
        start, end = e[i], e[i + 1]
        if start >= budget:
            break
        if end <= budget:
            weights[i] += (end - start) / 2
            weights[i + 1] += (end - start) / 2
        else:  # value at the budget: (1 - t) v_i + t v_{i+1}
            t, width = (budget - start) / (end - start), budget - start
            weights[i] += width * (2 - t) / 2
            weights[i + 1] += width * t / 2
    return weights / budget


def auc(episodes: Sequence[float], values: Sequence[float], budget: float) -> float:
    """(1 / budget) x the integral from 0 to ``budget`` of the curve through (episodes, values), linear
    between points: the mean value over the budget. ValueError for a budget beyond the last point."""
    if len(episodes) != len(values):
        raise ValueError(f"{len(episodes)} episode counts for {len(values)} values")
    return float(auc_weights(episodes, budget) @ np.asarray(values, dtype=float))


def run_auc(run: Mapping[str, Any], group_size: int, budget: float) -> float:
    """The run's success AUC over ``budget`` episodes."""
    episodes, success = episode_curve(run, group_size)
    return auc(episodes, success, budget)


def task_auc(run: Mapping[str, Any], group_size: int, budget: float) -> dict[int, float]:
    """Each validation task's AUC over ``budget`` episodes (its success rate at each evaluation, integrated
    as the run's success is), by task seed: what the study's test by task pairs. ValueError when an
    evaluation lacks per-task outcomes or played other tasks than the first."""
    outcomes = [task_outcomes(point["metrics"]) for point in run["curve"]]
    if any(rates is None for rates in outcomes):
        raise ValueError("an evaluation of the run has no per-task outcomes (task_seeds, task_successes)")
    tasks = sorted(outcomes[0])
    if any(sorted(rates) != tasks for rates in outcomes):
        raise ValueError("the run's evaluations played different validation tasks")
    rates = np.array([[point[task] for task in tasks] for point in outcomes])
    weights = auc_weights(episodes_at_evaluations(run, group_size), budget)
    return dict(zip(tasks, (weights @ rates).tolist(), strict=True))
