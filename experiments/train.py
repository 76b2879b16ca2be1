"""Train DAPO (+ FreshPER) on a freshrl env: ``python -m experiments.train``.

Settings come from a settings file (``experiments/settings/*.yaml``, one per env, the fields of
``experiments.common.run_config.RunSettings``; ``--settings`` names one, else the one for ``--env`` and
``--model``, else ``frozen_lake.yaml``), and the command line overrides them: ``--set key=value`` for any
DAPOConfig or run key, and its aliases (``--algorithm``, ``--scale``, ``--replay``, ``--tau``, ``--eps-high``,
``--iterations``, ...; docs/configuration.md).

Evaluates the starting policy on validation tasks (``DAPO.evaluate_policy``), trains for ``--iterations``
with a live progress bar, evaluating inside training every ``--eval-every`` iterations (RLlib's
``evaluation_interval``; the last iteration always), and writes a results folder: ``metrics.csv`` (one row
per iteration, ``evaluation/...`` where evaluated), ``curves.png`` (DAPO's monitoring curves and success),
``summary.json`` (the evaluations before and after: success with its 95% interval and per-task outcomes,
pass@k, return, format-valid rate, turns, response length; the settings; how many iterations trained
nothing; the provenance, ``experiments/common/results_json.py``), ``checkpoint/`` (resume with
``--resume``) and ``run.log`` (every log record; the console shows the run's lines and real warnings,
``experiments/common/quiet_logs.py``).

``--env`` takes a registered id or Gymnasium's ``module:ns/Name-v0``, which imports ``module`` first (in every
process), so an env registered in a module of one's own trains without editing freshrl
(docs/adding_an_env.md). Without ``--model``, the tiny model is warm-started on the env's oracle first
(``--warm-start-steps N`` sets its length, ``--no-warm-start`` skips it); ``--model M --warm-start-steps
N`` warm-starts M the same way.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from experiments.common import disk_space, run_loop
from experiments.common.allocator import describe
from experiments.common.checkpoints import TOP_METADATA, restore
from experiments.common.run_config import (
    RunSettings,
    SettingsError,
    build_config,
    default_settings_file,
    explain_config,
    starting_model,
)
from experiments.common.run_options import (
    add_algorithm_options,
    add_aliases,
    add_model_options,
    add_run_options,
    add_settings_option,
    base_settings,
    check_env_id,
    settings_from_args,
)
from experiments.common.significance import change_sentence, success_change, success_line
from experiments.common.training_metrics import pick, trained_nothing

if TYPE_CHECKING:
    from tqdm import tqdm

    from algorithms.dapo import DAPOConfig

PROG = "python -m experiments.train"
ENTRY_POINT = "entry point experiments.train"  # the layer of what this command itself sets
NOTHING_TRAINED = "0 informative groups: nothing trained this iteration"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line; ``args.run`` is the run's :class:`RunSettings` (the settings file, then the
    options), checked by building its config once (cheap: nothing is loaded)."""
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    add_settings_option(parser)
    parser.add_argument("--env", default=None, help="registered gymnasium id or module:ns/Name-v0")
    add_model_options(parser)
    add_algorithm_options(parser)
    add_aliases(parser, ("--replay", "--tau", "--eps-high", "--seed"))
    add_run_options(parser)
    parser.add_argument("--output", default=None, help="results folder (default results/<env>-<time>)")
    parser.add_argument("--resume", default=None, help="checkpoint folder to continue from")
    parser.add_argument(
        "--explain-config",
        action="store_true",
        help="print every setting's value and the layer that set it (defaults, algorithm, scale, settings "
        "file, command line, entry point), then exit without running",
    )
    args = parser.parse_args(argv)
    if args.resume and not (Path(args.resume) / TOP_METADATA).is_file():
        parser.error(
            f"--resume {args.resume} is not a checkpoint folder (it has no {TOP_METADATA}); give the "
            "checkpoint folder of a run's output (<output>/checkpoint)"
        )
    base = base_settings(PROG, args.settings, args.env, args.model)
    args.run = settings_from_args(PROG, args, base)
    check_env_id(args.run.env)
    file = args.settings or default_settings_file(args.run.env, args.model)
    args.settings_file = None if file is None else str(file)
    try:
        args.config = build_config(args.run)
    except ValueError as error:
        raise SystemExit(f"{PROG}: {error}") from None
    return args


