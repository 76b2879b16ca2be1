"""What a learning-lab entry's runs show (``experiments.lab``): where the policy starts, where it ends, the
gain with its intervals, the band a re-run's curve should fall in, and why it learnt or did not
(``experiments/common/learning_diagnostics.py``).

A run is what ``experiments.compare`` saves (``experiments/common/comparison_runs.py``): its validation curve,
each point an evaluation of the same validation tasks (``envs/seeds.py``), with per-task outcomes.

The gain (after - before) is measured twice, with two units, and the report claims it only where both agree:
- **by seed**: each seed's own after - before, the seed being the unit (what differs between training runs),
  the paired t-test over seeds;
- **by task**: each validation task's success rate before and after, averaged over the seeds, the task being
  the unit (which tasks the evaluation happened to draw), the paired t-test over tasks. The seeds' samples of
  one task are one cluster: never counted as independent episodes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from experiments.common import learning_diagnostics, solution_length
from experiments.common.runs_made_by import machines_sentence
from experiments.common.significance import (
    ALPHA,
    mean_over_seeds,
    measured_range,
    paired_t_test,
    prediction_band,
    task_outcomes,
)

# What the lab asks of an entry (the learnable zone and a gain worth the name): a start between 15% and 50%
# held-out success, and a gain of at least 10 points whose 95% intervals (by seed and by task) exclude zero.
ZONE = (0.15, 0.50)
MIN_GAIN = 0.10
# The coverages of the band a re-run is checked against: 95% for a person's check, 99.5% for the test suite's
# (a false-failure rate <= 1%, with room for the t band's thin tails on rates that move in steps of 1/tasks:
# on the quick entry's 20 seeds, 2 left the 99% band of the others, barely; none the 99.5% one).
CHECK_COVERAGES = (0.95, 0.99, 0.995)


def curve_of(run: Mapping[str, Any]) -> tuple[list[int], list[float]]:
    """A run's validation curve: the iterations evaluated (0: before training) and the success at each."""
    return [point["iteration"] for point in run["curve"]], [point["success"] for point in run["curve"]]


