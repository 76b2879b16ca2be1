"""GiGPO whose dynamic sampling looks at episode outcomes only: the filter before GiGPO's step signal was
kept (``GiGPO.also_keep``), so that a comparison measures what keeping those groups does.

    python -m experiments.compare --settings experiments/settings/lab/sokoban_short.yaml --seeds 3 \\
        --arms advantage_estimator=gigpo,experiments.ablations.gigpo_episode_filter:gigpo_episode_filter

A group whose episodes tie on the dynamic-sampling metric but whose turns differ from a shared state (GiGPO's
step advantages not all zero) is dropped here, kept by ``gigpo``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from algorithms.dapo.advantage_estimators.base import ADVANTAGE_ESTIMATOR_REGISTRY
from algorithms.dapo.advantage_estimators.gigpo import GiGPO, GiGPOSettings, gigpo
from algorithms.trajectory import Trajectory


@dataclass
class GiGPOEpisodeFilter(GiGPO):
    def also_keep(self, group: Sequence[Trajectory]) -> bool:
        """Never: dynamic sampling keeps DAPO's Eq. 11 groups only, as with episode advantages."""
        return False


@ADVANTAGE_ESTIMATOR_REGISTRY.register("gigpo_episode_filter")
def gigpo_episode_filter(config: GiGPOSettings) -> GiGPOEpisodeFilter:
    built = gigpo(config)
    return GiGPOEpisodeFilter(
        gamma=built.gamma, step_weight=built.step_weight, eps=built.eps, std_normalize=built.std_normalize
    )