def run_config(settings: RunSettings, model: str | None, evaluation_interval: int | None) -> DAPOConfig:
    """The run's config: the settings' layers, then this entry point's own (the starting model; with no
    ``evaluation_interval``, RLlib evaluates on the run's last iteration only)."""
    every = evaluation_interval or settings.iterations
    return build_config(settings, {"model_path": model, "evaluation_interval": every}, ENTRY_POINT)


def explain_lines(explained: dict[str, dict[str, Any]]) -> list[str]:
    """``explain_config``'s record as aligned lines, ``key = value  (layer)``, the run's keys first."""
    width = max(len(key) for key in explained)
    values = {key: json.dumps(row["value"], default=repr) for key, row in explained.items()}
    value_width = min(max(len(value) for value in values.values()), 40)
    return [
        f"{key:<{width}} = {values[key]:<{value_width}}  ({row['layer']})" for key, row in explained.items()
    ]


# Progress-bar fields: (name, metric suffix, format). Episode return, success and the invalid-output rate come
# from every rollout; the others exist only when something was trained or an env reports them.
POSTFIX = (
    ("return", "rollout/episode_return_mean", "{:.2f}"),
    ("invalid", "rollout/invalid_output_rate", "{:.2f}"),
    ("success", "rollout/success", "{:.2f}"),
    ("len", "rollout/response_length_mean", "{:.0f}"),
    ("entropy", "train/entropy", "{:.2f}"),
    ("tok_s", "rollout/tokens_per_s", "{:.0f}"),
)


