"""On-policy vs standard PER vs FreshPER (and its polynomial variant): ``python -m experiments.compare``.

``--modes`` also takes ``freshper+backfill``: FreshPER with replay as backfill, tested against FreshPER like
every other mode.

For every (seed, env, mode) it builds DAPO with ``experiments.common.run_config.build_config`` (the env's
settings file, then the options of ``experiments.sweep``: ``--model``, by default the tiny model warm-started
on the env; ``--algorithm``, ``--scale``, ``--set key=value`` and the workload options; 3 iterations evaluated
every iteration on 16 tasks unless the options say otherwise), measures validation success before training
(``DAPO.evaluate_policy``) and inside training every ``--eval-every`` iterations (RLlib's
``evaluation_interval``; the last iteration always), then stops the algorithm. Validation success is the mean
success of ``--eval-samples`` episode(s) on each of the first ``--eval-tasks`` tasks of the validation split
(``envs/seeds.py``), sampled with the training settings; the same tasks for every run.

The runs are sequential, in this process: each builds its algorithm, trains, evaluates and stops, while Ray
(started once) and the imported torch / vLLM stay up. Tune trials would each start a fresh worker process
(imports and engine start again) for no gain on a machine that runs one trial at a time; the sweep
(``experiments.sweep``) is where Tune pays off.

Output, in ``--output`` (default ``results/compare-<time>``):
  ``runs/<env>__<mode>__seed<k>.json``  one finished run (curve, per-iteration training metrics, settings);
      written when the run ends, and skipped when the command is rerun with the same ``--output``, so an
      interrupted comparison resumes where it stopped (a run saved with other settings is an error);
  ``comparison.md``  FreshPER's Table 1 layout: rows = tasks, columns = modes, cell = peak validation success
      (the maximum over the evaluations after training started) as mean +- 95% t interval over seeds (and the
      standard deviation); the final success the same way; Welch's t-test of FreshPER against each other mode
      with the smallest difference the run could detect; the replay metrics (importance weights, success
      share, ages, decay of the oldest item, dual-clip fraction); the paper's Table 1 beside it for reference;
  ``curves-<env>.png``  validation success over iterations, mean per mode with the range over seeds;
  ``results.json``  its provenance (``experiments/common/results_json.py``), every run's raw numbers and the
      aggregates.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from algorithms.replay import REPLAY_MODES
from experiments.common.ray_session import start_ray
from experiments.common.results_json import dtype_record, dumps, git_state, provenance
from experiments.common.run_config import DEFAULT_ENV, RunSettings, build_config
from experiments.common.run_options import add_aliases, check_env_id
from experiments.common.training_metrics import MOSTLY_UNTRAINED_SHARE, flatten, trained_nothing
from experiments.common.workload import add_workload_args, workload_config, workload_settings

PROG = "python -m experiments.compare"
MODE_LABELS = {
    "on_policy": "on-policy",
    "per": "standard PER",
    "freshper": "FreshPER",
    "freshper_poly": "FreshPER (polynomial decay)",
}
# FreshPER's Table 1 (peak performance; REINFORCE++ backbone), as the authors' repository reports it:
# task -> (metric, on-policy, standard PER, FreshPER).
# Arms beyond the replay modes: a replay mode with DAPOConfig keys on top. FreshPER with replay as backfill
# (a short batch filled from the buffer instead of training short).
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "freshper+backfill": ("freshper", {"replay_backfill": True}),
}
MODE_LABELS["freshper+backfill"] = "FreshPER + replay backfill"
COMPARE_MODES = (*REPLAY_MODES, *VARIANTS)
PAPER_TABLE_1: dict[str, tuple[str, float, float, float]] = {
    "NQ Search (LLM)": ("exact match", 0.508, 0.336, 0.742),
    "AIME (LLM)": ("success", 0.205, 0.168, 0.242),
    "Sokoban Simple (LLM)": ("score", 0.493, -0.907, 2.304),
    "Sokoban Hard (LLM)": ("score", -0.842, -0.847, -0.512),
    "FrozenLake (LLM)": ("success", 0.297, 0.281, 0.305),
    "FrozenLake (VLM)": ("success", 0.270, 0.250, 0.630),
    "GeoQA (VLM)": ("success", 0.475, 0.447, 0.481),
}
# The paper's task closest to each freshrl env.
PAPER_TASK = {
    "freshrl/NQSearch-v0": "NQ Search (LLM)",
    "freshrl/Math-v0": "AIME (LLM)",
    "freshrl/Sokoban-v0": "Sokoban Simple (LLM)",
    "freshrl/SokobanHard-v0": "Sokoban Hard (LLM)",
    "freshrl/FrozenLake-v0": "FrozenLake (LLM)",
    "freshrl/FrozenLakeVision-v0": "FrozenLake (VLM)",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument(
        "--envs", nargs="+", default=[DEFAULT_ENV], help="gymnasium ids (default %(default)s)"
    )
    parser.add_argument(
        "--modes",
        nargs="+",
        default=list(REPLAY_MODES),
        choices=COMPARE_MODES,
        help="replay modes, and freshper+backfill (FreshPER with --set replay_backfill=true); default: the "
        "replay modes",
    )
    parser.add_argument("--seeds", type=int, default=2, help="training seeds 0..n-1 per (env, mode)")
    add_aliases(parser, ("--tau",))
    parser.add_argument("--output", default=None, help="results folder (default results/compare-<time>)")
    add_workload_args(parser)
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error(f"--seeds must be >= 1, got {args.seeds}")
    for env in args.envs:
        check_env_id(env)
        try:
            build_config(run_settings(args, env))
        except ValueError as error:
            raise SystemExit(f"{PROG}: {error}") from None
    args.run = run_settings(args, args.envs[0])  # what every run shares (the report's header)
    args.config = build_config(args.run)
    return args


def run_settings(args: argparse.Namespace, env: str, mode: str | None = None, seed: int = 0) -> RunSettings:
    """The settings of the run (env, mode, seed); a variant is its replay mode plus its keys."""
    replay, keys = VARIANTS.get(mode, (mode, {}))
    chosen = {"seed": seed, **({} if replay is None else {"replay_mode": replay}), **keys}
    return workload_settings(PROG, args, env=env, overrides=chosen)


def run_path(output: Path, env: str, mode: str, seed: int) -> Path:
    return output / "runs" / f"{env.split('/')[-1]}__{mode}__seed{seed}.json"


def saved_settings(settings: RunSettings, config) -> dict[str, Any]:
    """What a saved run must share with the current command to be reused: its settings and the model
    actually used (the default model may change)."""
    return json.loads(dumps({**dataclasses.asdict(settings), "model_path": config.model_path}))


def load_finished(path: Path, settings: dict[str, Any]) -> dict[str, Any] | None:
    """The saved run at ``path`` (None when absent); an error when it was made with other settings."""
    if not path.exists():
        return None
    run = json.loads(path.read_text())
    if run["settings"] != settings:
        raise SystemExit(
            f"compare: {path} was run with {run['settings']}, not {settings}; use another --output"
        )
    return run


def curve_point(iteration: int, metrics: dict[str, Any]) -> dict[str, Any]:
    """One evaluation of a run's curve: its success and episodes, and every metric of it."""
    return {
        "iteration": iteration,
        "success": metrics["success"],
        "episodes": metrics["num_episodes"],
        "metrics": metrics,
    }


