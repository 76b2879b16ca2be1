"""Train DAPO (+ FreshPER) on a freshrl env: ``python -m experiments.train``.

Settings come from a preset file (``experiments/presets/*.yaml``, one per env; ``--config`` names one, else
the one for ``--env``, else ``frozen_lake.yaml``), and command-line options override them.

Evaluates the starting policy on held-out validation seeds, trains for ``--iterations`` with a live progress
bar, evaluates again, and writes a results folder: ``metrics.csv`` (one row per iteration), ``curves.png``
(DAPO's monitoring curves and success), ``summary.json`` (success before/after with 95% Wilson intervals,
and how many iterations trained nothing) and ``checkpoint/`` (resume with ``--resume``).

``--env`` takes a registered id or Gymnasium's ``module:ns/Name-v0``, which imports ``module`` first (in every
process), so an env registered in a module of one's own trains without editing freshrl
(docs/adding_an_env.md). Without ``--model``, the tiny model is warm-started on the env's oracle first
(``--warm-start-steps N`` sets its length, ``--no-warm-start`` skips it).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

DEFAULT_ENV = "freshrl/FrozenLake-v0"
PRESETS_DIR = Path(__file__).resolve().parent / "presets"
# What a preset file may set: the options below (same names) plus ``training``, DAPOConfig.training keys
# applied on top of the algorithm preset.
PRESET_KEYS = (
    "env",
    "env_config",
    "model",
    "preset",
    "replay",
    "tau",
    "iterations",
    "eval_seeds",
    "seed",
    "warm_start_steps",
)
# A run is flagged when more than this share of its iterations trained nothing (no informative group).
MOSTLY_UNTRAINED_SHARE = 0.5
NOTHING_TRAINED = "0 informative groups: nothing trained this iteration"


def load_preset(path: str | Path) -> dict[str, Any]:
    """The settings of a preset YAML file; an error naming the file for unknown keys."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise SystemExit(f"train: no preset file {path}; the shipped ones are in {PRESETS_DIR}")
    settings = yaml.safe_load(path.read_text()) or {}
    unknown = sorted(set(settings) - {*PRESET_KEYS, "training"})
    if unknown:
        raise SystemExit(f"train: {path} has unknown keys {unknown}; allowed: {[*PRESET_KEYS, 'training']}")
    return settings


def env_preset_file(env: str) -> Path | None:
    """The shipped preset file whose ``env`` is ``env`` (None when there is none)."""
    files = sorted(PRESETS_DIR.glob("*.yaml"))
    return next((path for path in files if load_preset(path).get("env") == env), None)


def default_model(env: str, *, warm_start_steps: int | None = None, warm_start: bool = True) -> str:
    """The model used when none is named: the tiny model warm-started on ``env`` (``models.warm_start``;
    trained on first use, then cached) for ``warm_start_steps`` (None: the module's per-env default), or
    the untrained tiny model when ``warm_start`` is False. An env without ``oracle_responses()`` is an error
    naming its contract and the ways around it."""
    from models.warm_start import MissingOracleError, tiny_base_path, warm_started_path

    if not warm_start:
        return str(tiny_base_path(env))
    try:
        return str(warm_started_path(env, steps=warm_start_steps))
    except MissingOracleError as error:
        raise SystemExit(f"freshrl: {error}") from None


def check_env_id(env: str) -> None:
    """``env`` is a registered id, or ``module:id`` whose module registers it; else an error showing how
    training sees an env registered in a module of one's own."""
    import importlib

    import gymnasium as gym

    import envs  # noqa: F401  (registers the freshrl/... ids)

    module, _, env_id = env.rpartition(":")
    try:
        if module:
            importlib.import_module(module)
        gym.spec(env_id)
    except ModuleNotFoundError as error:
        raise SystemExit(
            f"freshrl: --env {env}: cannot import {module!r} ({error}); run from the directory that holds it "
            "or put that directory on PYTHONPATH (docs/adding_an_env.md)"
        ) from None
    except gym.error.Error as error:
        raise SystemExit(
            f"freshrl: --env {env}: {error}. An env registered in a module of your own is named with the "
            f"module first, Gymnasium's module:id form: --env mymodule:{env_id} (docs/adding_an_env.md)"
        ) from None


def add_warm_start_args(parser: argparse.ArgumentParser) -> None:
    """``--warm-start-steps`` and ``--no-warm-start``: how the default model (no ``--model``) is made."""
    parser.add_argument(
        "--warm-start-steps",
        type=int,
        default=None,
        help="AdamW steps of the warm start on the env's oracle (default: models.warm_start's per-env value)",
    )
    parser.add_argument(
        "--no-warm-start",
        dest="warm_start",
        action="store_false",
        help="train the untrained tiny model (no oracle needed; it rarely succeeds, so expect little signal)",
    )


