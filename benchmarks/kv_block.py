"""The rollout engine's KV cache block on CPU: multi-turn rollouts with 32-token blocks against vLLM's 128.

vLLM's prefix cache reuses whole KV blocks, so each turn of a multi-turn rollout recomputes every
conversation's tail past its last full block. Each side is a fresh child process that builds DAPO from a
run's settings file exactly as ``experiments.train`` does (``--settings``, default SmolLM2 on FrozenLake,
warm-started) with ``models.engine.CPU_KV_BLOCK_TOKENS`` set to the side's block size, then times
``--evaluations`` evaluations (``DAPO.evaluate_policy``: the validation tasks x samples of the settings, the
same seeds every time, so both sides sample the same episodes when their logprobs agree). The sides alternate
over ``--repeats`` repetitions so that both see the same machine load; each side's fastest evaluation after
the first (which pays first-call costs) is kept, and the ratio is against 128 from the same run.

    python -m benchmarks.kv_block
    python -m benchmarks.kv_block --output docs/results/benchmark/kv-block   # also results.json
"""

from __future__ import annotations

import argparse
import functools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks.measure import alternate, fastest
from benchmarks.requirements import parse_and_check
from experiments.common.results_json import provenance, write_json

PROG = "python -m benchmarks.kv_block"
REQUIRES: tuple[str, ...] = ("vllm",)
SETTINGS = "experiments/settings/frozen_lake_smollm2.yaml"
BLOCKS = (128, 32)  # vLLM's CPU default, then this project's (models/engine.py)
RESULT_PREFIX = "kv-block-result: "  # marks the child's result line: vLLM and Ray log to stdout too


def child(settings_file: str, block: int, evaluations: int) -> None:
    """One side: build the run's DAPO with ``block``-token KV blocks, time its evaluations, print them."""
    import dataclasses
    import time

    import models.engine
    from experiments.common.ray_session import start_ray
    from experiments.common.run_config import build_config, load_settings, starting_model

    models.engine.CPU_KV_BLOCK_TOKENS = block
    settings = load_settings(settings_file)
    settings = dataclasses.replace(settings, model=starting_model(settings))
    start_ray()
    algo = build_config(settings, {}).build_algo()
    runs = []
    try:
        for _ in range(evaluations):
            started = time.perf_counter()
            metrics = algo.evaluate_policy()
            runs.append({"seconds": time.perf_counter() - started, "success": metrics["success"]})
    finally:
        algo.stop()
    print(RESULT_PREFIX + json.dumps({"block": block, "evaluations": runs}), flush=True)


def run_side(args: argparse.Namespace, block: int, repeat: int) -> dict[str, Any]:
    """One side in its own process, in repeat ``repeat`` (from 0): its evaluations' seconds and success."""
    command = [sys.executable, "-m", "benchmarks.kv_block", "--child", str(block)]
    command += ["--settings", args.settings, "--evaluations", str(args.evaluations)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"{PROG}: the side with {block}-token blocks failed:\n{done.stderr[-3000:]}")
    run = json.loads(lines[-1].removeprefix(RESULT_PREFIX))
    seconds = ", ".join(f"{e['seconds']:.1f}" for e in run["evaluations"])
    print(f"repeat {repeat + 1}, {block}-token blocks: evaluations {seconds} s", flush=True)
    return run


def kept_seconds(run: dict[str, Any]) -> float:
    """A side's fastest evaluation in one of its runs, after the first (which pays first-call costs)."""
    return min(e["seconds"] for e in run["evaluations"][1:])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--settings", default=SETTINGS, help="a run's settings file (default %(default)s)")
    parser.add_argument("--repeats", type=int, default=2, help="alternating repetitions of both sides")
    parser.add_argument("--evaluations", type=int, default=2, help="timed evaluations per side (>= 2)")
    parser.add_argument("--output", help="also write OUTPUT/results.json with the provenance")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)  # one side, in its own process
    args = parse_and_check(parser, argv, REQUIRES)
    if args.evaluations < 2:
        parser.error("--evaluations must be >= 2: the first pays first-call costs and is not kept")
    if args.child:
        child(args.settings, args.child, args.evaluations)
        return
    runs = alternate({block: functools.partial(run_side, args, block) for block in BLOCKS}, args.repeats)
    best = {block: kept_seconds(run) for block, run in fastest(runs, seconds=kept_seconds).items()}
    success = {
        block: sorted({e["success"] for r in runs[block] for e in r["evaluations"]}) for block in BLOCKS
    }
    print("| KV block, tokens | evaluation s (fastest) | validation success | time / 128 |")
    print("|---|---|---|---|")
    for block in BLOCKS:
        print(f"| {block} | {best[block]:.1f} | {success[block]} | {best[block] / best[128]:.2f}x |")
    if args.output:
        results = {
            "provenance": provenance(PROG, argv),
            "settings": args.settings,
            "fastest_s": best,
            "success": success,
            "runs": [run for repeat in zip(*runs.values(), strict=True) for run in repeat],  # in run order
        }
        Path(args.output).mkdir(parents=True, exist_ok=True)
        write_json(Path(args.output) / "results.json", results)


if __name__ == "__main__":
    main()
