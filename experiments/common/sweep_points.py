"""A sweep's trials gathered by grid point (tau, eps_high) over their seeds: the table and the plot of
held-out success against tau that ``experiments.sweep`` ends with.

A point's primary figure is the replay study's (docs/replay.md, "The replay study: pre-registration"): the
area under each trial's held-out success curve against its training episodes over one budget B for every
trial of the sweep (the smallest final episode count among its finished trials, so no trial is
extrapolated; experiments/common/replay_auc.py), a mean success over the budget, then the mean over the
point's seeds with its 95% t interval. Beside it: the final validation success (the last evaluation: the
peak over evaluations is biased upwards by the choice of the best one) and the peak, the share of tokens
each clip bound cut (Clip-Higher acts only where ``clipfrac_high`` is not negligible), and the measured drift
(``kl_per_age`` c, and tau = 1/c, FreshPER's drift model; experiments/common/replay_drift.py). The best
point has the highest mean AUC (the highest mean final success where the trials have no curve from their
start: sweeps run before the start was measured, or PBT's). tau = inf is the point without age decay
(standard PER's priorities).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from experiments.common.replay_auc import auc
from experiments.common.significance import mean_over_seeds


def tau_label(tau: float) -> str:
    return "no decay" if tau == math.inf else f"{tau:g}"


def points(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per (tau, eps_high), sorted by eps_high then tau: its seeds, the mean over them of the AUC
    (None unless every scored trial has a curve from its start), the final and the peak validation
    success, the clip fractions and the drift. Trials that errored or were never evaluated are left out."""
    scored = [
        row for row in rows if row["status"] == "ok" and not math.isnan(row["final_validation_success"])
    ]
    aucs = trial_aucs(scored)
    episode_budget = None if aucs is None else budget([row["episode_curve"] for row in scored])
    grid: dict[tuple[float, float], list[dict[str, Any]]] = {}
    for row in scored:
        grid.setdefault((row["tau"], row["eps_high"]), []).append(row)
    return [
        {
            "tau": tau,
            "eps_high": eps_high,
            "seeds": [row.get("seed") for row in trials],
            "auc": None if aucs is None else mean_over_seeds([aucs[id(row)] for row in trials]),
            "budget_episodes": episode_budget,
            "final": mean_over_seeds([row["final_validation_success"] for row in trials]),
            "peak": mean_over_seeds([row["peak_validation_success"] for row in trials]),
            "clipfrac_high": _mean_of(
                trials, lambda row: (row.get("clip_fractions") or {}).get("clipfrac_high")
            ),
            "clipfrac_low": _mean_of(
                trials, lambda row: (row.get("clip_fractions") or {}).get("clipfrac_low")
            ),
            "kl_per_age": _mean_of(trials, lambda row: (row.get("drift") or {}).get("kl_per_age")),
            "minutes_per_trial": _mean_minutes(trials),
        }
        for (tau, eps_high), trials in sorted(grid.items(), key=lambda item: (item[0][1], item[0][0]))
    ]


def budget(curves: Sequence[Mapping[str, Sequence[float]]]) -> float:
    """B: the smallest final episode count among the trials' curves."""
    return min(curve["episodes"][-1] for curve in curves)


def trial_aucs(rows: Sequence[dict[str, Any]]) -> dict[int, float] | None:
    """Each trial's AUC over the sweep's budget, keyed by ``id(row)``; None when a trial has no curve from
    its start (the points then have no AUC: a budget over some trials only would compare unlike areas)."""
    curves = [row.get("episode_curve") for row in rows]
    if not rows or any(curve is None for curve in curves):
        return None
    b = budget(curves)
    return {
        id(row): auc(curve["episodes"], curve["success"], b) for row, curve in zip(rows, curves, strict=True)
    }


def _mean_of(
    trials: Sequence[dict[str, Any]], figure: Callable[[dict[str, Any]], float | None]
) -> float | None:
    """The mean of a trial figure over the trials that measured it (None where none did)."""
    values = [value for value in map(figure, trials) if value is not None]
    return sum(values) / len(values) if values else None


def _mean_minutes(trials: Sequence[dict[str, Any]]) -> float:
    """The trials' mean wall time in minutes (NaN where none is recorded)."""
    minutes = [row["minutes"] for row in trials if not math.isnan(row.get("minutes", math.nan))]
    return sum(minutes) / len(minutes) if minutes else math.nan


def primary(grid: Sequence[dict[str, Any]]) -> tuple[str, str]:
    """(key, words) of the figure the points are ranked and plotted by: the AUC where every point has one,
    else the final validation success."""
    if grid and all(point.get("auc") is not None for point in grid):
        return "auc", "held-out success over the episode budget (AUC)"
    return "final", "final validation success"


