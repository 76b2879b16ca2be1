"""Async rollouts (rollout_mode="async"): per-turn policy versions, the config's checks, and a real run with
one remote EnvRunner in which no group older than max_staleness reaches the learner's fresh pass and which
resumes from a checkpoint without losing the batch in flight."""

from __future__ import annotations

import gymnasium as gym
import pytest
import torch
from character_renderer import CharacterRenderer

import envs  # noqa: F401  (registers the envs)
from algorithms.dapo import DAPO, DAPOConfig
from algorithms.dapo.group_staleness import group_staleness, within_staleness
from algorithms.rollout import rollout_groups
from envs.seeds import SPLITS
from models.engine import Completion, SamplingConfig


class NonsenseEngine:
    """Answers every prompt with 4 tokens the env cannot use, so every episode runs to its turn limit."""

    def generate(self, prompts, sampling: SamplingConfig) -> list[list[Completion]]:
        return [[Completion([1] * 4, [-0.5] * 4, "stop", "no moves here")] for _ in prompts]


def test_every_turn_records_the_policy_version_that_produced_it():
    env_list = [gym.make("freshrl/FrozenLake-v0", max_turns=3) for _ in range(2)]
    (group,) = rollout_groups(
        NonsenseEngine(),
        CharacterRenderer(),
        env_list,
        [SPLITS["train"][0]],
        2,
        SamplingConfig(max_tokens=8),
        max_context_tokens=4096,
        policy_version=7,
    )
    for trajectory in group:
        assert trajectory.num_turns == 3
        assert trajectory.turn_policy_versions == [7, 7, 7]
        assert trajectory.oldest_policy_version == 7


def test_oldest_policy_version_is_the_oldest_turn():
    (group,) = rollout_groups(
        NonsenseEngine(),
        CharacterRenderer(),
        [gym.make("freshrl/FrozenLake-v0", max_turns=2)],
        [SPLITS["train"][0]],
        1,
        SamplingConfig(max_tokens=8),
        max_context_tokens=4096,
        policy_version=5,
    )
    (trajectory,) = group
    trajectory.turn_policy_versions = [3, 5]  # a rollout that straddled a weight update
    assert trajectory.oldest_policy_version == 3
    trajectory.turn_policy_versions = []  # not recorded: the trajectory's own version
    assert trajectory.oldest_policy_version == trajectory.policy_version == 5


def recorded_group(*turn_versions: list[int]) -> list:
    """A group of trajectories whose turns were produced by the given policy versions."""
    (group,) = rollout_groups(
        NonsenseEngine(),
        CharacterRenderer(),
        [gym.make("freshrl/FrozenLake-v0", max_turns=2) for _ in turn_versions],
        [SPLITS["train"][0]],
        len(turn_versions),
        SamplingConfig(max_tokens=8),
        max_context_tokens=4096,
        policy_version=max(max(v) for v in turn_versions),
    )
    for trajectory, versions in zip(group, turn_versions, strict=True):
        trajectory.turn_policy_versions = list(versions)
    return group


def test_groups_past_max_staleness_are_dropped_counting_from_the_oldest_turn():
    fresh, one_old, two_old = recorded_group([3, 3]), recorded_group([2, 2]), recorded_group([1, 1])
    straddling = recorded_group([3, 3], [1, 3])  # one member's first turn is 2 versions old
    assert [group_staleness(g, 3) for g in (fresh, one_old, two_old, straddling)] == [0, 1, 2, 2]
    groups = [fresh, one_old, two_old, straddling]
    assert within_staleness(groups, 3, max_staleness=1) == [fresh, one_old]
    # Sync mode's surplus is one version old: kept at the default 1, dropped at 0.
    assert within_staleness([one_old], 3, max_staleness=0) == []
    assert within_staleness(groups, 3, max_staleness=2) == groups


@pytest.mark.parametrize(
    ("settings", "runners", "message"),
    [
        ({"rollout_mode": "async"}, 0, "num_env_runners=1"),
        ({"rollout_mode": "async", "max_staleness": 0}, 1, "max_staleness must be >= 1"),
        ({"rollout_mode": "later"}, 1, "rollout_mode must be one of"),
        ({"max_staleness": -1}, 0, "max_staleness must be an integer >= 0"),
    ],
)
def test_config_names_the_fix(settings, runners, message):
    config = DAPOConfig().environment("freshrl/FrozenLake-v0").training(**settings)
    config.env_runners(num_env_runners=runners)
    with pytest.raises(ValueError, match=message):
        config.validate()


def test_backfill_needs_a_buffer():
    config = DAPOConfig().environment("freshrl/FrozenLake-v0").replay(backfill=True)
    with pytest.raises(ValueError, match="mode='freshper'"):
        config.validate()


