"""Build the warm-started tiny models and measure their success: ``python -m experiments.warm_start``.

For each env, the warm-started model (``algorithms.warm_start.warm_started_path``, built if not cached) and
its base tiny model are measured by the algorithm's own evaluation (``DAPO.evaluate_policy``, the one
``train``, ``sweep``, ``compare`` and ``evaluate`` report): a DAPO algorithm is built for the env from its
settings file and scale (``experiments.common.run_config``: the tiny scale of ``algorithms/dapo/scales.py``,
48 response tokens a turn, 1024 context tokens, temperature 1.0; the env_config training uses), and each
model's weights are loaded into it before it plays the first N validation tasks
(``envs.seeds.seeds("validation", N)``), k samples each. It prints the success rate with its 95% Wilson
interval, and the tasks whose samples disagree (the groups GRPO can learn from; the others have zero
advantage).

``--calibrate 50,100,200`` instead fine-tunes once, in this process and without caching, and measures the
model after each of those step counts: the way ``algorithms.warm_start.WARM_START_STEPS`` and the learning
lab's warm starts were chosen. ``--output DIR`` records it: ``DIR/<env>-<hash of env_config>.json`` with the
command, commit and CPU, the settings and each measurement, rewritten after each one.

    python -m experiments.warm_start                                  # all five default envs
    python -m experiments.warm_start --env freshrl/Sokoban-v0 --seeds 64
    python -m experiments.warm_start --env freshrl/Math-v0 --calibrate 100,200,400
    python -m experiments.warm_start --env mymodule:ns/Name-v0 --steps 50 --seeds 16   # an env of one's own
    python -m experiments.warm_start --env freshrl/Sokoban-v0 --env-config '{"max_solution_length": 4}'

The demonstrations and the evaluation are played in the settings file's ``env_config``, as training plays
them (``run_config.starting_model``), so this builds the warm start a run uses; ``--env-config`` (JSON,
``gymnasium.make``'s kwargs) replaces it for both: how a lab entry's easier setting is measured.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from transformers.utils import logging as hf_logging

from experiments.common.quiet_logs import command_log_file, install, worker_runtime_env
from experiments.common.ray_session import start_ray
from experiments.common.results_json import dumps, provenance, write_json

DEFAULT_ENVS = (
    "freshrl/FrozenLake-v0",
    "freshrl/Sokoban-v0",
    "freshrl/Math-v0",
    "freshrl/NQSearch-v0",
    "freshrl/FrozenLakeVision-v0",
)
# What a calibration record keeps of each measurement (DAPO.evaluate_policy's keys).
CALIBRATION_KEYS = (
    "success",
    "success_ci95_low",
    "success_ci95_high",
    "mixed_task_rate",
    "num_tasks",
    "num_episodes",
)


def line(metrics: dict[str, Any]) -> str:
    """One measurement as printed: success with its interval and counts, and the mixed-outcome tasks."""
    episodes, tasks = metrics["num_episodes"], metrics["num_tasks"]
    return (
        f"success {metrics['success']:6.1%} (95% CI {metrics['success_ci95_low']:5.1%}-"
        f"{metrics['success_ci95_high']:5.1%}, {round(metrics['success'] * episodes)}/{episodes}); "
        f"groups with mixed outcomes {round(metrics['mixed_task_rate'] * tasks)}/{tasks}"
    )


def point(metrics: dict[str, Any]) -> dict[str, Any]:
    """What a calibration record keeps of one measurement."""
    return {key: metrics[key] for key in CALIBRATION_KEYS}


def calibration_path(output: Path, env_id: str, env_config: dict[str, Any] | None) -> Path:
    """``output/<env name>-<hash of env_config>.json``: one file per env setting, so settings never mix."""
    digest = hashlib.sha256(dumps(env_config or {}).encode()).hexdigest()[:8]
    return output / f"{env_id.replace('/', '__').replace(':', '_')}-{digest}.json"


@contextmanager
def evaluation_algo(
    env_id: str,
    base: Path,
    *,
    tasks: int,
    samples: int,
    seed: int,
    model: str | None,
    env_config: dict[str, Any] | None = None,
) -> Iterator[Any]:
    """A DAPO algorithm for ``env_id`` with the architecture of ``base`` (one vLLM engine), evaluating
    ``tasks`` validation tasks x ``samples`` (with ``env_config``, else the settings file's); its weights
    are replaced by :func:`measure`."""
    import dataclasses

    from experiments.common.run_config import build_config, settings_for

    settings = settings_for(env_id, model=model)
    if env_config is not None:
        settings = dataclasses.replace(settings, env_config=env_config)
    keys = {"model_path": str(base), "seed": seed}
    keys |= {"evaluation_num_tasks": tasks, "evaluation_samples_per_task": samples}
    algo = build_config(settings, keys).build_algo()
    try:
        yield algo
    finally:
        algo.stop()


def measure(algo, state_dict: dict[str, torch.Tensor]) -> dict[str, Any]:
    """The algorithm's evaluation of the policy with weights ``state_dict``: loaded into its learner, pushed
    to its EnvRunners' engines as a training step's weights are, then ``evaluate_policy()``."""
    from ray.rllib.core import COMPONENT_LEARNER, COMPONENT_RL_MODULE, DEFAULT_MODULE_ID

    algo.learner_group.set_state({COMPONENT_LEARNER: {COMPONENT_RL_MODULE: {DEFAULT_MODULE_ID: state_dict}}})
    algo.env_runner_group.sync_weights(
        from_worker_or_learner_group=algo.learner_group, inference_only=True, timeout_seconds=None
    )
    return algo.evaluate_policy()


def report(
    env_id: str,
    algo,
    base: Path,
    seed: int,
    lr: float,
    skip_base: bool,
    steps: int | None = None,
    env_config: dict[str, Any] | None = None,
) -> None:
    from algorithms.warm_start import MissingOracleError, load_model, warm_started_path
    from models.tiny import BUILD_INFO_FILE

    if not skip_base:
        result = measure(algo, load_model(base).state_dict())
        print(f"{env_id:<28} base model          {line(result)}", flush=True)
    start = time.perf_counter()
    try:
        path = warm_started_path(env_id, base=base, seed=seed, lr=lr, steps=steps, env_config=env_config)
    except MissingOracleError as error:
        raise SystemExit(f"warm_start: {error}") from None
    build = json.loads((path / BUILD_INFO_FILE).read_text())
    took = time.perf_counter() - start
    result = measure(algo, load_model(path).state_dict())
    print(
        f"{env_id:<28} warm start {build['steps']:>4} st. {line(result)}\n"
        f"{'':<28} built in {build['result']['seconds']:.0f}s ({build['result']['cpu_seconds']:.0f} CPU s; "
        f"this call {took:.0f}s), "
        f"final loss {build['result']['final_loss_mean_last_10']:.3f}; {path}",
        flush=True,
    )


def _base_path(env_id: str, seed: int, model: str | None) -> Path:
    """The base of the warm starts: ``--model`` (a name, directory or hub id), else the env's tiny model."""
    from algorithms.warm_start import tiny_base_path
    from models.names import resolve_model_path

    if model is None:
        return Path(tiny_base_path(env_id, seed=seed))
    return Path(resolve_model_path(model, seed=seed))


def calibrate(
    env_id: str,
    algo,
    base: Path,
    seed: int,
    checkpoints: list[int],
    lr: float,
    batch_size: int,
    env_config: dict[str, Any] | None = None,
    record: dict[str, Any] | None = None,
    output: Path | None = None,
) -> None:
    """Fine-tunes ``base`` once, at ``lr`` with ``batch_size`` demonstrations a step (a run's warm start takes
    both from the base's recipe, ``algorithms.warm_start.recipe_for``), and measures it after each of
    ``checkpoints`` steps. With ``output``, the measurements so far are written there after each one
    (``record`` holds the rest: provenance, settings)."""
    from algorithms.warm_start import DEFAULT_DEMOS, demonstrations, fine_tune, load_model
    from models.chat import ChatRenderer

    renderer = ChatRenderer(base)
    demos = demonstrations(env_id, renderer, DEFAULT_DEMOS, env_config)
    model = load_model(base)
    start_wall, start_cpu = time.perf_counter(), time.process_time()
    points: list[dict[str, Any]] = []

    def on_step(step: int, model) -> None:
        if step in checkpoints:
            wall, cpu = time.perf_counter() - start_wall, time.process_time() - start_cpu
            result = measure(algo, {k: v.clone() for k, v in model.state_dict().items()})
            print(
                f"\n{env_id:<28} {step:>4} steps ({wall:.0f}s wall, {cpu:.0f}s cpu)  {line(result)}",
                flush=True,
            )
            points.append({"steps": step, "wall_s": wall, "cpu_s": cpu, **point(result)})
            if output is not None:
                write_json(output, {**(record or {}), "points": points})

    fine_tune(
        model,
        demos,
        steps=max(checkpoints),
        lr=lr,
        batch_size=batch_size,
        seed=seed,
        pad_token_id=renderer.eos_token_id,
        image_inputs=renderer.image_inputs if renderer.is_vision else None,
        on_step=on_step,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.warm_start", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--env", nargs="+", default=list(DEFAULT_ENVS), help="env ids (default: all five)")
    parser.add_argument(
        "--seeds", type=int, default=32, help="validation tasks per env (default %(default)s)"
    )
    parser.add_argument("--group-size", type=int, default=4, help="samples per task (default %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="tiny model, warm start and sampling seed")
    parser.add_argument("--skip-base", action="store_true", help="measure the warm-started models only")
    parser.add_argument(
        "--model",
        default=None,
        help="base model: a name (smollm2), a local HF directory or a hub id (default: the tiny models)",
    )
    parser.add_argument(
        "--steps",
        type=int,
        default=None,
        help="warm-start steps (default: algorithms.warm_start's per-env value)",
    )
    parser.add_argument(
        "--env-config",
        type=json.loads,
        default=None,
        help="JSON kwargs of gymnasium.make for the demonstrations and the evaluation (default: the settings "
        "file's env_config)",
    )
    parser.add_argument("--calibrate", default=None, help="comma-separated step counts to measure instead")
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help="with --calibrate: a folder for the record (one JSON per env setting, with its command, commit "
        "and CPU), written after each measurement",
    )
    parser.add_argument(
        "--lr",
        type=float,
        default=None,
        help="warm start learning rate (default: the base's recipe, algorithms.warm_start.recipe_for)",
    )
    args = parser.parse_args(argv)
    if args.output is not None and not args.calibrate:
        parser.error("--output records a calibration: give --calibrate too")
    hf_logging.disable_progress_bar()
    log_file = install(command_log_file("warm_start"))
    print(f"freshrl: full log in {log_file}")
    start_ray(runtime_env=worker_runtime_env(log_file))

    from algorithms.warm_start import recipe_for
    from experiments.common.run_config import settings_for

    for env_id in args.env:
        # The env setting the run trains on, so that this builds and measures the warm start training uses.
        env_config = args.env_config
        if env_config is None:
            env_config = settings_for(env_id, args.model).env_config
        base = _base_path(env_id, args.seed, args.model)
        recipe = recipe_for(base)
        lr = recipe.lr if args.lr is None else args.lr
        evaluation = {"tasks": args.seeds, "samples": args.group_size, "seed": args.seed, "model": args.model}
        evaluation["env_config"] = env_config
        with evaluation_algo(env_id, base, **evaluation) as algo:
            if args.calibrate:
                checkpoints = sorted(int(s) for s in args.calibrate.split(","))
                output = None
                if args.output is not None:
                    args.output.mkdir(parents=True, exist_ok=True)
                    output = calibration_path(args.output, env_id, env_config)
                record = {
                    "provenance": provenance("python -m experiments.warm_start", argv),
                    "env": env_id,
                    "base": args.model or "tiny",
                    "lr": lr,
                    "batch_size": recipe.batch_size,  # demonstrations a step
                    "evaluation": evaluation,
                }
                batch = recipe.batch_size
                calibrate(env_id, algo, base, args.seed, checkpoints, lr, batch, env_config, record, output)
            else:
                report(env_id, algo, base, args.seed, lr, args.skip_base, args.steps, env_config)


if __name__ == "__main__":
    main()