def train_and_evaluate(run: RunSettings, config, settings: dict[str, Any], mode: str) -> dict[str, Any]:
    """One run of ``config``: build, evaluate, train (evaluated inside training, with a progress bar: a
    SmolLM2 run takes a quarter of an hour), stop."""
    from models.progress import Progress

    started = time.perf_counter()
    commit, dirty = git_state()
    algo = config.build_algo()
    try:
        curve = [curve_point(0, algo.evaluate_policy())]
        training = []
        label = f"{config.env.split('/')[-1]} {mode} seed {config.seed}"
        with Progress(range(1, run.iterations + 1), desc=label, unit="it") as bar:
            for iteration in bar:
                result = algo.train()
                if "evaluation" in result:
                    curve.append(curve_point(iteration, result["evaluation"]))
                    success = curve[-1]["success"]
                    bar.write(f"{label}, iteration {iteration}: validation success {success:.3f}")
                training.append(
                    flatten({k: v for k, v in result.items() if k not in ("config", "evaluation")})
                )
        if curve[-1]["iteration"] != run.iterations:  # the last iteration is off the evaluation interval
            curve.append(curve_point(run.iterations, algo.evaluate_policy()))
    finally:
        algo.stop()
    trained = [point["success"] for point in curve if point["iteration"] > 0]
    return {
        "env": config.env,
        "mode": mode,
        "seed": config.seed,
        "tau": config.tau,
        "age_unit": config.replay_age_unit,
        "settings": settings,
        "curve": curve,
        "initial": curve[0]["success"],
        "peak": max(trained),
        "final": trained[-1],
        "training": training,
        "iterations_without_training": sum(trained_nothing(flat) for flat in training),
        "wall_s": time.perf_counter() - started,
        "dtypes": dtype_record(config),
        # A comparison resumed in later sessions can gather runs made by different code: each says which.
        "commit": commit,
        "dirty": dirty,
    }


