"""Env benchmark: Sokoban levels per second, and env steps per second, against a baseline in the same run.

Levels: ``envs.sokoban_levels.generate_level`` with each preset's settings, which includes the exhaustive
reverse-play BFS that certifies the optimal solution length. Baseline: gym-sokoban's generator, ported below
(random room topology, random player and targets, depth-first reverse play with its TTL of 300 and its cap of
300,000 explored states, keep the state with the best box-swaps x displacement score, up to 4 rooms, retry
on failure). It gives no solution length. The ratio is ours / baseline.

Steps: ``env.step`` per second with random strict answers (1..max_actions_per_turn random moves), resets
included, for each grid env.

    python -m experiments.benchmarks.env_throughput              # 3 s per measurement
    python -m experiments.benchmarks.env_throughput --seconds 1
"""

from __future__ import annotations

import argparse
import marshal
import sys
import time
from collections.abc import Callable

import gymnasium as gym
import numpy as np

import envs  # noqa: F401  (registers the envs)
from envs.gridworld import DIRECTIONS, format_moves
from envs.sokoban import PRESETS
from envs.sokoban_levels import generate_level

# ------------------------------------------------------------------------------------ gym-sokoban baseline
# Room codes as in gym-sokoban: 0 wall, 1 floor, 2 target, 3 box on target, 4 box, 5 player.
_CHANGE = {0: (-1, 0), 1: (1, 0), 2: (0, -1), 3: (0, 1)}
_MASKS = [
    [[0, 0, 0], [1, 1, 1], [0, 0, 0]],
    [[0, 1, 0], [0, 1, 0], [0, 1, 0]],
    [[0, 0, 0], [1, 1, 0], [0, 1, 0]],
    [[0, 0, 0], [1, 1, 0], [1, 1, 0]],
    [[0, 0, 0], [0, 1, 1], [0, 1, 0]],
]