def test_mismatch_correction_auto_is_on_in_async_mode():
    config = DAPOConfig().training(engine_dtype="float32", model_dtype="float32")
    assert not config.resolved_mismatch_correction()
    assert config.training(rollout_mode="async").resolved_mismatch_correction()
    assert not config.training(mismatch_correction=False).resolved_mismatch_correction()


def informative_unless_group_1(group) -> list[float]:
    """A dynamic-sampling metric under the test's control: every group but id 1 is informative, so the first
    iteration keeps one surplus group (ids 0, 2 trained, 3 kept) and the async pipeline ages the next."""
    return [0.0] * len(group) if group[0].group_id == 1 else [0.0] + [1.0] * (len(group) - 1)


def async_config(make, **training) -> DAPOConfig:
    return make(
        rollout_mode="async",
        max_staleness=1,
        dynamic_sampling=True,
        max_generation_batches=2,
        overlong_filtering=False,  # the random tiny model's responses all hit the token limit
        **training,
    ).env_runners(num_env_runners=1, create_local_env_runner=False)


# Metrics of an iteration that do not depend on timing.
COMPARED = (
    "rollout/reward_mean",
    "rollout/response_length_mean",
    "rollout/groups_sampled",
    "rollout/staleness_max",
    "rollout/groups_dropped_stale",
)
COMPARED_LEARNER = ("train/loss", "train/grad_norm", "train/tokens", "train/optimizer_steps_fresh")


def summary(result) -> dict[str, float]:
    values = {key: result[key] for key in COMPARED}
    values.update({key: result["learners"][key] for key in COMPARED_LEARNER})
    return values


def weights(algo: DAPO) -> dict[str, torch.Tensor]:
    state = algo.learner_group.get_state(components="learner/rl_module")
    return state["learner"]["rl_module"]["default_policy"]


def test_async_run_bounds_staleness_and_resumes_with_its_batch_in_flight(
    small_dapo_config, ray_session, monkeypatch, tmp_path
):
    """A real async run of 4 iterations never trains fresh on a group older than max_staleness, and takes a
    checkpoint after 2 on its way (saving must change nothing of the run). A new algorithm restored from it
    ends its next iteration where the run did (same metrics, same weights bitwise on CPU): the checkpoint
    waits for the batch launched during the last update and stores its groups, so nothing in flight is
    lost."""
    seen: list[tuple[str, int, list[int], list[list[int]]]] = []
    learn = DAPO.update_learners

    def recording_learn(self, trajectories, weights, tag):
        seen.append(
            (
                tag,
                self.counters.policy_version,
                [t.oldest_policy_version for t in trajectories],
                [t.turn_policy_versions for t in trajectories],
            )
        )
        return learn(self, trajectories, weights, tag)

    monkeypatch.setattr(DAPO, "update_learners", recording_learn)
    config = async_config(small_dapo_config)
    algo = config.build_algo()
    algo.sampler.metric = informative_unless_group_1
    try:
        results = [algo.train() for _ in range(2)]
        assert algo.in_flight is not None, "async mode has the next batch in flight at the checkpoint"
        checkpoint = algo.save_to_path(str(tmp_path / "checkpoint"))
        results.append(algo.train())
        weights_after_3 = {k: v.clone() for k, v in weights(algo).items()}
        results.append(algo.train())
    finally:
        algo.stop()

    fresh = [(version, oldest, turns) for tag, version, oldest, turns in seen if tag == "fresh"]
    assert len(fresh) == 4
    for version, oldest, turns in fresh:
        # The bound, at the learner's input.
        assert all(0 <= version - v <= 1 for v in oldest), (version, oldest)
        # Every turn carries its version; one rollout call runs under one version.
        assert all(len(t) >= 1 and len(set(t)) == 1 for t in turns)
    # Iteration 0 generates its own batch (staleness 0); later ones train on the batch generated during the
    # previous update, one version old.
    assert results[0]["rollout/staleness_max"] == 0
    assert all(r["rollout/staleness_max"] == 1 for r in results[1:])
    # The surplus group of iteration 1 (id 5, from the batch launched at version 0) would be 2 versions old
    # at iteration 2: dropped, not trained.
    assert results[2]["rollout/groups_dropped_stale"] == 1
    assert all(r["rollout/groups_lost"] == 0 for r in results)
    assert all(r["learners"]["train/optimizer_steps_fresh"] >= 1 for r in results)

    resumed = config.build_algo()
    resumed.sampler.metric = informative_unless_group_1
    try:
        resumed.restore_from_path(checkpoint)
        assert resumed.in_flight is not None and resumed.in_flight.collected
        got = summary(resumed.train())
        got_weights = weights(resumed)
    finally:
        resumed.stop()
    assert got == summary(results[2])
    assert all(torch.equal(got_weights[k], weights_after_3[k]) for k in weights_after_3)
