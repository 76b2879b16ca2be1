"""Train DAPO (+ FreshPER) on a freshrl env: ``python -m experiments.train``.

Evaluates the starting policy on held-out validation seeds, trains for ``--iterations`` with a live progress
bar, evaluates again, and writes a results folder: ``metrics.csv`` (one row per iteration), ``curves.png``
(DAPO's monitoring curves and success), ``summary.json`` (success before/after with 95% Wilson intervals)
and ``checkpoint/`` (resume with ``--resume``).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

from tqdm import tqdm

DEFAULT_ENV = "freshrl/FrozenLake-v0"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from algorithms.dapo.presets import ALGORITHM_PRESETS
    from algorithms.replay import REPLAY_MODES

    parser = argparse.ArgumentParser(prog="python -m experiments.train", description=__doc__.splitlines()[0])
    parser.add_argument("--env", default=DEFAULT_ENV, help="registered gymnasium id (default %(default)s)")
    parser.add_argument("--env-config", default="{}", help="JSON kwargs for gymnasium.make")
    parser.add_argument(
        "--model", default=None, help="local model dir or hub id (default: offline tiny model)"
    )
    parser.add_argument(
        "--preset", default="dapo", choices=sorted(ALGORITHM_PRESETS), help="DAPO Table 1 ladder"
    )
    parser.add_argument("--replay", default="freshper", choices=REPLAY_MODES, help="replay mode")
    parser.add_argument("--tau", type=float, default=None, help="FreshPER age decay constant")
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--eval-seeds", type=int, default=64, help="validation tasks before and after")
    parser.add_argument("--num-env-runners", type=int, default=0, help="remote EnvRunners (0: in-process)")
    parser.add_argument("--num-learners", type=int, default=0, help="remote learners (0: in-process)")
    parser.add_argument("--gpu", action="store_true", help="put learners (and engines) on GPUs")
    parser.add_argument(
        "--full-scale", action="store_true", help="paper-scale settings instead of the tiny ones"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default=None, help="results folder (default results/<env>-<time>)")
    parser.add_argument("--resume", default=None, help="checkpoint folder to continue from")
    return parser.parse_args(argv)


def build_config(args: argparse.Namespace):
    from algorithms.dapo import DAPOConfig, apply_preset

    config = DAPOConfig().environment(args.env, env_config=json.loads(args.env_config))
    config = apply_preset(config, args.preset, tiny=not args.full_scale)
    config = config.training(model_path=args.model).replay(mode=args.replay).debugging(seed=args.seed)
    if args.tau is not None:
        config = config.replay(tau=args.tau)
    config = config.env_runners(num_env_runners=args.num_env_runners)
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

    output = Path(args.output or f"results/{args.env.split('/')[-1]}-{time.strftime('%Y%m%d-%H%M%S')}")
    output.mkdir(parents=True, exist_ok=True)
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
    with tqdm(range(args.iterations), desc="train", unit="it") as bar:
        for _ in bar:
            flat = flatten(algo.train())
            rows.append(flat)
            bar.set_postfix(
                reward=f"{pick(flat, 'rollout/reward_mean'):.2f}",
                success=f"{pick(flat, 'rollout/success'):.2f}",
                len=f"{pick(flat, 'rollout/response_length_mean'):.0f}",
                entropy=f"{pick(flat, 'train/entropy'):.2f}",
                tok_s=f"{pick(flat, 'rollout/tokens_per_s'):.0f}",
            )
            _write_csv(csv_path, rows)

    after = evaluate(algo, eval_seeds)
    print(f"success after:  {after['success']:.3f} (95% CI {after['ci95'][0]:.3f}-{after['ci95'][1]:.3f})")
    checkpoint = algo.save_to_path(str((output / "checkpoint").resolve()))
    plot_training_curves(rows, output / "curves.png")
    summary = {
        "env": args.env,
        "preset": args.preset,
        "replay": args.replay,
        "iterations": args.iterations,
        "before": before,
        "after": after,
        "checkpoint": str(checkpoint),
    }
    (output / "summary.json").write_text(json.dumps(summary, indent=2))
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