class GymSokobanGenerator:
    """gym-sokoban's ``generate_room``, with its global ``random`` replaced by a seeded numpy Generator."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng

    def topology(self, dim, p_change=0.35, steps=15):
        dim_x, dim_y = dim
        directions = [(1, 0), (0, 1), (-1, 0), (0, -1)]
        direction = directions[self.rng.integers(4)]
        position = np.array([self.rng.integers(1, dim_x), self.rng.integers(1, dim_y)])
        level = np.zeros(dim, dtype=int)
        for _ in range(steps):
            if self.rng.random() < p_change:
                direction = directions[self.rng.integers(4)]
            position = position + direction
            position[0] = max(min(position[0], dim_x - 2), 1)
            position[1] = max(min(position[1], dim_y - 2), 1)
            mask = _MASKS[self.rng.integers(len(_MASKS))]
            start = position - 1
            level[start[0] : start[0] + 3, start[1] : start[1] + 3] += mask
        level[level > 0] = 1
        level[:, [0, dim_y - 1]] = 0
        level[[0, dim_x - 1], :] = 0
        return level

    def place(self, room, num_boxes):
        positions = np.where(room == 1)
        if positions[0].shape[0] <= num_boxes + 1:
            raise RuntimeError("Not enough free spots")
        i = self.rng.integers(positions[0].shape[0])
        room[positions[0][i], positions[1][i]] = 5
        for _ in range(num_boxes):
            positions = np.where(room == 1)
            i = self.rng.integers(positions[0].shape[0])
            room[positions[0][i], positions[1][i]] = 2
        return room

    def reverse_playing(self, room_state, room_structure):
        boxes = np.where(room_structure == 2)
        self.num_boxes = len(boxes[0])
        mapping = {(boxes[0][i], boxes[1][i]): (boxes[0][i], boxes[1][i]) for i in range(self.num_boxes)}
        self.explored = set()
        self.best_score, self.best_room, self.best_mapping = -1, None, mapping
        self.dfs(room_state, room_structure, mapping, 0, (-1, -1), 300)
        return self.best_room, self.best_score

    def dfs(self, room_state, room_structure, mapping, box_swaps, last_pull, ttl):
        ttl -= 1
        if ttl <= 0 or len(self.explored) >= 300_000:
            return
        key = marshal.dumps(room_state)
        if key in self.explored:
            return
        score = box_swaps * sum(abs(a - c) + abs(b - d) for (a, b), (c, d) in mapping.items())
        if np.where(room_state == 2)[0].shape[0] != self.num_boxes:
            score = 0
        if score > self.best_score:
            self.best_room, self.best_score, self.best_mapping = room_state, score, mapping
        self.explored.add(key)
        for action in range(8):
            state_next, mapping_next = room_state.copy(), mapping.copy()
            state_next, mapping_next, pull_next = self.reverse_move(
                state_next, room_structure, mapping_next, last_pull, action
            )
            swaps_next = box_swaps + (pull_next != last_pull)
            self.dfs(state_next, room_structure, mapping_next, swaps_next, last_pull, ttl)

    @staticmethod
    def reverse_move(room_state, room_structure, mapping, last_pull, action):
        where = np.where(room_state == 5)
        player = np.array([where[0][0], where[1][0]])
        change = _CHANGE[action % 4]
        nxt = player + change
        if room_state[nxt[0], nxt[1]] in (1, 2):
            room_state[player[0], player[1]] = room_structure[player[0], player[1]]
            room_state[nxt[0], nxt[1]] = 5
            if action < 4:
                box = player - change
                if room_state[box[0], box[1]] in (3, 4):
                    room_state[player[0], player[1]] = 3
                    room_state[box[0], box[1]] = room_structure[box[0], box[1]]
                    for k in mapping:
                        if mapping[k] == (box[0], box[1]):
                            mapping[k] = (player[0], player[1])
                            last_pull = k
        return room_state, mapping, last_pull

    def generate(self, dim, num_boxes, tries=4):
        steps = int(1.7 * (dim[0] + dim[1]))
        score = 0
        for _ in range(tries):
            room = self.place(self.topology(dim, steps=steps), num_boxes)
            structure = room.copy()
            structure[structure == 5] = 1
            state = room.copy()
            state[state == 2] = 4
            state, score = self.reverse_playing(state, structure)
            if score > 0:
                return structure, state
        raise RuntimeError("Generated Model with score == 0")


def gym_sokoban_level(gen: GymSokobanGenerator, dim, num_boxes):
    """One level, retrying on gym-sokoban's failures as its users do."""
    while True:
        try:
            return gen.generate(dim, num_boxes)
        except RuntimeError:
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
    print(f"{'preset':8} {'room':>5} {'boxes':>5} {'ours/s':>10} {'gym-sokoban/s':>14} {'ratio':>8}")
    for name, preset in PRESETS.items():
        rng = np.random.default_rng(0)

        def ours(preset=preset, rng=rng):
            return generate_level(
                rng,
                dim=preset.dim,
                num_boxes=preset.num_boxes,
                min_length=preset.min_solution_length,
                max_length=preset.max_solution_length,
            )

        ours()  # numba compile / cache load outside the timing
        ours_rate, _ = rate(ours, seconds)
        gen = GymSokobanGenerator(np.random.default_rng(0))
        base_rate, _ = rate(lambda gen=gen, p=preset: gym_sokoban_level(gen, p.dim, p.num_boxes), seconds)
        dim = f"{preset.dim[0]}x{preset.dim[1]}"
        ratio = ours_rate / base_rate
        print(f"{name:8} {dim:>5} {preset.num_boxes:>5} {ours_rate:10.0f} {base_rate:14.1f} {ratio:7.1f}x")


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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="wall time per measurement")
    args = parser.parse_args(argv)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 5000))  # the baseline's DFS recurses up to 300 deep
    sokoban_rates(args.seconds)
    step_rates(args.seconds)


if __name__ == "__main__":
    main()
