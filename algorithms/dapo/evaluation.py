"""What an evaluation of a policy reports: the summary of its episodes, one group of samples per task.

``DAPO.evaluate_policy`` rolls out ``samples_per_task`` episodes on each of the split's first ``num_tasks``
tasks and hands the groups to :func:`summarize_episodes`; every entry point (train, sweep, compare, benchmark,
warm_start) reads these metrics, so a number means the same thing wherever it is printed.

The unit of an evaluation is the task: its k samples share a task and are correlated, so with k > 1 the
success interval is over task means (:func:`task_clustered_interval`), and the per-task outcomes are kept
(``task_seeds``, ``task_successes``) so that two evaluations of the same tasks can be compared task by task
(``experiments/common/significance.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from algorithms.trajectory import Trajectory
from envs.math_eval import pass_at_k

# The keys every summary has, beside one "pass@k" per k of pass_at_ks(samples_per_task).
METRIC_KEYS = (
    "success",
    "success_ci95_low",
    "success_ci95_high",
    "success_ci95_method",
    "design_effect",
    "task_seeds",
    "task_successes",
    "return_mean",
    "format_valid_rate",
    "turns_mean",
    "response_length_mean",
    "mixed_task_rate",
    "num_tasks",
    "num_episodes",
    "samples_per_task",
    "split",
)


def wilson_interval(successes: int, trials: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a success rate (Wilson, 1927); (0, 1) when there are no trials."""
    if trials == 0:
        return (0.0, 1.0)
    p = successes / trials
    centre = (p + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / (1 + z * z / trials)
    return (max(0.0, centre - half), min(1.0, centre + half))


# The names of the success interval's method (``success_ci95_method``).
WILSON = "wilson"
TASK_CLUSTERED_T = "task-clustered t"


def t_half_width(values: Sequence[float]) -> float | None:
    """The half-width of the 95% t interval of the mean of ``values``, one per independent unit (task,
    seed, paired difference): t_{0.975, n-1} x sd / sqrt(n) (Student 1908). None for fewer than 2 units."""
    from scipy import stats

    if len(values) < 2:
        return None
    return float(stats.t.ppf(0.975, len(values) - 1) * np.std(values, ddof=1) / math.sqrt(len(values)))


def task_clustered_interval(task_rates: Sequence[float]) -> tuple[float, float]:
    """The t interval of the mean success over tasks, each task one cluster of samples: mean +-
    t_{0.975, T-1} x sd(task means) / sqrt(T), clipped to [0, 1] (the cluster-level analysis of Donner & Klar
    2000: the T task means are the independent observations, not the T x k episodes). (0, 1) for one task:
    no spread between tasks to estimate."""
    half = t_half_width(task_rates)
    if half is None:
        return (0.0, 1.0)
    mean = float(np.mean(task_rates))
    return (max(0.0, mean - half), min(1.0, mean + half))


def design_effect(task_rates: Sequence[float], samples_per_task: int) -> float:
    """Kish's (1965) design effect of the success rate: the variance of the task means over the binomial
    variance of a mean of ``samples_per_task`` independent episodes, s^2 x k / (p (1 - p)); it estimates
    1 + (k - 1) x ICC (Donner, Birkett & Buck 1981), so 1.0 for k = 1 (one episode a task: no clustering).
    NaN when p is 0 or 1 (no variance to compare) or for one task."""
    rates = np.asarray(task_rates, dtype=float)
    if samples_per_task == 1:
        return 1.0
    p = float(rates.mean())
    if len(rates) < 2 or p * (1 - p) == 0:
        return float("nan")
    return float(rates.var(ddof=1) * samples_per_task / (p * (1 - p)))


def pass_at_ks(samples_per_task: int) -> list[int]:
    """The k of the reported pass@k: the powers of two below ``samples_per_task``, and itself."""
    if samples_per_task < 1:
        raise ValueError(f"samples_per_task must be >= 1, got {samples_per_task}")
    ks = [2**i for i in range(samples_per_task.bit_length()) if 2**i < samples_per_task]
    return [*ks, samples_per_task]


def pass_at_key(k: int) -> str:
    return f"pass@{k}"


def summarize_episodes(groups: Sequence[Sequence[Trajectory]], *, split: str) -> dict[str, Any]:
    """The evaluation metrics of ``groups`` (one group per task, each the same number of samples).

    ``success`` is the mean over all episodes (avg@k) with its 95% interval (``success_ci95_low/high``), whose
    method ``success_ci95_method`` names: with one sample a task, the Wilson interval over episodes
    (:data:`WILSON`); with k > 1, the t interval over task means (:data:`TASK_CLUSTERED_T`,
    :func:`task_clustered_interval`), since a task's samples are correlated; Wilson again where the task means
    do not spread (all equal, e.g. no success at all, or one task), where a t interval would have no width.
    ``design_effect`` (:func:`design_effect`) says how much the clustering inflates the variance against
    independent episodes. The per-task outcomes, in task order: ``task_seeds`` (each task's env seed) and
    ``task_successes`` (its successes out of ``samples_per_task``), two lists of ints; a paired test of two
    evaluations of the same tasks matches them by seed. ``pass@k`` is the unbiased estimator of Chen et al.
    (2021), 1 - C(n - c, k) / C(n, k), averaged over tasks; ``format_valid_rate`` the share of all turns whose
    output the env could use (``invalid_turns``; NaN without turns); ``response_length_mean`` the response
    tokens of an episode, all turns together; ``mixed_task_rate`` the share of tasks whose samples both
    succeed and fail (the groups GRPO learns from). An episode is read only through ``success``,
    ``num_turns``, ``invalid_turns``, ``episode_return``, ``num_response_tokens`` and ``env_seed``.
    """
    if not groups or any(len(group) == 0 for group in groups):
        raise ValueError("summarize_episodes needs at least one group, each with at least one episode")
    samples = len(groups[0])
    if any(len(group) != samples for group in groups):
        raise ValueError(
            f"every task needs the same number of samples; got {sorted({len(g) for g in groups})}"
        )
    task_seeds = [int(group[0].env_seed) for group in groups]
    for seed, group in zip(task_seeds, groups, strict=True):
        if any(t.env_seed != seed for t in group):
            seeds = sorted({t.env_seed for t in group})
            raise ValueError(f"a group is one task, but its episodes have the env seeds {seeds}")
    episodes = [t for group in groups for t in group]
    successes = sum(t.success for t in episodes)
    correct = [int(sum(t.success for t in group)) for group in groups]
    rates = [c / samples for c in correct]
    if samples > 1 and len(groups) > 1 and np.std(rates) > 0:
        (low, high), method = task_clustered_interval(rates), TASK_CLUSTERED_T
    else:
        (low, high), method = wilson_interval(successes, len(episodes)), WILSON
    turns = sum(t.num_turns for t in episodes)
    invalid = sum(t.invalid_turns for t in episodes)
    metrics: dict[str, Any] = {
        "success": successes / len(episodes),
        "success_ci95_low": low,
        "success_ci95_high": high,
        "success_ci95_method": method,
        "design_effect": design_effect(rates, samples),
        "task_seeds": task_seeds,
        "task_successes": correct,
    }
    for k in pass_at_ks(samples):
        metrics[pass_at_key(k)] = float(np.mean([pass_at_k(samples, c, k) for c in correct]))
    metrics.update(
        {
            "return_mean": float(np.mean([t.episode_return for t in episodes])),
            "format_valid_rate": 1.0 - invalid / turns if turns else float("nan"),  # no turn to judge
            "turns_mean": turns / len(episodes),
            "response_length_mean": float(np.mean([t.num_response_tokens for t in episodes])),
            "mixed_task_rate": float(np.mean([0 < c < samples for c in correct])),
            "num_tasks": len(groups),
            "num_episodes": len(episodes),
            "samples_per_task": samples,
            "split": split,
        }
    )
    return metrics
