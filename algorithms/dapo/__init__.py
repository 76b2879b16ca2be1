"""DAPO (Yu et al., 2025): Clip-Higher loss, group advantages, dynamic sampling, overlong reward shaping,
as a custom RLlib algorithm with optional FreshPER replay."""

from algorithms.dapo.config import DAPOConfig
from algorithms.dapo.dapo import DAPO
from algorithms.dapo.ladder import ALGORITHMS, apply_algorithm
from algorithms.dapo.scales import SCALES, apply_scale

__all__ = ["ALGORITHMS", "DAPO", "SCALES", "DAPOConfig", "apply_algorithm", "apply_scale"]
