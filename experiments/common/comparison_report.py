"""The report of a comparison (``experiments.compare``) from its finished runs: the aggregate per (env, arm)
over seeds and the tests of the reference arm against each other (:func:`aggregate`, its statistics from
``experiments/common/significance.py``), ``comparison.md`` (:func:`markdown`), the curves and learning
diagnostics plots, and ``results.json`` (:func:`write_report` writes them all)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from experiments.common import learning_diagnostics
from experiments.common.comparison_arms import Arm
from experiments.common.freshper_paper import PAPER_TABLE_1, PAPER_TASK, proportional_effect
from experiments.common.peak_memory import SAMPLE_INTERVAL_S
from experiments.common.replay_drift import drift
from experiments.common.results_json import dumps
from experiments.common.run_loop import mostly_untrained
from experiments.common.runs_made_by import made_by
from experiments.common.significance import (
    curve_over_seeds,
    holm,
    mean_of_means,
    mean_over_seeds,
    measured_range,
    paired_seed_test,
)
from experiments.common.training_metrics import measured

# Replay metrics that show whether FreshPER acts (docs/design.md, section 7), averaged over a run's
# iterations, then over its seeds.
REPLAY_METRICS = (
    "replay/is_weight_mean",
    "replay/is_weight_min",
    "replay/success_fraction",
    "replay/batch_mean_age",
    "replay/oldest_decay",
    "replay/ess_fraction",
    "train/dual_clip_frac_replay",
)


def aggregate(runs: list[dict[str, Any]], reference: str) -> dict[str, dict[str, dict[str, Any]]]:
    """{env: {arm: mean / std over seeds of peak, final and initial success, the mean curve, the replay
    metrics, the cost (wall time, peak memory) and, but for ``reference``, the test over seeds of
    ``reference`` against it (``vs_reference``: :func:`paired_seed_test`, with ``p_holm``, its p-value
    Holm-adjusted over every test of the table)}}."""
    table: dict[str, dict[str, dict[str, Any]]] = {}
    for env in dict.fromkeys(run["env"] for run in runs):
        for arm in dict.fromkeys(run["arm"] for run in runs):
            cell = [run for run in runs if run["env"] == env and run["arm"] == arm]
            if not cell:
                continue
            iterations = [point["iteration"] for point in cell[0]["curve"]]
            curves = [[point["success"] for point in run["curve"]] for run in cell]
            table.setdefault(env, {})[arm] = {
                "seeds": sorted(run["seed"] for run in cell),
                **{key: mean_over_seeds([run[key] for run in cell]) for key in ("peak", "final", "initial")},
                "curve": {"iteration": iterations, **curve_over_seeds(curves)},
                "replay": {key: _run_mean(cell, key) for key in REPLAY_METRICS},
                "drift": drift(row for run in cell for row in run.get("training", [])),
                "cost": {
                    key: measured_range([run.get(key) for run in cell]) for key in ("wall_s", "peak_rss_gib")
                },
            }
        if reference in table.get(env, {}):
            cells = table[env]
            reference_runs = [run for run in runs if run["env"] == env and run["arm"] == reference]
            for arm in cells:
                if arm == reference:
                    continue
                other = [run for run in runs if run["env"] == env and run["arm"] == arm]
                cells[arm]["vs_reference"] = {
                    key: paired_seed_test(
                        {r["seed"]: r[key] for r in reference_runs}, {r["seed"]: r[key] for r in other}
                    )
                    for key in ("peak", "final")
                }
    # The report's table of tests is one family (Holm 1979): every arm, env and measure in it.
    family = [
        test
        for cells in table.values()
        for cell in cells.values()
        for test in cell.get("vs_reference", {}).values()
    ]
    for test, adjusted in zip(family, holm([test["p_value"] for test in family]), strict=True):
        test["p_holm"] = adjusted
    return table


def _run_mean(cell: list[dict[str, Any]], suffix: str) -> float | None:
    """Mean over seeds of each run's mean over iterations of the metric ending in ``suffix`` (None: never
    logged, e.g. replay metrics on-policy). An iteration that did not log it (NaN, null in a run loaded from
    disk) is skipped."""
    per_run = [[measured(flat, suffix) for flat in run.get("training", [])] for run in cell]
    return mean_of_means([value for value in values if value is not None] for values in per_run)


def markdown(
    args: argparse.Namespace,
    table: dict[str, Any],
    runs: list[dict[str, Any]],
    command: str,
    missing: list[tuple[str, Arm, int]] = (),
) -> str:
    arms = [arm for arm in args.arms if any(arm.label in cells for cells in table.values())]
    names = {arm.label: arm.name for arm in args.arms}
    noun = "mode" if args.replay_arms else "arm"
    wall = sum(run["wall_s"] for run in runs)
    models = ", ".join(
        sorted({run["settings"]["model_path"] or "the default model (model_path None)" for run in runs})
    )
    scales = _each(run.resolved_scale for run in args.arm_runs)
    intervals = _each(
        config.evaluation_interval or run.iterations
        for config, run in zip(args.arm_configs, args.arm_runs, strict=True)
    )
    lines = [
        f"# {' vs '.join(arm.name for arm in arms)} (DAPO, {scales} scale)",
        "",
        f"Command: `{command}`",
        "",
        *_missing_lines(missing, len(runs)),
        f"{_each(run.iterations for run in args.arm_runs)} DAPO iterations per run; seeds {args.seeds}; "
        f"validation success = mean success of "
        f"{_each(c.evaluation_samples_per_task for c in args.arm_configs)} episode(s) on each of "
        f"{_each(c.evaluation_num_tasks for c in args.arm_configs)} validation tasks, measured before "
        f"training and every {intervals} iteration(s). {_replay_sentence(args, runs)} Model: {models}. "
        f"Total run time {wall / 60:.1f} min." + made_by(runs),
        "",
        "## Peak validation success (mean ± 95% interval over seeds; std)",
        "",
        *_table(table, arms, "peak"),
        "",
        "## Final validation success (mean ± 95% interval over seeds; std)",
        "",
        *_table(table, arms, "final"),
        "",
        *_tests(table, arms, names.get(args.reference, args.reference), noun),
        *_replay_table(table, arms, noun),
        *learning_diagnostics.markdown_lines(learning_diagnostics.diagnostics(runs), names, noun),
        *_cost_table(table, arms, noun),
        *_initial_line(args, table, runs, arms),
        "",
        *_untrained_warning(runs, noun),
    ]
    if args.replay_arms:
        lines += _paper_table(table)
    return "\n".join(lines) + "\n"


def _missing_lines(missing: list[tuple[str, Arm, int]], done: int) -> list[str]:
    """What a partial report lacks: the runs not finished yet, seeds grouped per (env, arm)."""
    if not missing:
        return []
    seeds: dict[tuple[str, str], list[int]] = {}
    for env, arm, seed in missing:
        seeds.setdefault((env.split("/")[-1], arm.label), []).append(seed)
    listed = "; ".join(
        f"{env} {arm} seed{'s' if len(ks) > 1 else ''} {', '.join(map(str, ks))}"
        for (env, arm), ks in seeds.items()
    )
    return [
        f"**Partial: {done} of {done + len(missing)} runs finished.** Missing: {listed}. Every figure below "
        "is over the finished runs only (n in each cell); rerun the command to continue, finished runs are "
        "skipped.",
        "",
    ]


def _each(values: Any) -> str:
    """The distinct values, in order, joined by " / ": one where every arm shares it."""
    return " / ".join(str(value) for value in dict.fromkeys(values))


def _replay_sentence(args: argparse.Namespace, runs: list[dict[str, Any]]) -> str:
    """FreshPER's tau and its age unit; for generic arms, the replay modes the runs used too."""
    age_units = ", ".join(sorted({run.get("age_unit", "optimizer_steps") for run in runs}))
    if not args.replay_arms:
        modes = ", ".join(dict.fromkeys(run["replay_mode"] for run in runs))
        taus = ", ".join(f"{t:g}" for t in dict.fromkeys(run["tau"] for run in runs))
        return f"Replay mode {modes} (tau = {taus}, age in {age_units})."
    taus = sorted({run["tau"] for run in runs if run["arm"] in ("freshper", "freshper_poly")})
    return (
        f"FreshPER tau = {', '.join(f'{t:g}' for t in taus) or 'n/a'} (age in {age_units}). The FreshPER "
        "paper's reference code also counts ages in training iterations (a rollout batch and its update), "
        "with tau 500 (1000 on FrozenLake) over runs of thousands of iterations; docs/replay.md (FreshPER at "
        "the operating point, tau in the paper's units) compares the two operating points, and the replay "
        "table's tau_from_drift is the tau the paper's model (tau = 1/c) gives for these runs."
    )


