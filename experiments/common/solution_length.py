"""Held-out success by the length of each task's solution: where in the task distribution a lab entry's policy
succeeds, gains, or has nothing to reinforce.

A task's length is the number of moves the env's oracle plays (``oracle_actions()``: BFS on FrozenLake, the
solver on Sokoban, BabyAIBot on BabyAI). Tasks are grouped into bins of length; each bin gets the start's and
the end's success (each task's rate averaged over the seeds, then over the bin's tasks) and the blind policy's
(docs/learning_lab.md, "The blind floor"). A bin whose start is near zero gives RL all-fail groups only, which
dynamic sampling drops: a gain there must come from transfer, not from reinforcement. Envs without
``oracle_actions`` (Math, search) have no lengths.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

import envs  # noqa: F401  (registers the ids)
from experiments.common.significance import task_outcomes

# Lengths in moves, (lowest, highest) of each bin; the last is open-ended.
BINS: tuple[tuple[int, int | None], ...] = ((0, 2), (3, 4), (5, 6), (7, 9), (10, None))


def oracle_lengths(env_id: str, env_config: Mapping[str, Any], task_seeds: Sequence[int]) -> list[int] | None:
    """The oracle's number of moves on each task (the reset seeds an evaluation played); None where the env
    has no ``oracle_actions``."""
    env = gym.make(env_id, **env_config).unwrapped
    try:
        if not hasattr(env, "oracle_actions"):
            return None
        lengths = []
        for task in task_seeds:
            env.reset(seed=int(task))
            lengths.append(len(env.oracle_actions()))
        return lengths
    finally:
        env.close()


def bin_label(low: int, high: int | None) -> str:
    """ "3-4", "10+"."""
    return f"{low}+" if high is None else f"{low}-{high}"


def success_by_length(lengths: Sequence[int], rates: Mapping[str, Sequence[float]]) -> list[dict[str, Any]]:
    """One row per non-empty bin of :data:`BINS`: its label, its number of tasks, and the mean over its tasks
    of each of ``rates`` (name -> one success rate per task, in the order of ``lengths``)."""
    lengths = np.asarray(lengths)
    for name, values in rates.items():
        if len(values) != len(lengths):
            raise ValueError(f"{name} has {len(values)} tasks' rates for {len(lengths)} tasks' lengths")
    rows = []
    for low, high in BINS:
        inside = (lengths >= low) & (lengths <= (np.inf if high is None else high))
        if inside.any():
            row: dict[str, Any] = {"moves": bin_label(low, high), "tasks": int(inside.sum())}
            row.update({name: float(np.asarray(values)[inside].mean()) for name, values in rates.items()})
            rows.append(row)
    return rows


def task_rates(runs: Sequence[Mapping[str, Any]], point: int, tasks: Sequence[int]) -> list[float]:
    """Each of ``tasks``' success rate at evaluation ``point`` (0: the start, -1: the end), averaged over
    ``runs`` (the seeds), from the evaluations' per-task outcomes matched by task seed."""
    per_run = []
    for run in runs:
        outcomes = task_outcomes(run["curve"][point]["metrics"])
        if outcomes is None:
            raise ValueError("an evaluation of the run has no per-task outcomes (task_seeds, task_successes)")
        per_run.append([outcomes[int(task)] for task in tasks])
    return np.mean(per_run, axis=0).tolist()


def markdown_lines(rows: Sequence[Mapping[str, Any]] | None) -> list[str]:
    """The report's table of success by solution length (nothing without lengths)."""
    if not rows:
        return []
    lines = [
        "## Success by solution length",
        "",
        "Validation tasks grouped by the number of moves the env's oracle needs; each cell is the mean over "
        "the bin's tasks of each task's success rate (averaged over the seeds; the blind policy's over its "
        "episodes). Bins whose start is near zero give RL only all-fail groups, which dynamic sampling "
        "drops.",
        "",
        "| oracle moves | tasks | blind | start | end | gain |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        blind = "n/a" if row.get("blind") is None else f"{100 * row['blind']:.1f}%"
        lines.append(
            f"| {row['moves']} | {row['tasks']} | {blind} | {100 * row['start']:.1f}% | "
            f"{100 * row['end']:.1f}% | {100 * (row['end'] - row['start']):+.1f} |"
        )
    return [*lines, ""]
