"""The dynamic-sampling metric extension point (``DAPOConfig.dynamic_sampling_metric``): per-trajectory values
of a shaped group; dynamic sampling keeps the group when they are not all equal (DAPO Eq. 11, section 3.2;
algorithms/dapo/dynamic_sampling.py). An entry of :data:`DYNAMIC_SAMPLING_METRIC_REGISTRY` is the metric
itself, a function of the group."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from algorithms.registry import Registry
from algorithms.trajectory import Trajectory

SamplingMetric = Callable[[Sequence[Trajectory]], Sequence[float]]

DYNAMIC_SAMPLING_METRIC_REGISTRY: Registry[SamplingMetric] = Registry(
    "dynamic-sampling metric",
    key="dynamic_sampling_metric",
    home="algorithms.dapo.dynamic_sampling_metrics:DYNAMIC_SAMPLING_METRIC_REGISTRY",
)


@DYNAMIC_SAMPLING_METRIC_REGISTRY.register("success")
def group_successes(group: Sequence[Trajectory]) -> list[float]:
    """Accuracy: 1 for a successful episode (``info["success"]``), else 0. Equal values mean #correct is 0 or
    G, the groups DAPO's constraint 0 < #correct < G drops (DAPO Eq. 11, section 3.2)."""
    return [float(t.success) for t in group]


@DYNAMIC_SAMPLING_METRIC_REGISTRY.register("reward")
def group_rewards(group: Sequence[Trajectory]) -> list[float]:
    """The shaped rewards (overlong penalty included): equal values mean zero advantages. For envs whose
    success is not binary (partial credit), where accuracy cannot say whether a group is informative."""
    return [t.reward for t in group]
