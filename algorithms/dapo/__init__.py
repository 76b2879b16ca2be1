"""DAPO (Yu et al., 2025): Clip-Higher loss, group advantages, dynamic sampling, overlong reward shaping,
as a custom RLlib algorithm with optional FreshPER replay."""

from algorithms.dapo.config import DAPOConfig
from algorithms.dapo.dapo import DAPO
from algorithms.dapo.presets import ALGORITHM_PRESETS, apply_preset

__all__ = ["ALGORITHM_PRESETS", "DAPO", "DAPOConfig", "apply_preset"]
