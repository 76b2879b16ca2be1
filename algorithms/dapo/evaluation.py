"""What an evaluation of a policy reports: the summary of its episodes, one group of samples per task.

``DAPO.evaluate_policy`` rolls out ``samples_per_task`` episodes on each of the split's first ``num_tasks``
tasks and hands the groups to :func:`summarize_episodes`; every entry point (train, sweep, compare, benchmark,
warm_start) reads these metrics, so a number means the same thing wherever it is printed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from algorithms.trajectory import Trajectory
from envs.math_eval import pass_at_k

# The keys every summary has, beside one "pass@k" per k of pass_at_ks(samples_per_task).
METRIC_KEYS = (
    "success",
    "success_ci95_low",
    "success_ci95_high",
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


def pass_at_ks(samples_per_task: int) -> list[int]:
    """The k of the reported pass@k: the powers of two below ``samples_per_task``, and itself."""
    if samples_per_task < 1:
        raise ValueError(f"samples_per_task must be >= 1, got {samples_per_task}")
    ks = [2**i for i in range(samples_per_task.bit_length()) if 2**i < samples_per_task]
    return [*ks, samples_per_task]


def pass_at_key(k: int) -> str:
    return f"pass@{k}"


def summarize_episodes(groups: Sequence[Sequence[Trajectory]], *, split: str) -> dict[str, float | int | str]:
    """The evaluation metrics of ``groups`` (one group per task, each the same number of samples).

    ``success`` is the mean over all episodes (avg@k) with its 95% Wilson interval; ``pass@k`` the unbiased
    estimator of Chen et al. (2021), 1 - C(n - c, k) / C(n, k), averaged over tasks; ``format_valid_rate``
    the share of all turns whose output the env could use (``Trajectory.invalid_turns``; NaN without turns);
    ``response_length_mean`` the response tokens of an episode, all turns together; ``mixed_task_rate`` the
    share of tasks whose samples both succeed and fail (the groups GRPO learns from).
    """
    if not groups or any(len(group) == 0 for group in groups):
        raise ValueError("summarize_episodes needs at least one group, each with at least one episode")
    samples = len(groups[0])
    if any(len(group) != samples for group in groups):
        raise ValueError(
            f"every task needs the same number of samples; got {sorted({len(g) for g in groups})}"
        )
    episodes = [t for group in groups for t in group]
    successes = sum(t.success for t in episodes)
    low, high = wilson_interval(successes, len(episodes))
    correct = [sum(t.success for t in group) for group in groups]
    turns = sum(t.num_turns for t in episodes)
    invalid = sum(t.invalid_turns for t in episodes)
    metrics: dict[str, float | int | str] = {
        "success": successes / len(episodes),
        "success_ci95_low": low,
        "success_ci95_high": high,
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
