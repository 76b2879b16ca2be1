"""The advantage-estimator extension point (``DAPOConfig.advantage_estimator``): how one group's advantages
come from its shaped rewards, and what the estimator adds to dynamic sampling and to the logs.

An entry of :data:`ADVANTAGE_ESTIMATOR_REGISTRY` is a builder, ``config -> AdvantageEstimator``, called once
per run (``DAPO.setup``) with the run's DAPOConfig: the estimator takes its settings' values from there and
states no defaults of its own (tests/algorithms/test_defaults_once.py).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from algorithms.registry import Registry
from algorithms.trajectory import Trajectory


@dataclass(frozen=True)
class GroupAdvantages:
    """One group's advantages, index-aligned with its trajectories.

    episode: [G] float64, trajectory i's advantage (``Trajectory.advantage``).
    turns: per trajectory, one advantage per turn (``Trajectory.turn_advantages``, which collate puts on that
        turn's tokens); None: every token takes its trajectory's ``episode`` advantage.
    """

    episode: np.ndarray
    turns: list[list[float]] | None


class AdvantageEstimator(ABC):
    """Advantages of a group of G trajectories of one task (``advantages``, required) and three optional
    hooks, whose defaults leave DAPO as it is."""

    @abstractmethod
    def advantages(self, group: Sequence[Trajectory], rewards: np.ndarray) -> GroupAdvantages:
        """The advantages of ``group``, whose shaped rewards (episode return + overlong penalty, DAPO Eq. 13)
        are ``rewards`` ([G] float64)."""

    def also_keep(self, group: Sequence[Trajectory]) -> bool:
        """Whether dynamic sampling keeps this shaped group though its metric values are all equal: it carries
        a signal this estimator uses and the metric does not see. Default: never (DAPO Eq. 11 alone)."""
        return False

    def generation_batch_metrics(self, groups: Sequence[Sequence[Trajectory]]) -> dict[str, float]:
        """Counts over one generation batch's shaped groups (every group, kept or not), summed over the
        iteration's batches. Default: none."""
        return {}

    def training_batch_metrics(self, groups: Sequence[Sequence[Trajectory]]) -> dict[str, float]:
        """Statistics of the iteration's training batch (the groups dynamic sampling kept), averaged.
        Default: none."""
        return {}


# The config is typed Any here: DAPOConfig's module imports this one. Each builder types the keys it reads.
ADVANTAGE_ESTIMATOR_REGISTRY: Registry[Callable[[Any], AdvantageEstimator]] = Registry(
    "advantage estimator",
    key="advantage_estimator",
    home="algorithms.dapo.advantage_estimators:ADVANTAGE_ESTIMATOR_REGISTRY",
)