def _initial_line(
    args: argparse.Namespace, table: dict[str, Any], runs: list[dict[str, Any]], arms: list[Arm]
) -> list[str]:
    """Validation success before training: per env for replay modes (one starting model), else per arm
    (an arm may change the starting model)."""
    if args.replay_arms:
        return [
            "Validation success before training (all modes start from the same model): "
            + ", ".join(
                f"{env.split('/')[-1]} "
                f"{mean_over_seeds([run['initial'] for run in runs if run['env'] == env])['mean']:.3f}"
                for env in table
            )
        ]
    return [
        "Validation success before training (mean over seeds): "
        + "; ".join(
            f"{env.split('/')[-1]} "
            + ", ".join(
                f"{arm.name} {cells[arm.label]['initial']['mean']:.3f}" for arm in arms if arm.label in cells
            )
            for env, cells in table.items()
        )
    ]


def _paper_table(table: dict[str, Any]) -> list[str]:
    """FreshPER's Table 1 beside the replay modes' results, with the env closest to each task."""
    lines = [
        "## FreshPER paper, Table 1 (for reference only)",
        "",
        "Peak performance with Qwen2.5-3B/7B-class LLMs and VLMs, a REINFORCE++ backbone and thousands of "
        "training steps; ours are tiny CPU models trained with DAPO for a few iterations, so the numbers are "
        "not comparable in scale, only in layout. The paper reports score (return) for Sokoban and exact "
        "match for NQ Search; we report validation success for every env.",
        "",
        "| task | metric | on-policy | standard PER | FreshPER | our env |",
        "|---|---|---|---|---|---|",
    ]
    ours = {task: env for env, task in PAPER_TASK.items() if env in table}
    for task, (metric, on_policy, per, fresh) in PAPER_TABLE_1.items():
        lines.append(
            f"| {task} | {metric} | {on_policy:.3f} | {per:.3f} | {fresh:.3f} | {ours.get(task, '')} |"
        )
    return lines


