"""Async mode resumes without losing the batch in flight: a run of 3 iterations saves a checkpoint after 2; a
new algorithm restored from it and trained 1 more ends where the run did (same metrics, same weights bitwise
on CPU). The checkpoint waits for the batch launched during the last update and stores its groups."""

from __future__ import annotations

import torch

from algorithms.dapo import DAPO, DAPOConfig

# Metrics that do not depend on timing.
COMPARED = (
    "rollout/reward_mean",
    "rollout/response_length_mean",
    "rollout/groups_sampled",
    "rollout/staleness_max",
    "rollout/groups_dropped_stale",
)
COMPARED_LEARNER = ("train/loss", "train/grad_norm", "train/tokens", "train/optimizer_steps_fresh")


def async_config(make) -> DAPOConfig:
    return make(rollout_mode="async", dynamic_sampling=False, overlong_filtering=False).env_runners(
        num_env_runners=1, create_local_env_runner=False
    )


def weights(algo: DAPO) -> dict[str, torch.Tensor]:
    state = algo.learner_group.get_state(components="learner/rl_module")
    return state["learner"]["rl_module"]["default_policy"]


def summary(result) -> dict[str, float]:
    values = {key: result[key] for key in COMPARED}
    values.update({key: result["learners"][key] for key in COMPARED_LEARNER})
    return values


def test_async_resume_equals_a_straight_run(small_dapo_config, ray_session, tmp_path):
    config = async_config(small_dapo_config)
    # The straight run takes the checkpoint on its way (saving must change nothing of it either).
    straight = config.build_algo()
    try:
        expected = [summary(straight.train()) for _ in range(2)]
        assert straight._in_flight is not None, "async mode has the next batch in flight at the checkpoint"
        checkpoint = straight.save_to_path(str(tmp_path / "checkpoint"))
        expected.append(summary(straight.train()))
        expected_weights = {k: v.clone() for k, v in weights(straight).items()}
    finally:
        straight.stop()
    resumed = config.build_algo()
    try:
        resumed.restore_from_path(checkpoint)
        assert resumed._in_flight is not None and resumed._in_flight.collected
        got = summary(resumed.train())
        got_weights = weights(resumed)
    finally:
        resumed.stop()

    assert got == expected[-1]
    assert all(torch.equal(got_weights[k], expected_weights[k]) for k in expected_weights)