def check_warm_start_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.warm_start_steps is not None and args.warm_start_steps < 0:
        parser.error(f"--warm-start-steps must be >= 0, got {args.warm_start_steps}")
    if args.warm_start_steps is not None and not args.warm_start:
        parser.error("--warm-start-steps and --no-warm-start exclude each other")
    if args.model is not None and (args.warm_start_steps is not None or not args.warm_start):
        parser.error("--warm-start-steps / --no-warm-start choose the default model; drop them or --model")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from algorithms.dapo.presets import ALGORITHM_PRESETS
    from algorithms.replay import REPLAY_MODES

    first = argparse.ArgumentParser(add_help=False)
    first.add_argument("--config")
    first.add_argument("--env")
    known, _ = first.parse_known_args(argv)
    preset_file = known.config or env_preset_file(known.env or DEFAULT_ENV)
    preset = load_preset(preset_file) if preset_file else {}
    if known.config and known.env and known.env != preset.get("env"):
        raise SystemExit(f"train: --env {known.env} differs from {known.config}'s env {preset.get('env')}")

    parser = argparse.ArgumentParser(prog="python -m experiments.train", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--config", default=None, help="preset YAML (default: experiments/presets/<the env's>.yaml)"
    )
    parser.add_argument("--env", default=DEFAULT_ENV, help="registered gymnasium id (default %(default)s)")
    parser.add_argument("--env-config", default="{}", help="JSON kwargs for gymnasium.make")
    parser.add_argument(
        "--model",
        default=None,
        help="a model name (smollm2: SmolLM2-135M-Instruct, built offline), a local model dir or a hub id "
        "(default: the offline tiny model warm-started on --env)",
    )
    parser.add_argument(
        "--preset", default="dapo", choices=sorted(ALGORITHM_PRESETS), help="DAPO Table 1 ladder"
    )
    parser.add_argument("--replay", default="freshper", choices=REPLAY_MODES, help="replay mode")
    parser.add_argument("--tau", type=float, default=None, help="FreshPER age decay constant")
    parser.add_argument(
        "--iterations", type=int, default=20, help="training iterations (default %(default)s)"
    )
    parser.add_argument(
        "--eval-seeds", type=int, default=128, help="validation tasks before and after (default %(default)s)"
    )
    parser.add_argument("--num-env-runners", type=int, default=0, help="remote EnvRunners (0: in-process)")
    parser.add_argument("--num-learners", type=int, default=0, help="remote learners (0: in-process)")
    parser.add_argument("--gpu", action="store_true", help="one GPU per learner and per remote EnvRunner")
    parser.add_argument(
        "--full-scale", action="store_true", help="paper-scale settings instead of the tiny ones"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default=None, help="results folder (default results/<env>-<time>)")
    parser.add_argument("--resume", default=None, help="checkpoint folder to continue from")
    add_warm_start_args(parser)
    parser.set_defaults(
        **{key: json.dumps(value) if key == "env_config" else value for key, value in preset.items()}
    )
    args = parser.parse_args(argv)
    check_warm_start_args(parser, args)
    check_env_id(args.env)
    args.training = dict(preset.get("training") or {})
    args.preset_file = str(preset_file) if preset_file else None
    return args


def build_config(args: argparse.Namespace):
    from algorithms.dapo import DAPOConfig, apply_preset

    config = DAPOConfig().environment(args.env, env_config=json.loads(args.env_config))
    config = apply_preset(config, args.preset, tiny=not args.full_scale)
    config = config.training(**getattr(args, "training", {}), model_path=args.model)
    config = config.replay(mode=args.replay).debugging(seed=args.seed)
    if args.tau is not None:
        config = config.replay(tau=args.tau)
    config = config.env_runners(num_env_runners=args.num_env_runners)
    if args.gpu and args.num_env_runners > 0:
        config = config.env_runners(num_gpus_per_env_runner=1)  # one vLLM engine per GPU
    config = config.learners(num_learners=args.num_learners, num_gpus_per_learner=1 if args.gpu else 0)
    return config


def wilson_interval(successes: int, trials: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a success rate."""
    if trials == 0:
        return (0.0, 1.0)
    p = successes / trials
    centre = (p + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / (1 + z * z / trials)
    return (max(0.0, centre - half), min(1.0, centre + half))


def flatten(result: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """Numeric leaves of an RLlib result dict as {"a/b/c": value}."""
    flat: dict[str, float] = {}
    for key, value in result.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, f"{name}/"))
        elif isinstance(value, bool | int | float) and not isinstance(value, bool):
            flat[name] = float(value)
    return flat


def pick(flat: dict[str, float], suffix: str) -> float:
    """The first metric whose name ends with ``suffix`` (NaN when absent)."""
    return next((v for k, v in flat.items() if k.endswith(suffix)), float("nan"))


def trained_nothing(flat: dict[str, float]) -> bool:
    """No informative group this iteration (fresh or from the surplus), so the learner did not step."""
    kept = pick(flat, "rollout/groups_kept") + pick(flat, "rollout/groups_from_surplus")
    return kept == 0


# Progress-bar fields: (name, metric suffix, format). Episode return and the invalid-output rate come from
# every rollout; the others exist only when something was trained or an env reports them.
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


def evaluate(algo, seeds: list[int]) -> dict[str, Any]:
    successes = algo.evaluate_success(seeds)
    low, high = wilson_interval(int(sum(successes)), len(successes))
    return {
        "success": float(sum(successes)) / max(1, len(successes)),
        "ci95": [low, high],
        "n": len(successes),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    from envs.seeds import seeds as split_seeds
    from experiments.plots import plot_training_curves
    from experiments.results_json import write_json
    from models.progress import Progress, quiet_library_bars_in_logs

    quiet_library_bars_in_logs()
    output = Path(args.output or f"results/{args.env.split('/')[-1]}-{time.strftime('%Y%m%d-%H%M%S')}")
    output.mkdir(parents=True, exist_ok=True)
    if args.model is None:
        what = "warm-starting the tiny model" if args.warm_start else "the untrained tiny model"
        print(f"freshrl: no --model; {what} on {args.env} (built once, then cached)")
        args.model = default_model(
            args.env, warm_start_steps=args.warm_start_steps, warm_start=args.warm_start
        )
        print(f"freshrl: starting from {args.model}")
    config = build_config(args)
    print(f"freshrl: training {args.preset} + {args.replay} on {args.env}; results in {output}")
    algo = config.build_algo()
    if args.resume:
        algo.restore_from_path(str(Path(args.resume).resolve()))
        print(f"resumed from {args.resume} at iteration {algo.iteration}")

    eval_seeds = split_seeds("validation", args.eval_seeds)
    before = evaluate(algo, eval_seeds)
    print(f"success before: {before['success']:.3f} (95% CI {before['ci95'][0]:.3f}-{before['ci95'][1]:.3f})")

    rows: list[dict[str, float]] = []
    csv_path = output / "metrics.csv"
    untrained = 0
    with Progress(range(args.iterations), desc="train", unit="it") as bar:
        for index in bar:
            flat = flatten({k: v for k, v in algo.train().items() if k != "config"})
            rows.append(flat)
            if trained_nothing(flat):
                untrained += 1
                bar.write(
                    f"iteration {index + 1}: {NOTHING_TRAINED} (no group of "
                    f"{pick(flat, 'rollout/groups_sampled'):.0f} sampled had mixed outcomes; {untrained} of "
                    f"{index + 1} iterations so far)"
                )
            bar.set_postfix(progress_postfix(flat, untrained))
            _write_csv(csv_path, rows)

    after = evaluate(algo, eval_seeds)
    print(f"success after:  {after['success']:.3f} (95% CI {after['ci95'][0]:.3f}-{after['ci95'][1]:.3f})")
    checkpoint = algo.save_to_path(str((output / "checkpoint").resolve()))
    validation = {0: before["success"], len(rows): after["success"]}  # iterations of this run
    mostly_untrained = untrained > MOSTLY_UNTRAINED_SHARE * len(rows)
    warning = f"{untrained} of {len(rows)} iterations trained nothing" if mostly_untrained else None
    plot_training_curves(rows, output / "curves.png", validation, warning)
    summary = {
        "config": args.preset_file,
        "env": args.env,
        "env_config": json.loads(args.env_config),
        "model": args.model,
        "preset": args.preset,
        "replay": args.replay,
        "iterations": args.iterations,
        "before": before,
        "after": after,
        "iterations_without_training": untrained,
        "mostly_untrained": mostly_untrained,
        "checkpoint": str(checkpoint),
    }
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
    import csv

    columns = sorted({key for row in rows for key in row})
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)


if __name__ == "__main__":
    main()
