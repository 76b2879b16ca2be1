"""Build the warm-started tiny models and measure their success: ``python -m experiments.warm_start``.

For each env, the warm-started model (``models.warm_start.warm_started_path``, built if not cached) and its
base tiny model play validation tasks (``envs.seeds.seeds("validation", N)``) through the real RL rollout
(``algorithms.rollout.rollout_groups`` on the vLLM engine) at the tiny training scale of
``algorithms.dapo.presets.TINY_SCALE`` (48 response tokens a turn, 1024 context tokens), temperature 1.0.
It prints the success rate with its 95% Wilson interval, and the fraction of groups whose members disagree
(the groups GRPO can learn from; the others have zero advantage).

``--calibrate 50,100,200`` instead fine-tunes once, in this process and without caching, and measures the
model after each of those step counts: the way ``models.warm_start.WARM_START_STEPS`` was chosen.

    python -m experiments.warm_start                                  # all five default envs
    python -m experiments.warm_start --env freshrl/Sokoban-v0 --seeds 64
    python -m experiments.warm_start --env freshrl/Math-v0 --calibrate 100,200,400
    python -m experiments.warm_start --env mymodule:ns/Name-v0 --steps 50 --seeds 16   # an env of one's own
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym
import torch
from transformers.utils import logging as hf_logging

DEFAULT_ENVS = (
    "freshrl/FrozenLake-v0",
    "freshrl/Sokoban-v0",
    "freshrl/Math-v0",
    "freshrl/NQSearch-v0",
    "freshrl/FrozenLakeVision-v0",
)


@dataclass
class Measurement:
    successes: int
    episodes: int
    mixed_groups: int
    groups: int

    def line(self) -> str:
        from experiments.train import wilson_interval

        low, high = wilson_interval(self.successes, self.episodes)
        rate = self.successes / max(1, self.episodes)
        return (
            f"success {rate:6.1%} (95% CI {low:5.1%}-{high:5.1%}, {self.successes}/{self.episodes}); "
            f"groups with mixed outcomes {self.mixed_groups}/{self.groups}"
        )


class Evaluator:
    """One vLLM engine per base model; other weights of the same architecture are loaded into it."""

    def __init__(self, group_size: int, seed: int):
        from algorithms.dapo.presets import TINY_SCALE
        from models.engine import SamplingConfig

        self.group_size = group_size
        self.max_context_tokens = int(TINY_SCALE["max_context_tokens"])
        self.sampling = SamplingConfig(
            temperature=1.0, max_tokens=int(TINY_SCALE["max_response_tokens"]), seed=seed
        )
        self._engines: dict[Path, tuple] = {}

    def measure(self, env_id: str, base: Path, state_dict: dict[str, torch.Tensor], seeds: list[int]):
        from algorithms.rollout import rollout_groups

        engine, renderer = self._engine(base)
        engine.load_weights(state_dict)
        envs = [gym.make(env_id) for _ in range(len(seeds) * self.group_size)]
        groups = rollout_groups(
            engine,
            renderer,
            envs,
            seeds,
            self.group_size,
            self.sampling,
            max_context_tokens=self.max_context_tokens,
        )
        for env in envs:
            env.close()
        outcomes = [[t.success for t in group] for group in groups]
        return Measurement(
            successes=sum(map(sum, outcomes)),
            episodes=sum(map(len, outcomes)),
            mixed_groups=sum(0 < sum(group) < len(group) for group in outcomes),
            groups=len(outcomes),
        )

    def _engine(self, base: Path):
        if base not in self._engines:
            from models.chat import ChatRenderer
            from models.engine import RolloutEngine

            engine = RolloutEngine(base, max_model_len=self.max_context_tokens, kv_cache_gib=0.5)
            self._engines[base] = (engine, ChatRenderer(base))
        return self._engines[base]


def report(
    env_id: str,
    evaluator: Evaluator,
    seeds: list[int],
    seed: int,
    lr: float,
    skip_base: bool,
    steps: int | None = None,
    model: str | None = None,
) -> None:
    from models.tiny import BUILD_INFO_FILE
    from models.warm_start import MissingOracleError, load_model, warm_started_path

    base = _base_path(env_id, seed, model)
    if not skip_base:
        result = evaluator.measure(env_id, base, load_model(base).state_dict(), seeds)
        print(f"{env_id:<28} base model          {result.line()}", flush=True)
    start = time.perf_counter()
    try:
        path = warm_started_path(env_id, base=base, seed=seed, lr=lr, steps=steps)
    except MissingOracleError as error:
        raise SystemExit(f"warm_start: {error}") from None
    build = json.loads((path / BUILD_INFO_FILE).read_text())
    took = time.perf_counter() - start
    result = evaluator.measure(env_id, base, load_model(path).state_dict(), seeds)
    print(
        f"{env_id:<28} warm start {build['steps']:>4} st. {result.line()}\n"
        f"{'':<28} built in {build['result']['seconds']:.0f}s ({build['result']['cpu_seconds']:.0f} CPU s; "
        f"this call {took:.0f}s), "
        f"final loss {build['result']['final_loss_mean_last_10']:.3f}; {path}",
        flush=True,
    )


def _base_path(env_id: str, seed: int, model: str | None) -> Path:
    """The base of the warm starts: ``--model`` (a name, directory or hub id), else the env's tiny model."""
    from models.names import resolve_model_path
    from models.warm_start import tiny_base_path

    if model is None:
        return Path(tiny_base_path(env_id, seed=seed))
    return Path(resolve_model_path(model, seed=seed))


def calibrate(
    env_id: str,
    evaluator: Evaluator,
    seeds: list[int],
    seed: int,
    checkpoints: list[int],
    lr: float,
    model: str | None = None,
) -> None:
    from models.chat import ChatRenderer
    from models.warm_start import DEFAULT_DEMOS, demonstrations, fine_tune, load_model

    base = _base_path(env_id, seed, model)
    renderer = ChatRenderer(base)
    demos = demonstrations(env_id, renderer, DEFAULT_DEMOS)
    model = load_model(base)
    start_wall, start_cpu = time.perf_counter(), time.process_time()

    def on_step(step: int, model) -> None:
        if step in checkpoints:
            wall, cpu = time.perf_counter() - start_wall, time.process_time() - start_cpu
            result = evaluator.measure(
                env_id, base, {k: v.clone() for k, v in model.state_dict().items()}, seeds
            )
            print(
                f"\n{env_id:<28} {step:>4} steps ({wall:.0f}s wall, {cpu:.0f}s cpu)  {result.line()}",
                flush=True,
            )

    fine_tune(
        model,
        demos,
        steps=max(checkpoints),
        lr=lr,
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
        help="warm-start steps (default: models.warm_start's per-env value)",
    )
    parser.add_argument("--calibrate", default=None, help="comma-separated step counts to measure instead")
    parser.add_argument(
        "--lr", type=float, default=None, help="warm start learning rate (default: the module's)"
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    hf_logging.disable_progress_bar()

    from envs.seeds import seeds as split_seeds
    from models.warm_start import DEFAULT_LR

    seeds = split_seeds("validation", args.seeds)
    lr = DEFAULT_LR if args.lr is None else args.lr
    evaluator = Evaluator(args.group_size, args.seed)
    for env_id in args.env:
        if args.calibrate:
            checkpoints = sorted(int(s) for s in args.calibrate.split(","))
            calibrate(env_id, evaluator, seeds, args.seed, checkpoints, lr, args.model)
        else:
            report(env_id, evaluator, seeds, args.seed, lr, args.skip_base, args.steps, args.model)


if __name__ == "__main__":
    main()
