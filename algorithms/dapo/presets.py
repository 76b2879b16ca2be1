"""Transitional: the old names of ``algorithms.dapo.ladder`` and ``algorithms.dapo.scales`` while callers
switch (issue 14 item 2); removed once nothing imports it."""

from __future__ import annotations

from algorithms.dapo.config import DAPOConfig
from algorithms.dapo.ladder import ALGORITHMS as ALGORITHM_PRESETS
from algorithms.dapo.ladder import apply_algorithm
from algorithms.dapo.scales import SMOLLM2_SCALE, TINY_REPLAY, TINY_SCALE, apply_scale

__all__ = ["ALGORITHM_PRESETS", "SMOLLM2_SCALE", "TINY_REPLAY", "TINY_SCALE", "apply_preset"]


def apply_preset(config: DAPOConfig, algorithm: str = "dapo", *, tiny: bool = False) -> DAPOConfig:
    config = apply_algorithm(config, algorithm)
    return apply_scale(config, "tiny") if tiny else config
