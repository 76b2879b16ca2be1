"""Replay backfill (.replay(backfill=True)): an iteration that dynamic sampling leaves short trains on groups'
worth of trajectories from the buffer, with their IS weights, instead of training short."""

from __future__ import annotations

import numpy as np
import pytest

from algorithms.dapo import DAPO


def all_informative(group) -> list[float]:
    return [0.0] + [1.0] * (len(group) - 1)


def none_informative(group) -> list[float]:
    return [0.0] * len(group)


@pytest.mark.parametrize("backfill", [True, False])
def test_short_batch_is_filled_from_the_buffer(small_dapo_config, monkeypatch, backfill):
    passes: list[tuple[str, int, np.ndarray | None]] = []
    learn = DAPO.update_learners

    def recording_learn(self, trajectories, weights, tag):
        passes.append((tag, len(trajectories), None if weights is None else np.asarray(weights)))
        return learn(self, trajectories, weights, tag)

    monkeypatch.setattr(DAPO, "update_learners", recording_learn)
    config = small_dapo_config(
        dynamic_sampling=True, max_generation_batches=1, overlong_filtering=False
    ).replay(mode="freshper", tau=4.0, backfill=backfill)
    algo = config.build_algo()
    try:
        # Iteration 1: every group is informative, trained on and stored (2 groups x 2 samples).
        algo.sampler.metric = all_informative
        first = algo.train()
        assert first["rollout/groups_backfilled"] == 0 and algo.counters.replay_size == 4
        # Iteration 2: dynamic sampling finds nothing within its budget.
        algo.sampler.metric = none_informative
        passes.clear()
        second = algo.train()
    finally:
        algo.stop()

    assert second["rollout/groups_kept"] == 0 and second["rollout/budget_exhausted"] == 1.0
    tags = [tag for tag, _, _ in passes]
    assert "fresh" not in tags
    if not backfill:
        assert second["rollout/groups_backfilled"] == 0 and "backfill" not in tags
        return
    assert second["rollout/groups_backfilled"] == 2
    ((_, rows, weights),) = [p for p in passes if p[0] == "backfill"]
    assert rows == 4  # the 2 missing groups x G = 2
    assert weights is not None and np.all((weights > 0) & (weights <= 1))
    assert second["learners"]["train/optimizer_steps_backfill"] >= 1
