"""DAPO's Table 1 ladder: the algorithms from naive GRPO to DAPO (``--algorithm``).

The ladder is cumulative, as in DAPO's Table 1 (AIME 2024 avg@32 with Qwen2.5-32B): naive GRPO 30,
+overlong filtering 36, +clip-higher 38, +soft overlong punishment 41, +token-level loss 42,
+dynamic sampling (= DAPO) 50. Each rung is a plain mapping of DAPOConfig keys: those it changes from
DAPOConfig's defaults, which are DAPO's, so it is applied to a config that holds them (``build_config``
applies it to a new one).
"""

from __future__ import annotations

from typing import Any

from algorithms.dapo.config import DAPOConfig

# Naive GRPO as what it changes from DAPOConfig, whose defaults are DAPO's: one key per technique of Table 1.
_NAIVE_GRPO: dict[str, Any] = {
    "overlong_filtering": False,
    "eps_high": 0.2,  # symmetric clip
    "overlong_punishment": False,
    "loss_agg_mode": "seq-mean-token-mean",
    "dynamic_sampling": False,
}

# Each rung adds DAPO's technique back, which drops its key: a rung holds only what it changes from DAPOConfig
# (DAPO itself, nothing), so the value of a technique is stated once, as DAPOConfig's default.
_LADDER_STEPS: list[tuple[str, str | None]] = [
    ("grpo", None),
    ("grpo+overlong_filtering", "overlong_filtering"),
    ("grpo+clip_higher", "eps_high"),
    ("grpo+soft_punishment", "overlong_punishment"),
    ("grpo+token_loss", "loss_agg_mode"),
    ("dapo", "dynamic_sampling"),
]


def _ladder() -> dict[str, dict[str, Any]]:
    rungs, settings = {}, dict(_NAIVE_GRPO)
    for name, added in _LADDER_STEPS:
        settings = {key: value for key, value in settings.items() if key != added}
        rungs[name] = settings
    return rungs


ALGORITHMS: dict[str, dict[str, Any]] = _ladder()


def apply_algorithm(config: DAPOConfig, name: str = "dapo") -> DAPOConfig:
    """``config`` set to the ladder's algorithm ``name`` (a key of ``ALGORITHMS``)."""
    if name not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {sorted(ALGORITHMS)} (DAPO's Table 1), got {name!r}")
    return config.set_keys(ALGORITHMS[name], f"algorithm {name}")
