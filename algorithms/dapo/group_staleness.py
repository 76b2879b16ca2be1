"""Staleness of rollout groups: policy versions between the policy that generated a group and the one it would
train (AReaL, Fu et al. 2025, bounds it the same way). A group's staleness counts from its oldest turn."""

from __future__ import annotations

from algorithms.trajectory import Trajectory

Group = list[Trajectory]


def group_staleness(group: Group, policy_version: int) -> int:
    """``policy_version`` minus the oldest turn's version in the group."""
    return policy_version - min(t.oldest_policy_version for t in group)


def within_staleness(groups: list[Group], policy_version: int, max_staleness: int) -> list[Group]:
    """The groups at most ``max_staleness`` versions older than ``policy_version``, in order."""
    return [group for group in groups if group_staleness(group, policy_version) <= max_staleness]
