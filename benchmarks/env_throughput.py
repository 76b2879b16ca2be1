"""Env benchmark: Sokoban levels per second, and env steps per second, against a baseline in the same run.

Levels: ``envs.sokoban_levels.generate_level`` with each difficulty's settings, which includes the exhaustive
reverse-play BFS that certifies the optimal solution length. Baseline: the gym-sokoban package's own
generator (``gym_sokoban.envs.room_utils.generate_room``: random room topology, random player and targets,
depth-first reverse play, the state with the best box-swaps x displacement score, up to 4 rooms, retried on
failure as its env's reset does) on the same room size and box count. It gives no solution length. The
ratio is ours / baseline, both measured in this run. gym-sokoban is in the bench extra: ``make bench``.

Steps: ``env.step`` per second with random strict answers (1..max_actions_per_turn random moves), resets
included, for each grid env.

    python -m benchmarks.env_throughput              # 3 s per measurement
    python -m benchmarks.env_throughput --seconds 1
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable

import gymnasium as gym
import numpy as np

import envs  # noqa: F401  (registers the envs)
from benchmarks.requirements import parse_and_check
from envs.gridworld import DIRECTIONS, format_moves
from envs.sokoban import DIFFICULTIES
from envs.sokoban_levels import generate_level

# ------------------------------------------------------------------------------------ gym-sokoban baseline
# The bench extra (`make bench`): gym-sokoban 0.0.6 itself, which imports the old `gym` and `pkg_resources`.
REQUIRES = ("gym_sokoban.envs.room_utils",)


def gym_sokoban_level(dim: tuple[int, int], num_boxes: int) -> tuple[np.ndarray, np.ndarray]:
    """One level from the gym-sokoban package's ``generate_room``, called as its ``SokobanEnv.reset`` does
    (``num_steps = 1.7 * (rows + columns)``; on its RuntimeError / RuntimeWarning it retries), without the
    reset's rendering and its print on every retry. Returns (room structure, room state)."""
    from gym_sokoban.envs.room_utils import generate_room

    while True:
        try:
            structure, state, _ = generate_room(dim=dim, num_steps=int(1.7 * sum(dim)), num_boxes=num_boxes)
            return structure, state
        except (RuntimeError, RuntimeWarning):
            continue


# ------------------------------------------------------------------------------------ measurement
def rate(work: Callable[[], object], seconds: float, min_calls: int = 3) -> tuple[float, int]:
    """Calls per second of ``work`` over about ``seconds`` (at least ``min_calls`` calls)."""
    calls = 0
    start = time.perf_counter()
    while calls < min_calls or time.perf_counter() - start < seconds:
        work()
        calls += 1
    return calls / (time.perf_counter() - start), calls


def sokoban_rates(seconds: float) -> None:
    print("Sokoban levels per second (generation + certificate; baseline: gym-sokoban, no certificate)")
    print(f"{'difficulty':10} {'room':>5} {'boxes':>5} {'ours/s':>10} {'gym-sokoban/s':>14} {'ratio':>8}")
    for name, difficulty in DIFFICULTIES.items():
        rng = np.random.default_rng(0)

        def ours(difficulty=difficulty, rng=rng):
            return generate_level(
                rng,
                dim=difficulty.dim,
                num_boxes=difficulty.num_boxes,
                min_length=difficulty.min_solution_length,
                max_length=difficulty.max_solution_length,
            )

        ours()  # numba compile / cache load outside the timing
        ours_rate, _ = rate(ours, seconds)
        # gym-sokoban draws from the global `random` and `np.random`: seeded for a repeatable run.
        random.seed(0)
        np.random.seed(0)
        base_rate, _ = rate(lambda p=difficulty: gym_sokoban_level(p.dim, p.num_boxes), seconds)
        dim = f"{difficulty.dim[0]}x{difficulty.dim[1]}"
        ratio = ours_rate / base_rate
        print(
            f"{name:10} {dim:>5} {difficulty.num_boxes:>5} {ours_rate:10.0f} {base_rate:14.1f} {ratio:7.1f}x"
        )


def step_rates(seconds: float) -> None:
    print("\nEnv steps per second (random strict answers, resets included)")
    print(f"{'env':34} {'steps/s':>10}")
    for env_id in ENV_IDS:
        env = gym.make(env_id).unwrapped
        rng = np.random.default_rng(0)
        seed = iter(range(10**9))
        env.reset(seed=next(seed))

        def one_step(env=env, rng=rng, seed=seed):
            count = rng.integers(1, env.max_actions_per_turn + 1)
            moves = [DIRECTIONS[i] for i in rng.integers(0, 4, size=count)]
            _, _, terminated, truncated, _ = env.step(format_moves(moves))
            if terminated or truncated:
                env.reset(seed=next(seed))

        steps_rate, _ = rate(one_step, seconds, min_calls=100)
        print(f"{env_id:34} {steps_rate:10.0f}")


ENV_IDS = [
    "freshrl/Sokoban-v0",
    "freshrl/SokobanHard-v0",
    "freshrl/FrozenLake-v0",
    "freshrl/FrozenLakeVision-v0",
]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.env_throughput", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--seconds", type=float, default=3.0, help="wall time per measurement")
    args = parse_and_check(parser, argv, REQUIRES)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 5000))  # the baseline's DFS recurses up to 300 deep
    sokoban_rates(args.seconds)
    step_rates(args.seconds)


if __name__ == "__main__":
    main()
