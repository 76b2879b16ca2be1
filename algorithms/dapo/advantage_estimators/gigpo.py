"""GiGPO as an advantage estimator (``advantage_estimator="gigpo"``): the episode advantage plus omega x each
turn's step advantage among the turns that start from the same env state (GiGPO, arXiv 2505.10978, Eq. 3-8;
the method is algorithms/dapo/gigpo.py, the walkthrough docs/credit_assignment.md).

A group none of whose turns has a state key (the env reports none) keeps episode advantages; the run counts
such groups (``gigpo/groups_without_state_keys``) and says so once.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from algorithms.dapo.advantage_estimators.base import (
    ADVANTAGE_ESTIMATOR_REGISTRY,
    AdvantageEstimator,
    GroupAdvantages,
)
from algorithms.dapo.advantages import group_advantages
from algorithms.dapo.gigpo import (
    GiGPOFallbackWarning,
    gigpo_credit,
    has_state_keys,
    has_step_signal,
    step_group_metrics,
)
from algorithms.trajectory import Trajectory


@dataclass
class GiGPO(AdvantageEstimator):
    """gamma: the step return's discount (Eq. 5). step_weight: omega (Eq. 8). eps, std_normalize: the
    normalisation of the episode and step advantages alike (DAPO Eq. 9, Dr. GRPO without the std)."""

    gamma: float
    step_weight: float
    eps: float
    std_normalize: bool
    # The fallback is said once per run: DAPO builds its estimator once, in setup.
    _warned_no_state_keys: bool = field(default=False, init=False, repr=False, compare=False)

    def advantages(self, group: Sequence[Trajectory], rewards: np.ndarray) -> GroupAdvantages:
        episode = group_advantages(rewards[None, :], eps=self.eps, std_normalize=self.std_normalize)[0]
        if not has_state_keys(group):
            return GroupAdvantages(episode=episode, turns=None)
        return GroupAdvantages(episode=episode, turns=self._credit(group, episode).turn_advantages)

    def also_keep(self, group: Sequence[Trajectory]) -> bool:
        """A group whose episodes tie on the metric can still have acted differently from a shared state."""
        return has_step_signal(group)

    def generation_batch_metrics(self, groups: Sequence[Sequence[Trajectory]]) -> dict[str, float]:
        missing = sum(not has_state_keys(group) for group in groups)
        if missing and not self._warned_no_state_keys:
            self._warned_no_state_keys = True
            warnings.warn(
                f"advantage_estimator='gigpo', but {missing} of {len(groups)} groups have no turn with an "
                "info['state_key'] (the env reports none: docs/adding_an_env.md, \"State keys\"), so they "
                "train on episode advantages; counted in gigpo/groups_without_state_keys. Said once per run",
                GiGPOFallbackWarning,
                stacklevel=2,
            )
        return {"gigpo/groups_without_state_keys": missing}

    def training_batch_metrics(self, groups: Sequence[Sequence[Trajectory]]) -> dict[str, float]:
        """How many turns share a step group, and the step advantages' spread (``step_group_metrics``)."""
        credits = [self._credit(g, [t.advantage for t in g]) for g in groups if has_state_keys(g)]
        return step_group_metrics(credits)

    def _credit(self, group: Sequence[Trajectory], episode: Sequence[float]):
        return gigpo_credit(
            group,
            episode,
            gamma=self.gamma,
            step_weight=self.step_weight,
            eps=self.eps,
            std_normalize=self.std_normalize,
        )


class GiGPOSettings(Protocol):
    """The DAPOConfig keys :func:`gigpo` reads."""

    advantage_eps: float
    advantage_std_normalize: bool
    gigpo_gamma: float
    gigpo_step_weight: float


@ADVANTAGE_ESTIMATOR_REGISTRY.register("gigpo")
def gigpo(config: GiGPOSettings) -> GiGPO:
    return GiGPO(
        gamma=config.gigpo_gamma,
        step_weight=config.gigpo_step_weight,
        eps=config.advantage_eps,
        std_normalize=config.advantage_std_normalize,
    )
