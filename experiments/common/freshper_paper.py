"""FreshPER's Table 1, the figures our replay comparisons are set beside.

Peak performance of on-policy training, standard PER and FreshPER with a REINFORCE++ backbone on
Qwen2.5-class LLMs and VLMs (0.5B-7B), as the authors' public repository reports it; the paper reports score
(return) for Sokoban and exact match for NQ Search, success elsewhere.
"""

from __future__ import annotations

# task -> (metric, on-policy, standard PER, FreshPER)
PAPER_TABLE_1: dict[str, tuple[str, float, float, float]] = {
    "NQ Search (LLM)": ("exact match", 0.508, 0.336, 0.742),
    "AIME (LLM)": ("success", 0.205, 0.168, 0.242),
    "Sokoban Simple (LLM)": ("score", 0.493, -0.907, 2.304),
    "Sokoban Hard (LLM)": ("score", -0.842, -0.847, -0.512),
    "FrozenLake (LLM)": ("success", 0.297, 0.281, 0.305),
    "FrozenLake (VLM)": ("success", 0.270, 0.250, 0.630),
    "GeoQA (VLM)": ("success", 0.475, 0.447, 0.481),
}
# The paper's task closest to each freshrl env.
PAPER_TASK = {
    "freshrl/NQSearch-v0": "NQ Search (LLM)",
    "freshrl/Math-v0": "AIME (LLM)",
    "freshrl/Sokoban-v0": "Sokoban Simple (LLM)",
    "freshrl/SokobanHard-v0": "Sokoban Hard (LLM)",
    "freshrl/FrozenLake-v0": "FrozenLake (LLM)",
    "freshrl/FrozenLakeVision-v0": "FrozenLake (VLM)",
}


# The paper's arms by our replay mode names (PAPER_TABLE_1's columns after the metric).
PAPER_ARMS = {"on_policy": 1, "per": 2, "freshper": 3}


def proportional_effect(env: str, arm: str, arm_gain: float) -> float | None:
    """The difference FreshPER would make over ``arm`` here if it helped as in the paper, in proportion:
    the paper's relative gain of FreshPER over that arm (Table 1, e.g. NQ Search: 0.742 / 0.508 - 1 = +46%
    over on-policy) applied to ``arm``'s own gain in our run (its success over the start). None where the
    paper has no such task or arm, or reports a score whose ratio means nothing (Sokoban's, negative)."""
    task = PAPER_TASK.get(env)
    if task is None or arm not in PAPER_ARMS or arm == "freshper":
        return None
    metric, *values = PAPER_TABLE_1[task]
    base = values[PAPER_ARMS[arm] - 1]
    if metric == "score" or base <= 0:
        return None
    return (values[PAPER_ARMS["freshper"] - 1] / base - 1) * arm_gain