def _untrained_warning(runs: list[dict[str, Any]], noun: str) -> list[str]:
    """A warning naming the runs in which most iterations trained nothing (0 informative groups)."""
    flagged = [
        f"{run['env'].split('/')[-1]} {run['arm']} seed {run['seed']}"
        for run in runs
        if mostly_untrained(run.get("iterations_without_training", 0), len(run.get("training", [])))
    ]
    if not flagged:
        return []
    return [
        f"**Warning:** most iterations trained nothing (0 informative groups) in: {', '.join(flagged)}. "
        f"Those runs measure the starting model, not the {'replay mode' if noun == 'mode' else noun}.",
        "",
    ]


def _table(table: dict[str, Any], arms: list[Arm], key: str) -> list[str]:
    rows = [
        "| task | " + " | ".join(arm.name for arm in arms) + " |",
        "|---" * (len(arms) + 1) + "|",
    ]
    for env, cells in table.items():
        values = []
        for arm in arms:
            stat = cells.get(arm.label, {}).get(key)
            values.append(
                ""
                if stat is None
                else f"{stat['mean']:.3f} ± {_number(stat['ci95'])} (std {stat['std']:.3f}, n={stat['n']})"
            )
        rows.append(f"| {env} | " + " | ".join(values) + " |")
    return rows


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _tests(table: dict[str, Any], arms: list[Arm], reference: str, noun: str) -> list[str]:
    """The reference arm against each other arm: difference, the test over seeds and its p-value, raw and
    Holm-adjusted over the table, and the difference the run could detect."""
    rows, names = [], []
    for env, cells in table.items():
        for arm in arms:
            test = cells.get(arm.label, {}).get("vs_reference")
            if test is None:
                continue
            for key in ("peak", "final"):
                t = test[key]
                names.append(t["test"])
                gain = cells[arm.label][key]["mean"] - cells[arm.label]["initial"]["mean"]
                effect = proportional_effect(env, arm.label, gain)
                rows.append(
                    f"| {env} | {arm.name} | {key} | {t['difference']:+.3f} | {t['test']} | "
                    f"{_number(t['p_value'])} | {_number(t['p_holm'])} | {_number(t['detectable'])} | "
                    f"{'-' if effect is None else f'{effect:+.3f}'} |"
                )
    if not rows:
        return []
    return [
        f"## {reference} against each {noun} ({' / '.join(dict.fromkeys(names))} over seeds)",
        "",
        f"Difference = {reference} minus the {noun}; the unit is the seed (one value per run). The paired "
        "t-test pairs the two runs of each seed where both ran the same seeds; Welch's t-test compares the "
        "two sets of runs otherwise. Holm p = the p-value adjusted over every test of this table (Holm's "
        "step-down). Detectable = the smallest difference this many seeds would detect at alpha 0.05 with "
        "80% power, given the spread measured here: a difference below it is not separated. Paper's effect = "
        "the difference FreshPER would make over that arm if it helped as in FreshPER's Table 1, in "
        "proportion: the paper's relative gain over the arm times the arm's own gain over the start here "
        "(- where the paper has no such task or reports a score); set it beside the detectable difference.",
        "",
        f"| task | {noun} | success | difference | test | p-value | Holm p | detectable | paper's effect |",
        "|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
    ]


