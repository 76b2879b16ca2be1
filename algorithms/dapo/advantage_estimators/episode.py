"""Episode advantages (``advantage_estimator="episode"``, the default): DAPO Eq. 9's group-relative advantage
of the shaped reward on every token of the episode (algorithms/dapo/advantages.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from algorithms.dapo.advantage_estimators.base import (
    ADVANTAGE_ESTIMATOR_REGISTRY,
    AdvantageEstimator,
    GroupAdvantages,
)
from algorithms.dapo.advantages import group_advantages
from algorithms.trajectory import Trajectory


@dataclass(frozen=True)
class EpisodeAdvantage(AdvantageEstimator):
    """A_i = (R_i - mean_G R) / (std_G R + eps), or R_i - mean_G R without ``std_normalize`` (Dr. GRPO)."""

    eps: float
    std_normalize: bool

    def advantages(self, group: Sequence[Trajectory], rewards: np.ndarray) -> GroupAdvantages:
        episode = group_advantages(rewards[None, :], eps=self.eps, std_normalize=self.std_normalize)[0]
        return GroupAdvantages(episode=episode, turns=None)


class EpisodeSettings(Protocol):
    """The DAPOConfig keys :func:`episode` reads."""

    advantage_eps: float
    advantage_std_normalize: bool


@ADVANTAGE_ESTIMATOR_REGISTRY.register("episode")
def episode(config: EpisodeSettings) -> EpisodeAdvantage:
    return EpisodeAdvantage(eps=config.advantage_eps, std_normalize=config.advantage_std_normalize)