def task_gain(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The paired t-test over validation tasks of the success before training against after it, each task's
    rate averaged over the runs (seeds); None where an evaluation lacks per-task outcomes. ValueError when
    the runs evaluated different tasks."""
    before = [task_outcomes(run["curve"][0]["metrics"]) for run in runs]
    after = [task_outcomes(run["curve"][-1]["metrics"]) for run in runs]
    if any(rates is None for rates in [*before, *after]):
        return None
    tasks = sorted(before[0])
    if any(sorted(rates) != tasks for rates in [*before, *after]):
        raise ValueError(
            "the runs evaluated different validation tasks: their gains cannot be paired by task"
        )
    mean_before = [float(np.mean([rates[task] for rates in before])) for task in tasks]
    mean_after = [float(np.mean([rates[task] for rates in after])) for task in tasks]
    return paired_t_test(mean_before, mean_after, unit="task (rate averaged over seeds)")


def summarize(entry: str, runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The lab's figures of one entry's finished runs (at least one; all with the same evaluation points)."""
    runs = sorted(runs, key=lambda run: run["seed"])
    iterations, _ = curve_of(runs[0])
    curves = []
    for run in runs:
        points, curve = curve_of(run)
        if points != iterations:
            raise ValueError(
                f"{entry}: seed {run['seed']} was evaluated at iterations {points}, seed "
                f"{runs[0]['seed']} at {iterations}: the runs come from different settings"
            )
        curves.append(curve)
    before = [curve[0] for curve in curves]
    after = [curve[-1] for curve in curves]
    by_seed = paired_t_test(before, after, unit="seed")
    by_task = task_gain(runs)
    gain = float(np.mean(after) - np.mean(before))
    lows = [test.get("difference_ci95_low") for test in (by_seed, by_task) if test is not None]
    above_zero = bool(lows) and all(low is not None and low > 0 for low in lows)
    start = float(np.mean(before))
    return {
        "entry": entry,
        "env": runs[0]["env"],
        # The run's setting and starting model, as its saved settings hold them.
        "env_config": runs[0].get("settings", {}).get("env_config", {}),
        "model_path": runs[0].get("settings", {}).get("model_path"),
        "model": runs[0].get("settings", {}).get("model"),  # None: the tiny model warm-started on the env
        "warm_start_steps": runs[0].get("settings", {}).get("warm_start_steps"),
        "seeds": [run["seed"] for run in runs],
        "iterations": iterations,
        "before": mean_over_seeds(before),
        "after": mean_over_seeds(after),
        "peak": mean_over_seeds([run["peak"] for run in runs]),
        "gain": gain,
        # The gain as a figure over seeds, each seed's own after - before (what a claim re-checks).
        "gain_over_seeds": mean_over_seeds([b - a for a, b in zip(before, after, strict=True)]),
        "gain_by_seed": by_seed,
        "gain_by_task": by_task,
        "in_zone": ZONE[0] <= start <= ZONE[1],
        "gains_with_power": above_zero and gain >= MIN_GAIN,
        "band": band_of(iterations, curves),
        # Seeds outside the band of the others, per coverage: how often a check at it fails a sound run.
        "band_leave_one_out": {str(c): leave_one_out(iterations, curves, c) for c in CHECK_COVERAGES},
        # The same for the changes from each seed's start (a check on another CPU kind).
        "changes_leave_one_out": {
            str(c): leave_one_out(*changes(iterations, curves), c, clip=False) for c in CHECK_COVERAGES
        },
        "curves": {str(run["seed"]): curve for run, curve in zip(runs, curves, strict=True)},
        "diagnostics": learning_diagnostics.cell_diagnostics(runs),
        "wall_minutes": measured_range([run["wall_s"] / 60 for run in runs]),
        "peak_rss_gib": measured_range([run.get("peak_rss_gib") for run in runs]),
        "commits": sorted({str(run.get("commit")) for run in runs}),
        # The commits are listed above; what else made the runs: the CPUs they ran on.
        "made_by": machines_sentence(list(runs)).strip(),
    }


def band_of(
    iterations: Sequence[int], curves: Sequence[Sequence[float]], coverage: float = 0.95, clip: bool = True
) -> dict:
    """The band over seeds' ``curves`` (:func:`prediction_band`) at ``coverage``, with its ``iteration``s,
    clipped to [0, 1] where ``clip`` (success rates: clipping moves no rate across it; changes of a rate are
    not clipped)."""
    band = {"iteration": list(iterations), **prediction_band(curves, coverage)}
    if clip and band["low"] is not None:
        band["low"] = [max(0.0, value) for value in band["low"]]
        band["high"] = [min(1.0, value) for value in band["high"]]
    return band


def outside_band(band: Mapping[str, Any], curve: Sequence[float]) -> list[int]:
    """The iterations at which ``curve`` (a run's success at the band's iterations) falls outside ``band``
    (:func:`band_of`); every iteration where the band has no width (one seed)."""
    if band["low"] is None:
        return list(band["iteration"])
    return [
        iteration
        for iteration, value, low, high in zip(
            band["iteration"], curve, band["low"], band["high"], strict=True
        )
        if not low <= value <= high
    ]


def leave_one_out(
    iterations: Sequence[int], curves: Sequence[Sequence[float]], coverage: float, clip: bool = True
) -> int | None:
    """How many of the seeds' curves leave the band of the other seeds at ``coverage``: the measured
    false-failure count of a check at that coverage (None under 3 seeds: no band from the others)."""
    if len(curves) < 3:
        return None
    return sum(
        bool(outside_band(band_of(iterations, [*curves[:i], *curves[i + 1 :]], coverage, clip), curve))
        for i, curve in enumerate(curves)
    )


def changes(
    iterations: Sequence[int], curves: Sequence[Sequence[float]]
) -> tuple[list[int], list[list[float]]]:
    """Each curve's change from its own start, at the iterations after the start: what a check compares
    across CPU kinds, where the start moves (the warm start lands on another model) but the gain does not."""
    return list(iterations[1:]), [[value - curve[0] for value in curve[1:]] for curve in curves]


def markdown(summary: Mapping[str, Any], record: Mapping[str, Any], settings_file: str) -> str:
    """The entry's README.md: its start, end and gain with both tests, the band, the diagnostics, the cost,
    and the commands that made and re-run it."""
    before, after = summary["before"], summary["after"]
    by_seed, by_task = summary["gain_by_seed"], summary["gain_by_task"]
    machine = record["machine"]
    verdict = (
        "gains with power: both 95% intervals of the gain exclude zero and the gain is at least "
        f"{100 * MIN_GAIN:.0f} points"
        if summary["gains_with_power"]
        else "does not (yet) gain with power: the lab asks for a gain of at least "
        f"{100 * MIN_GAIN:.0f} points whose 95% "
        "intervals by seed and by task both exclude zero"
    )
    zone = "inside" if summary["in_zone"] else "outside"
    lines = [
        f"# Learning lab: {summary['entry']} ({summary['env']})",
        "",
        f"Made by `{record['command']}` at commit {record['commit']}"
        f"{' (with uncommitted changes)' if record.get('dirty') else ''} on {record['date']}, "
        f"{machine['cores']} cores, {machine['cpu_model']} ({', '.join(machine['cpu_flags'])}). Settings: "
        f"`{settings_file}`. Runs from commits: {', '.join(summary['commits'])}."
        + (f" {summary['made_by']}" if summary.get("made_by") else ""),
        "",
        f"On-policy DAPO, {len(summary['seeds'])} seeds ({', '.join(map(str, summary['seeds']))}), "
        f"{summary['iterations'][-1]} iterations; validation success on the same held-out tasks at every "
        "point.",
        "",
        "| | mean over seeds | 95% t interval over seeds | sd |",
        "|---|---|---|---|",
        _seed_row("before training", before),
        _seed_row("after training", after),
        _seed_row("peak", summary["peak"]),
        "",
        f"**Gain {100 * summary['gain']:+.1f} points**: the entry {verdict}. The start is {zone} the "
        f"learnable zone ({ZONE[0]:.0%}-{ZONE[1]:.0%}).",
        "",
        *floor_lines(summary),
        "| unit | n | gain | 95% interval | p | detectable at 80% power |",
        "|---|---|---|---|---|---|",
        _test_row(by_seed),
    ]
    if by_task is not None:
        lines.append(_test_row(by_task))
    band = summary["band"]
    lines += [
        "",
        "## Reference curve",
        "",
        "![curves](curves.png) Each seed's curve and the band where a new seed's whole curve should fall "
        f"with {band['coverage']:.0%} probability (t prediction interval over {band['n']} seeds, "
        f"Bonferroni over the {len(band['iteration'])} evaluations). "
        f"`python -m experiments.lab check {summary['entry']}` re-runs a seed and says whether it falls "
        "inside.",
        "",
        "| iteration | " + " | ".join(map(str, band["iteration"])) + " |",
        "|---|" + "---|" * len(band["iteration"]),
        "| mean | " + " | ".join(f"{value:.3f}" for value in band["mean"]) + " |",
    ]
    if band["low"] is not None:
        lines += [
            "| band low | " + " | ".join(f"{value:.3f}" for value in band["low"]) + " |",
            "| band high | " + " | ".join(f"{value:.3f}" for value in band["high"]) + " |",
        ]
    for seed, curve in summary["curves"].items():
        lines.append(f"| seed {seed} | " + " | ".join(f"{value:.3f}" for value in curve) + " |")
    lines += [
        "",
        *solution_length.markdown_lines(summary.get("by_solution_length")),
        *learning_diagnostics.markdown_lines(
            {summary["env"]: {"on_policy": summary["diagnostics"]}}, {"on_policy": "on-policy"}, "arm"
        ),
    ]
    wall, memory = summary["wall_minutes"], summary["peak_rss_gib"]
    lines += [
        "## Cost",
        "",
        f"Wall time per run: {wall['mean']:.1f} minutes ({wall['min']:.1f}-{wall['max']:.1f}); "
        + (
            f"peak resident memory {memory['mean']:.2f} GiB."
            if memory is not None
            else "peak resident memory not measured."
        ),
        "",
        "Re-run (finished seeds are kept, missing ones trained): "
        f"`python -m experiments.lab run {summary['entry']}`.",
        "",
    ]
    return "\n".join(lines)


def floor_side(summary: Mapping[str, Any], figure: str) -> str | None:
    """Where the mean ``figure`` ("before", "after") lies against the entry's blind floor: "above" or "below"
    (outside the floor's 95% interval), "at"; None without a floor."""
    floor = summary.get("blind_floor")
    if floor is None:
        return None
    value, low, high = summary[figure]["mean"], *floor_interval(floor)
    return "above" if value > high else "below" if value < low else "at"


def floor_interval(floor: Mapping[str, Any]) -> tuple[float, float]:
    """The blind floor's 95% interval (low, high)."""
    half = floor["ci95"] or 0.0
    return floor["success"] - half, floor["success"] + half


def floor_lines(summary: Mapping[str, Any]) -> list[str]:
    """The report's sentence on the blind floor (docs/learning_lab.md, "The blind floor")."""
    floor = summary.get("blind_floor")
    if floor is None:
        return []
    start, end = floor_side(summary, "before"), floor_side(summary, "after")
    return [
        f"**Blind floor {100 * floor['success']:.1f}% ± {100 * (floor['ci95'] or 0):.1f}**: a policy that "
        "never looks at the observation (each turn the env's `blind_response`: uniform moves, as many as a "
        f"turn allows; {floor['repeats']} episodes on each of the {floor['tasks']} validation tasks, 95% t "
        f"interval over tasks). The start is {start} it, the end {end} it.",
        "",
    ]


def _seed_row(name: str, figure: Mapping[str, Any]) -> str:
    half = figure["ci95"]
    interval = "n/a" if half is None else f"{figure['mean'] - half:.3f}-{figure['mean'] + half:.3f}"
    return f"| {name} | {figure['mean']:.3f} | {interval} | {figure['std']:.3f} |"


def _test_row(test: Mapping[str, Any]) -> str:
    low, high = test.get("difference_ci95_low"), test.get("difference_ci95_high")
    interval = "n/a" if low is None else f"{100 * low:+.1f} to {100 * high:+.1f}"
    p = "n/a" if test["p_value"] is None else f"{test['p_value']:.2g}"
    detectable = "n/a" if test["detectable"] is None else f"{100 * test['detectable']:.1f} points"
    significant = " (p < 0.05)" if test["p_value"] is not None and test["p_value"] < ALPHA else ""
    return (
        f"| {test['unit']} | {test['n']} | {100 * test['difference']:+.1f} points | {interval} | "
        f"{p}{significant} | {detectable} |"
    )


def plot(summary: Mapping[str, Any], path: Path, check: Sequence[float] | None = None) -> Path:
    """Each seed's validation curve, the mean and the band; ``check``: a re-run's curve drawn over them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from experiments.common.plots import style_iteration_axis

    band = summary["band"]
    fig, ax = plt.subplots(figsize=(6, 4))
    for seed, curve in summary["curves"].items():
        ax.plot(band["iteration"], curve, color="grey", alpha=0.5, linewidth=1, label=f"seed {seed}")
    ax.plot(band["iteration"], band["mean"], color="C0", marker="o", markersize=3, label="mean over seeds")
    if band["low"] is not None:
        ax.fill_between(
            band["iteration"],
            band["low"],
            band["high"],
            color="C0",
            alpha=0.15,
            label=f"{band['coverage']:.0%} band for a new seed",
        )
    if check is not None:
        ax.plot(band["iteration"], check, color="C3", marker="s", markersize=3, label="re-run")
    ax.set_title(f"{summary['entry']} ({summary['env']}): validation success", fontsize=10)
    style_iteration_axis(ax, "validation success")
    ax.set_ylim(-0.02, 1.02)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