def _replay_table(table: dict[str, Any], arms: list[Arm], noun: str) -> list[str]:
    """The replay batches at the operating point: importance weights, success share, ages, decay."""
    replaying = [
        arm
        for arm in arms
        if any(c.get(arm.label, {}).get("replay", {}).get(REPLAY_METRICS[0]) for c in table.values())
    ]
    if not replaying:
        return []
    rows = [
        "## Replay batches (mean over iterations, then seeds)",
        "",
        "kl_per_age: the per-token KL of a replay batch above the fresh batch's, per iteration of age (the "
        "slope over every seed's iterations, experiments/common/replay_drift.py); tau_from_drift = its "
        "inverse, the decay constant FreshPER's model (Eq. 12-13: KL ~ c x age, tau = 1/c) gives at this "
        'operating point, to set beside the tau the run used (docs/replay.md, "tau in the paper\'s units").',
        "",
        f"| task | {noun} | "
        + " | ".join(key.split("/")[-1] for key in REPLAY_METRICS)
        + " | kl_per_age | tau_from_drift |",
        "|---|---|" + "---|" * (len(REPLAY_METRICS) + 2),
    ]
    for env, cells in table.items():
        for arm in replaying:
            cell = cells.get(arm.label, {})
            values, fitted = cell.get("replay", {}), cell.get("drift") or {}
            shown = [_number(values.get(k)) for k in REPLAY_METRICS]
            shown += [_number(fitted.get("kl_per_age")), _number(fitted.get("tau"))]
            rows.append(f"| {env} | {arm.name} | " + " | ".join(shown) + " |")
    return [*rows, ""]


