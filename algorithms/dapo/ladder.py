"""DAPO's Table 1 ladder: the algorithms from naive GRPO to DAPO (``--algorithm``).

The ladder is cumulative, as in DAPO's Table 1 (AIME 2024 avg@32 with Qwen2.5-32B): naive GRPO 30,
+overlong filtering 36, +clip-higher 38, +soft overlong punishment 41, +token-level loss 42,
+dynamic sampling (= DAPO) 50. Each rung is a set of ``DAPOConfig.training`` keys.
"""

from __future__ import annotations

from typing import Any

from algorithms.dapo.config import DAPOConfig

_NAIVE_GRPO: dict[str, Any] = {
    "eps_high": 0.2,  # symmetric clip
    "loss_agg_mode": "seq-mean-token-mean",
    "overlong_filtering": False,
    "overlong_punishment": False,
    "dynamic_sampling": False,
}

_LADDER_STEPS: list[tuple[str, dict[str, Any]]] = [
    ("grpo", {}),
    ("grpo+overlong_filtering", {"overlong_filtering": True}),
    ("grpo+clip_higher", {"eps_high": 0.28}),
    ("grpo+soft_punishment", {"overlong_punishment": True}),
    ("grpo+token_loss", {"loss_agg_mode": "token-mean"}),
    ("dapo", {"dynamic_sampling": True}),
]


def _ladder() -> dict[str, dict[str, Any]]:
    rungs, settings = {}, dict(_NAIVE_GRPO)
    for name, change in _LADDER_STEPS:
        settings = {**settings, **change}
        rungs[name] = settings
    return rungs


ALGORITHMS: dict[str, dict[str, Any]] = _ladder()


def apply_algorithm(config: DAPOConfig, name: str = "dapo") -> DAPOConfig:
    """``config`` set to the ladder's algorithm ``name`` (a key of ``ALGORITHMS``)."""
    if name not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {sorted(ALGORITHMS)} (DAPO's Table 1), got {name!r}")
    return config.training(**ALGORITHMS[name])
