"""Benchmark a policy on the agentic env suite: ``python -m experiments.evaluate``.

Evaluates a model on every env of the suite (FrozenLake, FrozenLakeVision, Sokoban, Math, NQSearch) or on
those ``--envs`` names: ``--tasks`` tasks of the ``--split`` (validation or test; the first N of the split,
``envs/seeds.py``), ``--samples`` episodes each, through the algorithm's own evaluation
(``DAPO.evaluate_policy``) with each env's settings file built by
``experiments.common.run_config.build_config`` (so the prompts, turn budgets and sampling are those
training uses). Writes, into ``--output``:

- ``report.md``: the command, models, date, commit and machine (its provenance); a summary row per env and
  a table per env (success with its 95% Wilson interval, pass@k, mean return, format-valid rate, turns,
  response length);
- ``report.json``: the same numbers and the provenance (``experiments/common/evaluation_report.py``
  describes it);
- ``report.png``: success per env with error bars; with ``--train N``, learning curves per env too.

Models: ``--model`` (a name such as ``smollm2``, a local directory or a hub id) for the text envs; the vision
env (FrozenLakeVision) takes ``--vision-model``; each defaults to the offline tiny model warm-started on the
env (``algorithms.warm_start``: trained on first use, then cached). ``--checkpoint DIR`` evaluates the policy
of an ``experiments.train`` run (its results folder) on its own env. ``--train N`` trains N DAPO iterations
per env first (the env's settings, ``--set`` for any key), evaluating every ``--eval-every`` iterations.

    python -m experiments.evaluate                                         # all 5 envs, 128 tasks x 1
    python -m experiments.evaluate --envs FrozenLake,Math --tasks 32 --samples 4
    python -m experiments.evaluate --model smollm2 --envs Math,NQSearch --split test
    python -m experiments.evaluate --checkpoint results/FrozenLake-v0-20260101-120000
    python -m experiments.evaluate --envs FrozenLake --train 10 --eval-every 5
    python -m experiments.evaluate --model smollm2 --envs reasoning_gym/ChainSum-v0,babyai/GoToLocal-v0

An env outside the suite is named by its id: the ecosystem envs (``envs/ecosystem/``, e.g.
``reasoning_gym/ChainSum-v0``, ``textarena/Sudoku-v0``, ``babyai/GoToLocal-v0``) run like the suite's, with
their settings file for the model where one is shipped (``experiments/settings/chain_sum_smollm2.yaml``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path
from typing import Any

from experiments.common.results_json import dtype_record, provenance
from experiments.common.run_config import (
    RunSettings,
    SettingsError,
    build_config,
    settings_for,
    starting_model,
)
from experiments.common.run_options import add_algorithm_options, add_model_options, settings_from_args
from experiments.common.significance import success_line
from experiments.common.training_metrics import flatten, pick

PROG = "python -m experiments.evaluate"
# The suite: report name -> env id (the registered freshrl envs a benchmark covers; SokobanHard is
# Sokoban's harder difficulty and is reached with --envs freshrl/SokobanHard-v0).
SUITE = {
    "FrozenLake": "freshrl/FrozenLake-v0",
    "FrozenLakeVision": "freshrl/FrozenLakeVision-v0",
    "Sokoban": "freshrl/Sokoban-v0",
    "Math": "freshrl/Math-v0",
    "NQSearch": "freshrl/NQSearch-v0",
}
SPLITS = ("validation", "test")  # the train split's tasks are what training sees: not a benchmark


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument(
        "--envs",
        default=None,
        help=f"comma-separated suite names ({', '.join(SUITE)}) or env ids (default: the whole suite; "
        "with --checkpoint, the run's env)",
    )
    add_model_options(parser)
    parser.add_argument(
        "--vision-model",
        default=None,
        help="the model for the vision env(s) (default: the offline tiny VLM warm-started on the env)",
    )
    parser.add_argument(
        "--checkpoint",
        default=None,
        metavar="DIR",
        help="an experiments.train results folder: evaluate its trained policy on its env",
    )
    parser.add_argument("--tasks", type=int, default=128, help="tasks per env (the first N of the split)")
    parser.add_argument("--samples", type=int, default=1, help="episodes per task (pass@k up to k = this)")
    parser.add_argument("--split", default="validation", choices=SPLITS, help="the tasks evaluated")
    parser.add_argument("--train", type=int, default=0, metavar="N", help="DAPO iterations per env first")
    parser.add_argument(
        "--eval-every", type=int, default=None, help="with --train: evaluate every k iterations (default N)"
    )
    add_algorithm_options(parser)
    parser.add_argument("--output", default=None, help="results folder (default results/benchmark-<time>)")
    args = parser.parse_args(argv)
    for name in ("tasks", "samples"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    if args.train < 0:
        parser.error(f"--train must be >= 0 (0: evaluate only), got {args.train}")
    if args.eval_every is not None and args.eval_every < 1:
        parser.error(f"--eval-every must be >= 1, got {args.eval_every}")
    args.env_ids = env_ids(parser, args.envs or ",".join(SUITE))
    if args.checkpoint is not None:
        if args.model or args.vision_model:
            parser.error("--checkpoint evaluates the run's own model: leave out --model / --vision-model")
        args.trained_run = trained_run(parser, Path(args.checkpoint))
        run_env = args.trained_run["settings"].env
        if args.envs is not None and args.env_ids != [run_env]:
            parser.error(f"--checkpoint: the run trained on {run_env}; --envs can only name that env")
        args.env_ids = [run_env]
    return args


def env_ids(parser: argparse.ArgumentParser, names: str) -> list[str]:
    """The env ids of ``--envs`` (suite names, case-insensitive, or registered ids)."""
    import gymnasium as gym

    import envs  # noqa: F401  (registers the freshrl ids)

    by_name = {name.lower(): env_id for name, env_id in SUITE.items()}
    chosen = []
    for name in filter(None, (part.strip() for part in names.split(","))):
        env_id = by_name.get(name.lower(), name)
        if env_id not in gym.registry:
            parser.error(f"--envs: unknown env {name!r}; use one of {', '.join(SUITE)} or a registered id")
        chosen.append(env_id)
    if not chosen:
        parser.error("--envs: name at least one env")
    return list(dict.fromkeys(chosen))


def report_name(env_id: str) -> str:
    """The suite name of ``env_id`` (its id's name part for an env outside the suite)."""
    return next((name for name, suite_id in SUITE.items() if suite_id == env_id), env_id.split("/")[-1])


def trained_run(parser: argparse.ArgumentParser, folder: Path) -> dict[str, Any]:
    """An experiments.train results folder: its settings, starting model and checkpoint directory."""
    summary_path = folder / "summary.json"
    if not summary_path.is_file():
        parser.error(f"--checkpoint {folder}: no summary.json (give the folder experiments.train wrote)")
    summary = json.loads(summary_path.read_text())
    fields = {item.name for item in dataclasses.fields(RunSettings)} - {"overrides"}
    # The run's replay mode and seed, as train records them (older summaries: "replay").
    recorded = {"replay_mode": summary.get("replay_mode", summary.get("replay")), "seed": summary.get("seed")}
    overrides = {**summary.get("overrides", {}), **{k: v for k, v in recorded.items() if v is not None}}
    try:
        settings = RunSettings(
            **{key: value for key, value in summary.items() if key in fields}, overrides=overrides
        )
    except SettingsError as error:
        parser.error(f"--checkpoint {folder}: summary.json: {error}")
    checkpoint = Path(summary.get("checkpoint") or folder / "checkpoint")
    if not checkpoint.is_dir():
        checkpoint = folder / "checkpoint"
    if not checkpoint.is_dir():
        parser.error(f"--checkpoint {folder}: no checkpoint/ folder in it")
    return {"settings": settings, "model": summary["model"], "checkpoint": checkpoint.resolve()}


def env_settings(args: argparse.Namespace, env_id: str) -> RunSettings:
    """The settings of ``env_id``'s run: its settings file for the model, then the command line."""
    from algorithms.warm_start import is_vision_env

    if args.checkpoint is not None:  # the run's own settings: the policy is evaluated as it was trained
        settings = args.trained_run["settings"]
    else:
        model = args.vision_model if is_vision_env(env_id) else args.model
        try:
            base = settings_for(env_id, model)
        except SettingsError as error:
            raise SystemExit(f"{PROG}: {error}") from None
        settings = settings_from_args(PROG, argparse.Namespace(**{**vars(args), "model": model}), base)
    evaluation = {
        "evaluation_num_tasks": args.tasks,
        "evaluation_samples_per_task": args.samples,
        "evaluation_interval": (args.eval_every or args.train) if args.train else None,
    }
    return dataclasses.replace(
        settings, iterations=max(args.train, 1), overrides={**settings.overrides, **evaluation}
    )


def benchmark_env(args: argparse.Namespace, env_id: str, bar) -> dict[str, Any]:
    """Builds the env's algorithm, trains it ``--train`` iterations if asked, and evaluates it."""
    started = time.perf_counter()
    settings = env_settings(args, env_id)
    name = report_name(env_id)
    bar.set_postfix_str(f"{name}: model")
    try:
        model = args.trained_run["model"] if args.checkpoint else starting_model(settings)
    except SettingsError as error:
        raise SystemExit(f"{PROG}: {error}") from None
    config = build_config(settings, {"model_path": model, "evaluation_split": args.split})
    algo = config.build_algo()

    def evaluate() -> dict[str, Any]:
        return algo.evaluate_policy(num_tasks=args.tasks, samples_per_task=args.samples, split=args.split)

    try:
        if args.checkpoint:
            algo.restore_from_path(str(args.trained_run["checkpoint"]))
        curve, training = [], []
        if args.train:
            before = evaluate()
            bar.write(f"{name}, before training: {args.split} success {success_line(before)}")
            curve.append({"iteration": 0, **interval(before)})
            for index in range(args.train):
                bar.set_postfix_str(f"{name}: training {index + 1}/{args.train}")
                result = algo.train()
                flat = flatten({key: value for key, value in result.items() if key != "evaluation"})
                training.append({"iteration": index + 1, "rollout_success": pick(flat, "rollout/success")})
                if "evaluation" in result:
                    line = success_line(result["evaluation"])
                    bar.write(f"{name}, iteration {index + 1}/{args.train}: {args.split} success {line}")
                    curve.append({"iteration": index + 1, **interval(result["evaluation"])})
        if curve and curve[-1]["iteration"] == args.train:  # the last iteration's evaluation is the final one
            metrics = curve[-1]["metrics"]
        else:
            bar.set_postfix_str(f"{name}: evaluating {args.tasks} x {args.samples}")
            metrics = evaluate()
    finally:
        algo.stop()
    for point in curve:
        del point["metrics"]
    return {
        "env_id": env_id,
        "model": model,
        "settings": dataclasses.asdict(settings),
        "seconds": time.perf_counter() - started,
        "metrics": metrics,
        "curve": curve,
        "training": training,
        "dtypes": dtype_record(config),
    }


def interval(metrics: dict[str, Any]) -> dict[str, Any]:
    """A learning-curve point: success and its interval (and the whole evaluation, dropped after use)."""
    keys = ("success", "success_ci95_low", "success_ci95_high")
    return {**{key: metrics[key] for key in keys}, "metrics": dict(metrics)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    from experiments.common.evaluation_report import write_report
    from experiments.common.quiet_logs import LOG_FILE_NAME, install, worker_runtime_env
    from experiments.common.ray_session import start_ray
    from models.progress import Progress

    output = Path(args.output or f"results/benchmark-{time.strftime('%Y%m%d-%H%M%S')}")
    log_file = install(output / LOG_FILE_NAME)
    print(f"freshrl: results in {output}, full log in {log_file}")
    start_ray(runtime_env=worker_runtime_env(log_file))
    started = time.perf_counter()
    report: dict[str, Any] = {
        "provenance": provenance(PROG, argv),
        "split": args.split,
        "tasks": args.tasks,
        "samples": args.samples,
        "train_iterations": args.train,
        "envs": {},
    }
    with Progress(args.env_ids, desc="benchmark", unit="env") as bar:
        for env_id in bar:
            entry = benchmark_env(args, env_id, bar)
            report["envs"][report_name(env_id)] = entry
            line = success_line(entry["metrics"])
            bar.write(f"{report_name(env_id)}: success {line} ({entry['seconds']:.0f} s)")
    report["seconds"] = time.perf_counter() - started
    paths = write_report(report, output)
    print(f"wrote {', '.join(map(str, paths))}")
    return report


if __name__ == "__main__":
    main()
