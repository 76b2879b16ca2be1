"""Benchmark a policy on the agentic env suite: ``python -m experiments.evaluate``.

Evaluates a model on every env of the suite (FrozenLake, FrozenLakeVision, Sokoban, Math, NQSearch) or on
those ``--envs`` names: ``--tasks`` tasks of the ``--split`` (validation or test; the first N of the split,
``envs/seeds.py``), ``--samples`` episodes each, through the algorithm's own evaluation
(``DAPO.evaluate_policy``) with each env's settings file built by
``experiments.common.run_config.build_config`` (so the prompts, turn budgets and sampling are those
training uses). Writes, into ``--output``:

- ``report.md``: the command, models, date, commit and machine (its provenance); a summary row per env and
  a table per env (success with its 95% interval, Wilson's or over task means, pass@k, mean return,
  format-valid rate, turns, response length);
- ``report.json``: the same numbers and the provenance (``experiments/common/evaluation_report.py``
  describes it);
- ``report.png``: success per env with error bars; with ``--train N``, learning curves per env too.

Models: ``--model`` (a name such as ``smollm2``, a local directory or a hub id) for the text envs; the vision
env (FrozenLakeVision) takes ``--vision-model``; each defaults to the offline tiny model warm-started on the
env (``algorithms.warm_start``: trained on first use, then cached). ``--checkpoint DIR`` evaluates the policy
of an ``experiments.train`` run (its results folder) on its own env. ``--train N`` trains N DAPO iterations
per env first (the env's settings, ``--set`` for any key), evaluating every ``--eval-every`` iterations.

``--endpoint URL --served-model NAME`` evaluates a model served elsewhere instead, over its OpenAI-compatible
chat-completions API (vLLM, SGLang, a hosted API): the same tasks, turn loop and settings files, the
episodes played over HTTP (``algorithms.endpoint_rollout``) and summarized as the local ones are
(``algorithms.dapo.evaluation.summarize_episodes``); the API key is read from ``$FRESHRL_API_KEY`` (else
``$OPENAI_API_KEY``, or the variable ``--api-key-env`` names) and never recorded. An episode the server
fails after every retry is lost: counted apart, never as a failure (docs/evaluation.md).

    python -m experiments.evaluate                                         # all 5 envs, 128 tasks x 1
    python -m experiments.evaluate --envs FrozenLake,Math --tasks 32 --samples 4
    python -m experiments.evaluate --model smollm2 --envs Math,NQSearch --split test
    python -m experiments.evaluate --checkpoint results/FrozenLake-v0-20260101-120000
    python -m experiments.evaluate --envs FrozenLake --train 10 --eval-every 5
    python -m experiments.evaluate --model smollm2 --envs reasoning_gym/ChainSum-v0,babyai/GoToLocal-v0
    python -m experiments.evaluate --endpoint http://127.0.0.1:8000 --served-model my-model --envs FrozenLake

An env outside the suite is named by its id: the ecosystem envs (``envs/ecosystem/``, e.g.
``reasoning_gym/ChainSum-v0``, ``textarena/Sudoku-v0``, ``babyai/GoToLocal-v0``) run like the suite's, with
their settings file for the model where one is shipped (``experiments/settings/chain_sum_smollm2.yaml``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import threading
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from experiments.common.results_json import dtype_record, provenance
from experiments.common.run_config import (
    RunSettings,
    SettingsError,
    build_config,
    run_keys,
    settings_for,
    starting_model,
    with_layer,
)
from experiments.common.run_loop import train_iterations
from experiments.common.run_options import add_algorithm_options, add_model_options, settings_from_args
from experiments.common.significance import success_line
from experiments.common.training_metrics import pick
from models.chat_endpoint import API_KEY_ENVS, ChatEndpoint, EndpointSetupError, api_base, public_url

if TYPE_CHECKING:
    from tqdm import tqdm

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
# Options that name or make a local model: meaningless for a served one.
LOCAL_MODEL_OPTIONS = ("train", "checkpoint", "model", "vision_model")


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
    add_endpoint_options(parser)
    parser.add_argument("--output", default=None, help="results folder (default results/benchmark-<time>)")
    args = parser.parse_args(argv)
    check_endpoint_options(parser, args)
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


def add_endpoint_options(parser: argparse.ArgumentParser) -> None:
    """A served model: the server, the model's name there, the key's variable, timeouts and concurrency."""
    group = parser.add_argument_group("a served model (an OpenAI-compatible chat-completions server)")
    group.add_argument(
        "--endpoint",
        default=None,
        metavar="URL",
        help="evaluate a model served at URL (with or without /v1: vLLM, SGLang, a hosted API) instead of a "
        "local one",
    )
    group.add_argument("--served-model", default=None, metavar="NAME", help="its name on the server")
    group.add_argument(
        "--api-key-env",
        default=None,
        metavar="VAR",
        help=f"the environment variable holding the API key, sent as a Bearer token (default: "
        f"{' or '.join(API_KEY_ENVS)}, the first set; none set: no key)",
    )
    group.add_argument("--endpoint-timeout", type=float, default=120.0, help="seconds a request may take")
    group.add_argument(
        "--endpoint-retries",
        type=int,
        default=4,
        help="retries of a request after a connection error, timeout, HTTP 429 or 5xx (then the episode is "
        "lost)",
    )
    group.add_argument("--endpoint-concurrency", type=int, default=8, help="episodes in flight at once")


def check_endpoint_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """--endpoint and --served-model come together, without the options of a local model. Sets
    ``args.api_key_env`` to the variable the API key is in (None: no key); the key itself stays there."""
    if args.endpoint is None:
        if args.served_model is not None:
            parser.error("--served-model names a model on a server: give the server with --endpoint URL")
        return
    if not args.served_model:
        parser.error(
            "--endpoint needs --served-model NAME, the model's name on the server (its /v1/models list)"
        )
    given = [name for name in LOCAL_MODEL_OPTIONS if getattr(args, name)]
    if given:
        options = ", ".join(f"--{name.replace('_', '-')}" for name in given)
        parser.error(
            f"--endpoint evaluates the served model as it is: leave out {options} (local models only)"
        )
    try:
        api_base(args.endpoint)
    except ValueError as error:
        parser.error(f"--endpoint: {error}")
    if args.endpoint_timeout <= 0 or args.endpoint_retries < 0 or args.endpoint_concurrency < 1:
        parser.error("--endpoint-timeout must be > 0, --endpoint-retries >= 0, --endpoint-concurrency >= 1")
    names = (args.api_key_env,) if args.api_key_env else API_KEY_ENVS
    found = next((name for name in names if os.environ.get(name)), None)
    if args.api_key_env and found is None:
        parser.error(f"--api-key-env {args.api_key_env}: that environment variable is not set")
    args.api_key_env = found


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
    fields = set(run_keys())
    # The run's replay mode and seed, as train records them (older summaries: "replay").
    recorded = {"replay_mode": summary.get("replay_mode", summary.get("replay")), "seed": summary.get("seed")}
    overrides = {**summary.get("overrides", {}), **{k: v for k, v in recorded.items() if v is not None}}
    try:
        values = {key: value for key, value in summary.items() if key in fields}
        settings = with_layer(
            RunSettings(), f"trained run {summary_path}", {**values, "overrides": overrides}
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
    return with_layer(
        settings, "entry point experiments.evaluate", {"iterations": max(args.train, 1), **evaluation}
    )


def benchmark_env(args: argparse.Namespace, env_id: str, bar: tqdm) -> dict[str, Any]:
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

    def evaluate(iteration: int) -> dict[str, Any]:
        if iteration == args.train:  # the final evaluation (the only one without training)
            bar.set_postfix_str(f"{name}: evaluating {args.tasks} x {args.samples}")
        return algo.evaluate_policy(num_tasks=args.tasks, samples_per_task=args.samples, split=args.split)

    def report_evaluation(iteration: int, metrics: dict[str, Any], bar: tqdm | None) -> None:
        when = f"iteration {iteration}/{args.train}" if iteration else "before training"
        bar.write(f"{name}, {when}: {args.split} success {success_line(metrics)}")
        curve.append({"iteration": iteration, **interval(metrics)})

    def before_iteration(iteration: int, bar: tqdm) -> None:
        bar.set_postfix_str(f"{name}: training {iteration}/{args.train}")

    # The curve: the evaluation before training and those inside it, not the final one off the interval.
    curve: list[dict[str, Any]] = []
    training: list[dict[str, Any]] = []
    try:
        if args.checkpoint:
            algo.restore_from_path(str(args.trained_run["checkpoint"]))
        if args.train:
            run = train_iterations(
                algo,
                args.train,
                bar,
                evaluate=evaluate,
                on_evaluation=report_evaluation,
                before_iteration=before_iteration,
            )
            metrics = run.evaluations[args.train]
            training = [
                {"iteration": iteration, "rollout_success": pick(row, "rollout/success")}
                for iteration, row in enumerate(run.rows, start=1)
            ]
        else:
            metrics = evaluate(args.train)
    finally:
        algo.stop()
    return {
        "env_id": env_id,
        "model": model,
        "settings": settings.as_record(),
        "seconds": time.perf_counter() - started,
        "metrics": metrics,
        "curve": curve,
        "training": training,
        "dtypes": dtype_record(config),
    }


def benchmark_endpoint_env(
    args: argparse.Namespace, endpoint: ChatEndpoint, env_id: str, bar
) -> dict[str, Any]:
    """Evaluates the served model on the env: the local evaluation's tasks and settings (its settings file,
    ``--set``), played over the endpoint and summarized by the same ``summarize_episodes``."""
    import gymnasium as gym

    from algorithms.dapo.evaluation import summarize_episodes
    from algorithms.endpoint_rollout import rollout_over_endpoint
    from envs.seeds import seeds
    from models.chat_endpoint import Sampling

    started = time.perf_counter()
    settings = env_settings(args, env_id)
    config = build_config(settings, {"evaluation_split": args.split})
    name = report_name(env_id)
    # As DAPO.evaluate_policy samples: the evaluation's temperature and top-p, else training's.
    sampling = Sampling(
        temperature=config.temperature
        if config.evaluation_temperature is None
        else config.evaluation_temperature,
        top_p=config.top_p if config.evaluation_top_p is None else config.evaluation_top_p,
        max_tokens=config.max_response_tokens,
        stop=tuple(config.stop_strings),
        seed=config.seed,
    )
    episodes = args.tasks * args.samples
    finished, lock = [0], threading.Lock()

    def progress(_) -> None:
        with lock:
            finished[0] += 1
            bar.set_postfix_str(f"{name}: {finished[0]}/{episodes} episodes")

    bar.set_postfix_str(f"{name}: 0/{episodes} episodes")
    try:
        rollout = rollout_over_endpoint(
            endpoint,
            lambda: gym.make(config.env, **dict(config.env_config or {})),
            seeds(args.split, args.tasks),
            args.samples,
            sampling,
            max_context_tokens=config.max_context_tokens,
            system_prompt=config.system_prompt,
            max_trajectory_response_tokens=config.max_trajectory_response_tokens,
            concurrency=args.endpoint_concurrency,
            on_episode=progress,
        )
    except EndpointSetupError as error:
        raise SystemExit(
            f"{PROG}: {endpoint.base} refused the request: {error}. {setup_fix(args, error)}"
        ) from None
    completed = [episode for group in rollout.groups for episode in group]
    return {
        "env_id": env_id,
        "model": args.served_model,
        "settings": settings.as_record(),
        "seconds": time.perf_counter() - started,
        "metrics": summarize_episodes(rollout.groups, split=args.split) if rollout.groups else None,
        "curve": [],
        "training": [],
        "sampling": {**dataclasses.asdict(sampling), "stop": list(sampling.stop)},
        "max_context_tokens": config.max_context_tokens,
        "lost": {
            "episodes": len(rollout.lost),
            "tasks_left_out": rollout.tasks_left_out,
            "kinds": rollout.lost_kinds(),
            "examples": [episode.detail for episode in rollout.lost[:3]],
        },
        "turns_without_usage": sum(n is None for e in completed for n in e.response_tokens),
        "ended_by": dict(Counter(episode.ended_by for episode in completed)),
    }


def setup_fix(args: argparse.Namespace, error: EndpointSetupError) -> str:
    """What to check after a setup error (HTTP 4xx): the key, the model's name, or the request."""
    if error.status in (401, 403):
        if args.api_key_env:
            return f"Check the API key in ${args.api_key_env} (--api-key-env names another variable)."
        return (
            f"No API key was sent: set {' or '.join(API_KEY_ENVS)}, or name its variable with --api-key-env."
        )
    if error.status == 404 or "model" in error.detail.lower():
        return f"Check --served-model {args.served_model!r} against the server's /v1/models list."
    return "Check that the server serves chat completions for this model and accepts these settings."