def _cost_table(table: dict[str, Any], arms: list[Arm], noun: str) -> list[str]:
    """Wall minutes and peak resident memory per run, mean over seeds with the range."""
    rows = [
        f"## Cost per {noun} (mean over seeds; range)",
        "",
        "Wall time: the run from building its algorithm to stopping it, evaluations included. Peak RSS: this "
        f"process's resident memory sampled every {SAMPLE_INTERVAL_S:g} s during the run "
        "(experiments/common/peak_memory.py); Ray actors (num_env_runners > 0) are other processes and not "
        "counted; n/a where it was not measured (no /proc on the machine, or a run saved before runs "
        "recorded it).",
        "",
        f"| task | {noun} | wall min per run | peak RSS GiB |",
        "|---|---|---|---|",
    ]
    for env, cells in table.items():
        for arm in arms:
            cost = cells.get(arm.label, {}).get("cost")
            if cost is not None:
                wall, peak = cost["wall_s"], cost["peak_rss_gib"]
                rows.append(f"| {env} | {arm.name} | {_range(wall, 1 / 60, 1)} | {_range(peak, 1, 2)} |")
    return [*rows, ""]


def _range(spread: dict[str, Any] | None, scale: float, digits: int) -> str:
    """ "mean (min-max)" of a :func:`measured_range` in ``scale`` units, and how many runs were measured
    where not all were; n/a for None."""
    if spread is None:
        return "n/a"
    mean, low, high = (spread[key] * scale for key in ("mean", "min", "max"))
    partial = "" if spread["n"] == spread["of"] else f", {spread['n']} of {spread['of']} runs"
    return f"{mean:.{digits}f} ({low:.{digits}f}-{high:.{digits}f}{partial})"


def plot_curves(table: dict[str, Any], output: Path, names: dict[str, str]) -> list[Path]:
    """One PNG per env: validation success over iterations, mean per arm (``names``: its legend entry) and
    the range over seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from experiments.common.plots import style_iteration_axis

    paths = []
    for env, cells in table.items():
        fig, ax = plt.subplots(figsize=(6, 4))
        for arm, cell in cells.items():
            curve = cell["curve"]
            (line,) = ax.plot(
                curve["iteration"], curve["mean"], marker="o", markersize=3, label=names.get(arm, arm)
            )
            ax.fill_between(
                curve["iteration"], curve["min"], curve["max"], color=line.get_color(), alpha=0.15
            )
        ax.set_title(f"{env}: validation success\n(mean over seeds; band: range over seeds)", fontsize=10)
        style_iteration_axis(ax, "validation success")
        ax.set_ylim(-0.02, 1.02)
        fig.tight_layout()
        path = output / f"curves-{env.split('/')[-1]}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)
    return paths


def write_report(
    args: argparse.Namespace,
    output: Path,
    jobs: list[tuple[str, Arm, int]],
    finished: dict[int, dict[str, Any]],
    record: dict[str, Any],
) -> tuple[str, dict[str, Any]]:
    """``comparison.md``, the plots and ``results.json`` of the finished runs (``finished``: job index ->
    run), headed by the runs still missing when some are; returns the report's text and the aggregate."""
    output.mkdir(parents=True, exist_ok=True)
    runs = [finished[index] for index in sorted(finished)]
    missing = [jobs[index] for index in range(len(jobs)) if index not in finished]
    table = aggregate(runs, args.reference)
    text = markdown(args, table, runs, record["command"], missing=missing)
    (output / "comparison.md").write_text(text)
    names = {arm.label: arm.name for arm in args.arms}
    if runs:
        plot_curves(table, output, names)
        learning_diagnostics.plot(runs, output, names)
    results = {
        "provenance": record,
        "arms": [arm.label for arm in args.arms],
        "reference": args.reference,
        "envs": args.envs,
        "planned_runs": len(jobs),
        "missing": [{"env": env, "arm": arm.label, "seed": seed} for env, arm, seed in missing],
        "aggregate": table,
        "diagnostics": learning_diagnostics.diagnostics(runs),
        "runs": runs,
    }
    (output / "results.json").write_text(dumps(results, indent=1))
    return text, table
