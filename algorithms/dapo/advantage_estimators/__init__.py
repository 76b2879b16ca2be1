"""The advantage estimators by name (``DAPOConfig.advantage_estimator``): the interface and registry
(``base.py``) and one file per built-in, imported here so that they are registered before any lookup."""

from algorithms.dapo.advantage_estimators.base import (
    ADVANTAGE_ESTIMATOR_REGISTRY,
    AdvantageEstimator,
    GroupAdvantages,
)
from algorithms.dapo.advantage_estimators.episode import EpisodeAdvantage
from algorithms.dapo.advantage_estimators.gigpo import GiGPO

__all__ = [
    "ADVANTAGE_ESTIMATOR_REGISTRY",
    "AdvantageEstimator",
    "EpisodeAdvantage",
    "GiGPO",
    "GroupAdvantages",
]
