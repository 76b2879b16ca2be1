"""A sweep's trials gathered by grid point (tau, eps_high) over their seeds: the table and the plot of
held-out success against tau that ``experiments.sweep`` ends with.

A point's figure is the mean over its seeds of each trial's final validation success (the last evaluation:
the peak over evaluations is biased upwards by the choice of the best one) with its 95% t interval; the best
point is the one with the highest mean. tau = inf is the point without age decay (standard PER's priorities).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from experiments.common.significance import mean_over_seeds


def tau_label(tau: float) -> str:
    return "no decay" if tau == math.inf else f"{tau:g}"


def points(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per (tau, eps_high), sorted by eps_high then tau: its seeds and the mean over them of the
    final and the peak validation success. Trials that errored or were never evaluated are left out."""
    scored = [
        row for row in rows if row["status"] == "ok" and not math.isnan(row["final_validation_success"])
    ]
    grid: dict[tuple[float, float], list[dict[str, Any]]] = {}
    for row in scored:
        grid.setdefault((row["tau"], row["eps_high"]), []).append(row)
    return [
        {
            "tau": tau,
            "eps_high": eps_high,
            "seeds": [row.get("seed") for row in trials],
            "final": mean_over_seeds([row["final_validation_success"] for row in trials]),
            "peak": mean_over_seeds([row["peak_validation_success"] for row in trials]),
            "minutes_per_trial": _mean_minutes(trials),
        }
        for (tau, eps_high), trials in sorted(grid.items(), key=lambda item: (item[0][1], item[0][0]))
    ]


def _mean_minutes(trials: Sequence[dict[str, Any]]) -> float:
    """The trials' mean wall time in minutes (NaN where none is recorded)."""
    minutes = [row["minutes"] for row in trials if not math.isnan(row.get("minutes", math.nan))]
    return sum(minutes) / len(minutes) if minutes else math.nan


def best_point(grid: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The point with the highest mean final validation success (the first on ties)."""
    return max(grid, key=lambda point: point["final"]["mean"]) if grid else None


def _interval(figure: dict[str, Any]) -> str:
    half = "n/a (1 seed)" if figure["ci95"] is None else f"{figure['ci95']:.3f}"
    return f"{figure['mean']:.3f} ± {half}"


def markdown_lines(grid: Sequence[dict[str, Any]], best: dict[str, Any] | None) -> list[str]:
    lines = [
        "## Grid points (mean over seeds ± 95% t interval)",
        "",
        "| tau | eps_high | seeds | final validation success | peak validation success | minutes per trial |",
        "|---|---|---|---|---|---|",
    ]
    for point in grid:
        mark = " **(best)**" if point is best else ""
        minutes = point.get("minutes_per_trial", math.nan)
        lines.append(
            f"| {tau_label(point['tau'])}{mark} | {point['eps_high']:g} | {len(point['seeds'])} "
            f"| {_interval(point['final'])} | {_interval(point['peak'])} "
            f"| {'n/a' if math.isnan(minutes) else f'{minutes:.1f}'} |"
        )
    lines.append("")
    if best is not None:
        lines += [
            f"Best point by mean final validation success: tau = {tau_label(best['tau'])}, eps_high = "
            f"{best['eps_high']:g} ({_interval(best['final'])} over {len(best['seeds'])} seed(s)). Where the "
            "intervals of the points overlap, the sweep does not separate them.",
            "",
        ]
    return lines


def plot(grid: Sequence[dict[str, Any]], path: Path, title: str) -> Path:
    """Final validation success against tau (log axis; "no decay" to the right of the largest tau), one
    line per eps_high, with the 95% intervals over seeds as error bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    finite = sorted({point["tau"] for point in grid if point["tau"] != math.inf})
    no_decay_at = (finite[-1] * 4) if finite else 1.0

    def x_of(tau: float) -> float:
        return no_decay_at if tau == math.inf else tau

    fig, ax = plt.subplots(figsize=(6, 4))
    for eps_high in dict.fromkeys(point["eps_high"] for point in grid):
        line = sorted((p for p in grid if p["eps_high"] == eps_high), key=lambda p: x_of(p["tau"]))
        ax.errorbar(
            [x_of(p["tau"]) for p in line],
            [p["final"]["mean"] for p in line],
            yerr=[p["final"]["ci95"] or 0.0 for p in line],
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
    ax.set_ylabel("final validation success")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