def save_run(path: Path, run: dict[str, Any]) -> None:
    """Write atomically, so an interrupted write never leaves a run that looks finished."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".json.partial")
    partial.write_text(dumps(run, indent=1))
    os.replace(partial, path)


# ---------------------------------------------------------------------------------------------------------
def aggregate(runs: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """{env: {mode: mean / std over seeds of peak, final and initial success, and the mean curve}}."""
    table: dict[str, dict[str, dict[str, Any]]] = {}
    for env in dict.fromkeys(run["env"] for run in runs):
        for mode in dict.fromkeys(run["mode"] for run in runs):
            cell = [run for run in runs if run["env"] == env and run["mode"] == mode]
            if not cell:
                continue
            iterations = [point["iteration"] for point in cell[0]["curve"]]
            curves = np.array([[point["success"] for point in run["curve"]] for run in cell])
            table.setdefault(env, {})[mode] = {
                "seeds": sorted(run["seed"] for run in cell),
                **{key: _mean_std([run[key] for run in cell]) for key in ("peak", "final", "initial")},
                "curve": {
                    "iteration": iterations,
                    "mean": curves.mean(axis=0).tolist(),
                    "min": curves.min(axis=0).tolist(),
                    "max": curves.max(axis=0).tolist(),
                },
                "replay": {key: _run_mean(cell, key) for key in REPLAY_METRICS},
            }
        if REFERENCE_MODE in table.get(env, {}):
            cells = table[env]
            reference = [run for run in runs if run["env"] == env and run["mode"] == REFERENCE_MODE]
            for mode in cells:
                if mode == REFERENCE_MODE:
                    continue
                other = [run for run in runs if run["env"] == env and run["mode"] == mode]
                cells[mode]["vs_freshper"] = {
                    key: welch_test([r[key] for r in reference], [r[key] for r in other])
                    for key in ("peak", "final")
                }
    return table


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
REFERENCE_MODE = "freshper"  # the mode every other one is tested against


def _run_mean(cell: list[dict[str, Any]], suffix: str) -> float | None:
    """Mean over seeds of each run's mean over iterations of the metric ending in ``suffix`` (None: never
    logged, e.g. replay metrics on-policy). NaN, and its JSON form null in a run loaded from disk (an
    iteration that did not log the metric), are skipped."""
    per_run = []
    for run in cell:
        values = [
            v
            for flat in run.get("training", [])
            for k, v in flat.items()
            if k.endswith(suffix) and v is not None and v == v
        ]
        if values:
            per_run.append(float(np.mean(values)))
    return float(np.mean(per_run)) if per_run else None


def _mean_std(values: list[float]) -> dict[str, float]:
    """Mean, standard deviation and the half-width of the 95% t interval of the mean over seeds."""
    from scipy import stats

    n = len(values)
    std = float(np.std(values, ddof=1)) if n > 1 else 0.0
    half = float(stats.t.ppf(0.975, n - 1) * std / np.sqrt(n)) if n > 1 else None  # no interval from 1 seed
    return {"mean": float(np.mean(values)), "std": std, "n": n, "ci95": half}


def welch_test(a: list[float], b: list[float]) -> dict[str, float | None]:
    """Welch's two-sided t-test of mean(a) - mean(b) over seeds, with the run's power: the smallest
    difference it would detect at alpha 0.05 with 80% power, (t_0.975 + t_0.8) x the standard error."""
    from scipy import stats

    if len(a) < 2 or len(b) < 2:
        return {"difference": float(np.mean(a) - np.mean(b)), "p_value": None, "detectable": None}
    va, vb = np.var(a, ddof=1) / len(a), np.var(b, ddof=1) / len(b)
    se = float(np.sqrt(va + vb))
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1)) if se > 0 else len(a) + len(b) - 2
    p = float(stats.ttest_ind(a, b, equal_var=False).pvalue) if se > 0 else (1.0 if a == b else 0.0)
    detectable = float((stats.t.ppf(0.975, df) + stats.t.ppf(0.8, df)) * se)
    return {"difference": float(np.mean(a) - np.mean(b)), "p_value": p, "detectable": detectable}


def _commits_sentence(runs: list[dict[str, Any]]) -> str:
    """Which code made the runs, when a resumed comparison gathered runs from more than one commit (or from
    uncommitted changes); empty otherwise. Runs saved before runs recorded their commit count as unknown."""
    made_by: dict[str, int] = {}
    for run in runs:
        commit, dirty = run.get("commit"), run.get("dirty")
        label = "unknown" if commit is None else commit[:7] + (" with uncommitted changes" if dirty else "")
        made_by[label] = made_by.get(label, 0) + 1
    if len(made_by) == 1 and not any(run.get("dirty") for run in runs):
        return ""
    counts = ", ".join(f"{count} at {label}" for label, count in made_by.items())
    return f" The runs were made by more than one state of the code: {counts}."


def markdown(
    args: argparse.Namespace, table: dict[str, Any], runs: list[dict[str, Any]], command: str
) -> str:
    modes = [mode for mode in args.modes if any(mode in cells for cells in table.values())]
    taus = sorted({run["tau"] for run in runs if run["mode"] in ("freshper", "freshper_poly")})
    age_units = ", ".join(sorted({run.get("age_unit", "optimizer_steps") for run in runs}))
    wall = sum(run["wall_s"] for run in runs)
    models = ", ".join(
        sorted({run["settings"]["model_path"] or "the default model (model_path None)" for run in runs})
    )
    lines = [
        f"# {' vs '.join(MODE_LABELS[mode] for mode in modes)} (DAPO, {args.run.resolved_scale} scale)",
        "",
        f"Command: `{command}`",
        "",
        f"{args.run.iterations} DAPO iterations per run; seeds {args.seeds}; validation success = mean "
        f"success of {args.config.evaluation_samples_per_task} episode(s) on each of "
        f"{args.config.evaluation_num_tasks} validation tasks, measured before training and every "
        f"{args.config.evaluation_interval or args.run.iterations} iteration(s). "
        f"FreshPER tau = {', '.join(f'{t:g}' for t in taus) or 'n/a'} (age in "
        f"{age_units}). Model: {models}. Total run time {wall / 60:.1f} min. The FreshPER paper's "
        "reference code also counts ages in training iterations (a rollout batch and its update), with tau "
        "500 (1000 on FrozenLake) over runs of thousands of iterations; docs/replay.md (FreshPER at the "
        "operating point) compares the two operating points." + _commits_sentence(runs),
        "",
        "## Peak validation success (mean ± 95% interval over seeds; std)",
        "",
        *_table(table, modes, "peak"),
        "",
        "## Final validation success (mean ± 95% interval over seeds; std)",
        "",
        *_table(table, modes, "final"),
        "",
        *_tests(table, modes),
        *_replay_table(table, modes),
        "Validation success before training (all modes start from the same model): "
        + ", ".join(
            f"{env.split('/')[-1]} {np.mean([run['initial'] for run in runs if run['env'] == env]):.3f}"
            for env in table
        ),
        "",
        *_untrained_warning(runs),
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
    return "\n".join(lines) + "\n"


def _untrained_warning(runs: list[dict[str, Any]]) -> list[str]:
    """A warning naming the runs in which most iterations trained nothing (0 informative groups)."""
    flagged = [
        f"{run['env'].split('/')[-1]} {run['mode']} seed {run['seed']}"
        for run in runs
        if run.get("iterations_without_training", 0) > MOSTLY_UNTRAINED_SHARE * len(run.get("training", []))
    ]
    if not flagged:
        return []
    return [
        f"**Warning:** most iterations trained nothing (0 informative groups) in: {', '.join(flagged)}. "
        "Those runs measure the starting model, not the replay mode.",
        "",
    ]


def _table(table: dict[str, Any], modes: list[str], key: str) -> list[str]:
    rows = [
        "| task | " + " | ".join(MODE_LABELS[mode] for mode in modes) + " |",
        "|---" * (len(modes) + 1) + "|",
    ]
    for env, cells in table.items():
        values = []
        for mode in modes:
            stat = cells.get(mode, {}).get(key)
            values.append(
                ""
                if stat is None
                else f"{stat['mean']:.3f} ± {_number(stat['ci95'])} (std {stat['std']:.3f}, n={stat['n']})"
            )
        rows.append(f"| {env} | " + " | ".join(values) + " |")
    return rows


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _tests(table: dict[str, Any], modes: list[str]) -> list[str]:
    """FreshPER against each other mode: difference, Welch p-value and the difference the run could detect."""
    rows = []
    for env, cells in table.items():
        for mode in modes:
            test = cells.get(mode, {}).get("vs_freshper")
            if test is None:
                continue
            for key in ("peak", "final"):
                t = test[key]
                rows.append(
                    f"| {env} | {MODE_LABELS[mode]} | {key} | {t['difference']:+.3f} | "
                    f"{_number(t['p_value'])} | {_number(t['detectable'])} |"
                )
    if not rows:
        return []
    return [
        "## FreshPER against each mode (Welch's t-test over seeds)",
        "",
        "Difference = FreshPER minus the mode. Detectable = the smallest difference this many seeds would "
        "detect at alpha 0.05 with 80% power, given the spread measured here: a difference below it is not "
        "separated.",
        "",
        "| task | mode | success | difference | p-value | detectable |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
    ]


def _replay_table(table: dict[str, Any], modes: list[str]) -> list[str]:
    """The replay batches at the operating point: importance weights, success share, ages, decay."""
    replay_modes = [
        m for m in modes if any(c.get(m, {}).get("replay", {}).get(REPLAY_METRICS[0]) for c in table.values())
    ]
    if not replay_modes:
        return []
    rows = [
        "## Replay batches (mean over iterations, then seeds)",
        "",
        "| task | mode | " + " | ".join(key.split("/")[-1] for key in REPLAY_METRICS) + " |",
        "|---|---|" + "---|" * len(REPLAY_METRICS),
    ]
    for env, cells in table.items():
        for mode in replay_modes:
            values = cells.get(mode, {}).get("replay", {})
            shown = [_number(values.get(k)) for k in REPLAY_METRICS]
            rows.append(f"| {env} | {MODE_LABELS[mode]} | " + " | ".join(shown) + " |")
    return [*rows, ""]


def plot_curves(table: dict[str, Any], output: Path) -> list[Path]:
    """One PNG per env: validation success over iterations, mean per mode and the range over seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    paths = []
    for env, cells in table.items():
        fig, ax = plt.subplots(figsize=(6, 4))
        for mode, cell in cells.items():
            curve = cell["curve"]
            (line,) = ax.plot(
                curve["iteration"], curve["mean"], marker="o", markersize=3, label=MODE_LABELS[mode]
            )
            ax.fill_between(
                curve["iteration"], curve["min"], curve["max"], color=line.get_color(), alpha=0.15
            )
        ax.set_title(f"{env}: validation success\n(mean over seeds; band: range over seeds)", fontsize=10)
        ax.set_xlabel("training iteration")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel("validation success")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        path = output / f"curves-{env.split('/')[-1]}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)
    return paths


