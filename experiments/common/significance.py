"""Whether a change in success rate between two evaluations is more than the noise of their episodes.

Used by ``experiments.train`` to say, in one line, whether validation success after training differs from
before, and by it and ``experiments.evaluate`` to print an evaluation (``success_line``); by
``experiments.compare`` and ``experiments.sweep`` for a figure's mean over seeds (``mean_over_seeds``).
The two evaluations of a run play the same validation tasks, so their outcomes are positively correlated; the
unpaired two-proportion test below ignores that correlation, which overstates the variance of the difference
and makes the test conservative (a paired test would give a smaller p-value).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def two_proportion_test(
    successes_a: int, trials_a: int, successes_b: int, trials_b: int
) -> tuple[float, float]:
    """z and the two-sided p-value of the pooled two-proportion z-test of H0: rate a == rate b. (0, 1) when
    either side has no trials or the pooled rate is 0 or 1 (no variance: nothing separates them)."""
    if trials_a <= 0 or trials_b <= 0:
        return 0.0, 1.0
    pooled = (successes_a + successes_b) / (trials_a + trials_b)
    variance = pooled * (1 - pooled) * (1 / trials_a + 1 / trials_b)
    if variance <= 0:
        return 0.0, 1.0
    z = (successes_b / trials_b - successes_a / trials_a) / math.sqrt(variance)
    return z, math.erfc(abs(z) / math.sqrt(2))


def success_change(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The change from ``before`` to ``after`` (``algo.evaluate_policy()`` results: success, its 95% interval,
    num_episodes): difference, z, p-value and whether the two 95% intervals overlap."""
    n_before, n_after = int(before["num_episodes"]), int(after["num_episodes"])
    z, p_value = two_proportion_test(
        round(before["success"] * n_before), n_before, round(after["success"] * n_after), n_after
    )
    return {
        "difference": after["success"] - before["success"],
        "z": z,
        "p_value": p_value,
        "intervals_overlap": intervals_overlap(before, after),
    }


def intervals_overlap(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether the 95% success intervals (``success_ci95_low`` / ``success_ci95_high``) of two evaluations
    overlap, in either direction."""
    return a["success_ci95_low"] <= b["success_ci95_high"] and b["success_ci95_low"] <= a["success_ci95_high"]


def mean_over_seeds(values: list[float]) -> dict[str, float | int | None]:
    """Mean, standard deviation and the half-width of the 95% t interval of the mean of one figure over
    seeds (``ci95`` None from one seed: no interval)."""
    from scipy import stats

    n = len(values)
    std = float(np.std(values, ddof=1)) if n > 1 else 0.0
    half = float(stats.t.ppf(0.975, n - 1) * std / np.sqrt(n)) if n > 1 else None
    return {"mean": float(np.mean(values)), "std": std, "n": n, "ci95": half}


def success_line(metrics: dict[str, Any]) -> str:
    """An evaluation for a person: "0.332 (95% CI 0.293-0.374, 512 episodes)"."""
    return (
        f"{metrics['success']:.3f} (95% CI {metrics['success_ci95_low']:.3f}-"
        f"{metrics['success_ci95_high']:.3f}, {metrics['num_episodes']} episodes)"
    )


def change_sentence(before: dict[str, Any], after: dict[str, Any]) -> str:
    """One line for a person, e.g. "validation success rose from 22.9% to 33.2% (+10.3 points); the 95%
    intervals do not overlap and a two-proportion test gives p = 0.0002 (512 episodes each): more than
    noise"."""
    change = success_change(before, after)
    points = 100 * change["difference"]
    verb = "rose" if points > 0 else "fell" if points < 0 else "stayed"
    head = (
        f"validation success {verb} from {before['success']:.1%} to {after['success']:.1%} ({points:+.1f} "
        "points)"
    )
    episodes = (
        f"{before['num_episodes']} episodes each"
        if before["num_episodes"] == after["num_episodes"]
        else f"{before['num_episodes']} and {after['num_episodes']} episodes"
    )
    test = f"a two-proportion test gives p = {change['p_value']:.2g} ({episodes})"
    if not change["intervals_overlap"] or change["p_value"] < 0.01:
        overlap = "do not overlap" if not change["intervals_overlap"] else "overlap"
        return f"{head}; the 95% intervals {overlap} and {test}: more than noise"
    return f"{head}; the 95% intervals overlap and {test}: not separated from the noise of this many episodes"