def progress_postfix(flat: dict[str, float], untrained: int) -> dict[str, str]:
    """The progress bar's fields: the metrics this iteration has (never "nan"), and when it trained nothing,
    that, with how many iterations so far trained nothing."""
    fields = {}
    for name, suffix, form in POSTFIX:
        value = pick(flat, suffix)
        if math.isfinite(value):
            fields[name] = form.format(value)
    if trained_nothing(flat):
        fields["note"] = NOTHING_TRAINED
    if untrained:
        fields["untrained_its"] = str(untrained)
    return fields


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if args.explain_config:
        # The starting model is resolved (and a warm start trained) only when the run starts.
        explained = explain_config(
            args.run, run_config(args.run, args.run.model, args.config.evaluation_interval)
        )
        print("\n".join(explain_lines(explained)))
        print(
            "model_path is the starting model, resolved when the run starts: the model, warm-started where "
            "warm_start_steps is set, or (no model) the tiny model warm-started on the env"
        )
        return {"config_layers": explained}
    from experiments.common.plots import plot_training_curves
    from experiments.common.quiet_logs import LOG_FILE_NAME, install, worker_runtime_env
    from experiments.common.ray_session import start_ray
    from experiments.common.results_json import dtype_record, provenance, write_json

    settings: RunSettings = args.run
    output = Path(args.output or f"results/{settings.env.split('/')[-1]}-{time.strftime('%Y%m%d-%H%M%S')}")
    log_file = install(output / LOG_FILE_NAME)
    if settings.model is None:
        what = "warm-starting the tiny model" if settings.warm_start else "the untrained tiny model"
        print(f"freshrl: no --model; {what} on {settings.env} (built once, then cached)")
    elif settings.warm_start_steps is not None:
        print(
            f"freshrl: warm-starting {settings.model} on {settings.env} for {settings.warm_start_steps} "
            "steps (built once, then cached)"
        )
    # The commit is the one checked out when the run starts: a warm start can take a quarter of an hour.
    record = provenance(PROG, argv)
    try:
        model = starting_model(settings)
    except SettingsError as error:
        raise SystemExit(f"freshrl: {error}") from None
    print(f"freshrl: starting from {model}; {describe()}")
    config = run_config(settings, model, args.config.evaluation_interval)
    dtypes = record["dtypes"] = dtype_record(config)
    print(
        f"freshrl: learner dtype {dtypes['model_dtype_reason']}; engine dtype {dtypes['engine_dtype_reason']}"
    )
    print(
        f"freshrl: training {settings.algorithm} + {config.replay_mode} at the {settings.resolved_scale} "
        f"scale on {settings.env}; results in {output}, full log in {log_file}"
    )
    checkpoint_size = disk_space.checkpoint_bytes(model, config.lora_rank)
    needed = disk_space.check_free_space(PROG, output, checkpoint_size, 1, "give --output on a roomier disk")
    # A full disk mid-run ends the run with a message; metrics.csv keeps the iterations written before it.
    disk_full = functools.partial(
        disk_space.exit_when_full,
        PROG,
        output,
        needed,
        f"{output / 'metrics.csv'} holds the iterations trained so far. Free space (or give --output on "
        "another disk) and run again; a checkpoint cut short there cannot be resumed: delete it.",
    )
    start_ray(runtime_env=worker_runtime_env(log_file))
    algo = config.build_algo()
    if args.resume:
        fix = (
            f"Delete {Path(args.resume).resolve()} and give --resume an earlier run's checkpoint, or start "
            "afresh without --resume."
        )
        restore(PROG, algo, args.resume, fix)
        print(f"resumed from {args.resume} at iteration {algo.iteration}")

    csv_path = output / "metrics.csv"

    def report_evaluation(iteration: int, metrics: dict[str, Any], bar: tqdm | None) -> None:
        if bar is None:  # before training: the bar is not open yet
            print(f"success before: {success_line(metrics)}")
        else:
            bar.write(f"iteration {iteration}: validation success {success_line(metrics)}")

    def after_iteration(iteration: int, run: run_loop.TrainedRun, bar: tqdm) -> None:
        row = run.rows[-1]
        if trained_nothing(row):
            bar.write(
                f"iteration {iteration}: {NOTHING_TRAINED} (no group of "
                f"{pick(row, 'rollout/groups_sampled'):.0f} sampled had mixed outcomes; {run.untrained} of "
                f"{iteration} iterations so far)"
            )
        bar.set_postfix(progress_postfix(row, run.untrained))
        with disk_full():
            _write_csv(csv_path, run.rows)

    # Iterations and evaluations count from this run's start, a resumed run's too.
    run = run_loop.train_iterations(
        algo,
        settings.iterations,
        "train",
        evaluation_in_rows=True,
        on_evaluation=report_evaluation,
        after_iteration=after_iteration,
    )
    rows, evaluations, untrained = run.rows, run.evaluations, run.untrained
    before, after = evaluations[0], evaluations[settings.iterations]
    print(f"success after:  {success_line(after)}")
    print(change_sentence(before, after))
    with disk_full():
        checkpoint = algo.save_to_path(str((output / "checkpoint").resolve()))
    mostly_untrained = run_loop.mostly_untrained(untrained, len(rows))
    warning = f"{untrained} of {len(rows)} iterations trained nothing" if mostly_untrained else None
    validation = {iteration: metrics["success"] for iteration, metrics in evaluations.items()}
    plot_training_curves(rows, output / "curves.png", validation, warning)
    summary = {
        "settings_file": args.settings_file,
        **settings.as_record(),
        "model": model,
        "scale": settings.resolved_scale,
        "replay_mode": config.replay_mode,
        "seed": config.seed,
        "evaluation_num_tasks": config.evaluation_num_tasks,
        "evaluation_samples_per_task": config.evaluation_samples_per_task,
        "evaluation_interval": config.evaluation_interval,
        "before": before,
        "after": after,
        "change": success_change(before, after),
        "evaluations": [{"iteration": i, **metrics} for i, metrics in sorted(evaluations.items())],
        "iterations_without_training": untrained,
        "mostly_untrained": mostly_untrained,
        "checkpoint": str(checkpoint),
        "config_layers": explain_config(settings, config),
        "provenance": record,
    }
    with disk_full():
        write_json(output / "summary.json", summary)
    if mostly_untrained:
        print(
            f"WARNING: {untrained} of {len(rows)} iterations trained nothing (0 informative groups: every "
            "sample of each task got the same reward). The checkpoint is (almost) the starting model. Start "
            "from a model that sometimes succeeds: a longer --warm-start-steps, an oracle_responses() that "
            "solves more tasks, an easier env_config, or --model."
        )
    algo.stop()
    print(f"wrote {csv_path}, {output / 'curves.png'}, {output / 'summary.json'}, {checkpoint}")
    return summary


def _write_csv(path: Path, rows: list[dict[str, float]]) -> None:
    """Rewrites ``path`` whole, atomically: a write cut short (a full disk) leaves the previous file."""
    import csv

    columns = sorted({key for row in rows for key in row})
    partial = path.with_name(f".{path.name}.partial")
    try:
        with partial.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=columns)
            writer.writeheader()
            writer.writerows(rows)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