# ---------------------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> dict[str, Any]:
    from experiments.common.quiet_logs import LOG_FILE_NAME, install, worker_runtime_env

    args = parse_args(argv)
    record = provenance(PROG, argv)
    output = Path(args.output or f"results/compare-{time.strftime('%Y%m%d-%H%M%S')}")
    log_file = install(output / LOG_FILE_NAME)
    jobs = [(env, mode, seed) for seed in range(args.seeds) for env in args.envs for mode in args.modes]
    runs, ran, skipped = [], [], []
    for index, (env, mode, seed) in enumerate(jobs, start=1):
        run_of = run_settings(args, env, mode, seed)
        config = workload_config(run_of, PROG)
        settings = saved_settings(run_of, config)
        path = run_path(output, env, mode, seed)
        run = load_finished(path, settings)
        if run is None:
            start_ray(runtime_env=worker_runtime_env(log_file))
            run = train_and_evaluate(run_of, config, settings, mode)
            save_run(path, run)
            ran.append(path)
        else:
            skipped.append(path)
        runs.append(run)
        status = "done" if path in ran else "already done, skipped"
        print(
            f"[{index}/{len(jobs)}] {env} {mode} seed {seed}: peak {run['peak']:.3f}, "
            f"final {run['final']:.3f} ({status}, {run['wall_s']:.0f} s)"
        )

    table = aggregate(runs)
    text = markdown(args, table, runs, record["command"])
    (output / "comparison.md").write_text(text)
    plots = plot_curves(table, output)
    results = {"provenance": record, "modes": args.modes, "envs": args.envs, "aggregate": table, "runs": runs}
    (output / "results.json").write_text(dumps(results, indent=1))
    print(text)
    print(f"wrote {output / 'comparison.md'}, {output / 'results.json'}, {', '.join(map(str, plots))}")
    return {"output": output, "ran": ran, "skipped": skipped, "aggregate": table}


if __name__ == "__main__":
    main()