def best_point(grid: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The point with the highest mean of the primary figure (:func:`primary`; the first on ties)."""
    key, _ = primary(grid)
    return max(grid, key=lambda point: point[key]["mean"]) if grid else None


def drift_tau(grid: Sequence[dict[str, Any]]) -> float | None:
    """FreshPER's drift model tau = 1/c, c the mean ``kl_per_age`` over the points that measured it (their
    replay batches' KL per iteration of age); None where none did."""
    measured = [point["kl_per_age"] for point in grid if point.get("kl_per_age")]
    return len(measured) / sum(measured) if measured else None


def _interval(figure: dict[str, Any] | None) -> str:
    if figure is None:
        return "n/a"
    half = "n/a (1 seed)" if figure["ci95"] is None else f"{figure['ci95']:.3f}"
    return f"{figure['mean']:.3f} ± {half}"


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.2f}%"


def markdown_lines(grid: Sequence[dict[str, Any]], best: dict[str, Any] | None) -> list[str]:
    key, words = primary(grid)
    budget = next((point["budget_episodes"] for point in grid if point.get("budget_episodes")), None)
    lines = [
        "## Grid points (mean over seeds ± 95% t interval)",
        "",
        "| tau | eps_high | seeds | AUC | final validation success | peak validation success "
        "| clipped high / low | kl_per_age | minutes per trial |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for point in grid:
        mark = " **(best)**" if point is best else ""
        minutes = point.get("minutes_per_trial", math.nan)
        c = point.get("kl_per_age")
        lines.append(
            f"| {tau_label(point['tau'])}{mark} | {point['eps_high']:g} | {len(point['seeds'])} "
            f"| {_interval(point.get('auc'))} | {_interval(point['final'])} | {_interval(point['peak'])} "
            f"| {_share(point.get('clipfrac_high'))} / {_share(point.get('clipfrac_low'))} "
            f"| {'n/a' if c is None else f'{c:.3g}'} "
            f"| {'n/a' if math.isnan(minutes) else f'{minutes:.1f}'} |"
        )
    lines.append("")
    if key == "auc":
        lines += [
            f"AUC: each trial's held-out success curve against its training episodes, averaged over the "
            f"first {budget:g} episodes (the smallest final count among the finished trials), from the "
            "start's evaluation (docs/replay.md, the replay study's primary metric). Clipped high / low: the "
            "share of response tokens each clip bound cut, mean over iterations (Clip-Higher acts through "
            "the high one). kl_per_age: the replay batches' KL per iteration of age (FreshPER's drift c).",
            "",
        ]
    if best is not None:
        lines.append(
            f"Best point by mean {words}: tau = {tau_label(best['tau'])}, eps_high = {best['eps_high']:g} "
            f"({_interval(best[key])} over {len(best['seeds'])} seed(s)). Where the intervals of the points "
            "overlap, the sweep does not separate them."
        )
        tau = drift_tau(grid)
        if tau is not None:
            where = "no decay" if best["tau"] == math.inf else f"{best['tau'] / tau:.2g} times that"
            lines.append(
                f"The drift model's tau = 1/c = {tau:.3g} iterations (c averaged over the points); the best "
                f"point's tau: {where}."
            )
        lines.append("")
    return lines


def plot(grid: Sequence[dict[str, Any]], path: Path, title: str) -> Path:
    """The primary figure (:func:`primary`) against tau (log axis; "no decay" to the right of the largest
    tau), one line per eps_high, with the 95% intervals over seeds as error bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    key, words = primary(grid)
    finite = sorted({point["tau"] for point in grid if point["tau"] != math.inf})
    no_decay_at = (finite[-1] * 4) if finite else 1.0

    def x_of(tau: float) -> float:
        return no_decay_at if tau == math.inf else tau

    fig, ax = plt.subplots(figsize=(6, 4))
    for eps_high in dict.fromkeys(point["eps_high"] for point in grid):
        line = sorted((p for p in grid if p["eps_high"] == eps_high), key=lambda p: x_of(p["tau"]))
        ax.errorbar(
            [x_of(p["tau"]) for p in line],
            [p[key]["mean"] for p in line],
            yerr=[p[key]["ci95"] or 0.0 for p in line],
            marker="o",
            capsize=3,
            label=f"eps_high {eps_high:g}",
        )
    taus = sorted({x_of(point["tau"]) for point in grid})
    ax.set_xscale("log")
    ax.set_xticks(taus)
    has_no_decay = any(point["tau"] == math.inf for point in grid)
    ax.set_xticklabels(["no decay" if has_no_decay and x == no_decay_at else f"{x:g}" for x in taus])
    ax.minorticks_off()
    ax.set_xlabel("tau (iterations)")
    ax.set_ylabel(words)
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