def interval(metrics: dict[str, Any]) -> dict[str, Any]:
    """A learning-curve point: success, its interval and the per-task outcomes that pair it with another
    point by task."""
    keys = ("success", "success_ci95_low", "success_ci95_high")
    paired = ("success_ci95_method", "task_seeds", "task_successes", "samples_per_task")
    return {key: metrics[key] for key in keys} | {key: metrics[key] for key in paired if key in metrics}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    from experiments.common.evaluation_report import write_report
    from experiments.common.quiet_logs import LOG_FILE_NAME, install, worker_runtime_env
    from experiments.common.ray_session import start_ray
    from models.progress import Progress

    output = Path(args.output or f"results/benchmark-{time.strftime('%Y%m%d-%H%M%S')}")
    log_file = install(output / LOG_FILE_NAME)
    print(f"freshrl: results in {output}, full log in {log_file}")
    endpoint = None
    if args.endpoint:
        endpoint = ChatEndpoint(
            args.endpoint,
            args.served_model,
            api_key=os.environ[args.api_key_env] if args.api_key_env else None,
            timeout=args.endpoint_timeout,
            retries=args.endpoint_retries,
        )
    else:
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
    if endpoint is not None:  # the key's variable is recorded, never its value
        report["endpoint"] = {
            "url": public_url(args.endpoint),
            "api_base": public_url(endpoint.base),
            "served_model": args.served_model,
            "api_key_env": args.api_key_env,
            "timeout_s": args.endpoint_timeout,
            "retries": args.endpoint_retries,
            "concurrency": args.endpoint_concurrency,
        }
    with Progress(args.env_ids, desc="benchmark", unit="env") as bar:
        for env_id in bar:
            if endpoint is None:
                entry = benchmark_env(args, env_id, bar)
            else:
                entry = benchmark_endpoint_env(args, endpoint, env_id, bar)
            report["envs"][report_name(env_id)] = entry
            line = success_line(entry["metrics"]) if entry["metrics"] else "none: every task lost"
            lost = f", {entry['lost']['episodes']} episodes lost" if entry.get("lost") else ""
            bar.write(f"{report_name(env_id)}: success {line} ({entry['seconds']:.0f} s{lost})")
    report["seconds"] = time.perf_counter() - started
    paths = write_report(report, output)
    print(f"wrote {', '.join(map(str, paths))}")
    return report


if __name__ == "__main__":
    main()
