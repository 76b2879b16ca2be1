"""Iteration wall time, sync vs async rollouts (DAPOConfig rollout_mode), with 1 and 2 remote EnvRunners.

Workload, the same in every case and run in this one process: the tiny LM (models/tiny.py, random weights) on
``freshrl/FrozenLake-v0``, P prompts x G samples, at most N tokens a turn (default 4 x 4 x 32), the tiny
``dapo`` preset otherwise; dynamic sampling and overlong filtering off (the random model fails every episode
and hits every token limit: with them on there would be nothing to train on, and every case must do the same
work), replay off. Each case builds a fresh algorithm with ``num_env_runners`` remote runners (each a Ray
actor with its own vLLM engine; no local runner) and a local learner, runs ``--warmup`` untimed iterations,
then ``--iterations`` timed ones (wall clock of ``algo.train()``; means reported).

Printed per case: the iteration time and DAPO's timers: rollout (sync: the whole generation; async: waiting
for the batch launched during the last update, plus any regeneration), learn, weight sync (async: includes
waiting for the in-flight batch to finish, since each runner loads the new weights after its rollout).
Then, measured in this run, async / sync per runner count, and the gain the sync split predicts for a
perfect overlap, (R + L + W) / (max(R, L) + W) from the sync case's rollout R, learn L and weight sync W:
the model of docs/scaling.md. On a 2-core machine the runners and the learner share the cores, so overlap
buys little there; the prediction says what separate devices would give. Re-run before relying on a digit.

    python -m benchmarks.async_step                # ~10 minutes on an idle 2-core machine
    python -m benchmarks.async_step --quick        # 1 warm-up + 2 timed iterations, 1 runner
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass

import numpy as np

from algorithms.dapo import DAPOConfig
from benchmarks.requirements import parse_and_check
from experiments.common.ray_session import start_ray
from experiments.common.run_config import RunSettings, build_config

REQUIRES = ("vllm",)
ENV_ID = "freshrl/FrozenLake-v0"
TIMERS = ("timing/rollout_s", "timing/learn_s", "timing/weight_sync_s")


@dataclass(frozen=True)
class Case:
    mode: str
    runners: int


@dataclass(frozen=True)
class Timing:
    """Mean seconds per timed iteration: the whole ``train()`` call and DAPO's three timers."""

    iteration: float
    rollout: float
    learn: float
    sync: float


def case_config(case: Case, args: argparse.Namespace) -> DAPOConfig:
    """The tiny ``dapo`` preset through the one builder (experiments.common.run_config), shrunk to the
    workload, on-policy, for ``case``."""
    workload = {
        "prompts_per_iteration": args.prompts,
        "group_size": args.group_size,
        "max_response_tokens": args.new_tokens,
        "overlong_cache_len": max(1, args.new_tokens // 4),
        "minibatch_size": args.prompts * args.group_size,
        "dynamic_sampling": False,
        "overlong_filtering": False,
        "engine_kv_cache_gib": 0.25,
        "rollout_mode": case.mode,
        "replay_mode": "on_policy",
    }
    config = build_config(RunSettings(env=ENV_ID, scale="tiny", num_env_runners=case.runners), workload)
    return config.env_runners(create_local_env_runner=False)


def measure(case: Case, args: argparse.Namespace) -> Timing:
    algo = case_config(case, args).build_algo()
    try:
        for _ in range(args.warmup):
            algo.train()
        walls, timers = [], {key: [] for key in TIMERS}
        for _ in range(args.iterations):
            started = time.perf_counter()
            result = algo.train()
            walls.append(time.perf_counter() - started)
            for key in TIMERS:
                timers[key].append(float(result.get(key, 0.0)))
    finally:
        algo.stop()
    mean = {key: float(np.mean(values)) for key, values in timers.items()}
    return Timing(
        float(np.mean(walls)), mean["timing/rollout_s"], mean["timing/learn_s"], mean["timing/weight_sync_s"]
    )


def predicted_gain(sync: Timing) -> float:
    """Sync iteration over a perfectly overlapped one: (R + L + W) / (max(R, L) + W)."""
    return (sync.rollout + sync.learn + sync.sync) / (max(sync.rollout, sync.learn) + sync.sync)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.async_step", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--runners", default="1,2", help="comma-separated remote EnvRunner counts")
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--warmup", type=int, default=1, help="untimed iterations per case")
    parser.add_argument("--iterations", type=int, default=4, help="timed iterations per case")
    parser.add_argument("--quick", action="store_true", help="1 runner, 1 warm-up + 2 timed iterations")
    args = parse_and_check(parser, argv, REQUIRES)
    if args.quick:
        args.runners, args.warmup, args.iterations = "1", 1, 2
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    runner_counts = [int(n) for n in args.runners.split(",")]
    start_ray(num_cpus=max(2, max(runner_counts) + 1))
    print(
        f"{ENV_ID}, tiny LM, {args.prompts} prompts x {args.group_size} samples x {args.new_tokens} tokens, "
        f"{args.warmup} warm-up + {args.iterations} timed iterations per case, {os.cpu_count()} CPUs"
    )
    print(f"{'mode':<6} {'runners':>7} {'iteration':>10} {'rollout':>8} {'learn':>8} {'sync':>8}")
    timings: dict[Case, Timing] = {}
    for runners in runner_counts:
        for mode in ("sync", "async"):
            case = Case(mode, runners)
            t = timings[case] = measure(case, args)
            print(
                f"{mode:<6} {runners:>7} {t.iteration:>9.2f}s {t.rollout:>7.2f}s {t.learn:>7.2f}s "
                f"{t.sync:>7.2f}s",
                flush=True,
            )
    print("\nratios measured in this run")
    for runners in runner_counts:
        sync, async_ = timings[Case("sync", runners)], timings[Case("async", runners)]
        total = sync.rollout + sync.learn + sync.sync
        split = ", ".join(
            f"{name} {seconds / total:.0%}"
            for name, seconds in (("rollout", sync.rollout), ("learn", sync.learn), ("sync", sync.sync))
        )
        print(
            f"{runners} runner(s): async / sync iteration {async_.iteration / sync.iteration:.2f}; "
            f"sync split {split}; a perfect overlap would give {1 / predicted_gain(sync):.2f} "
            f"(gain {predicted_gain(sync):.2f}x)"
        )


if __name__ == "__main__":
    main()
