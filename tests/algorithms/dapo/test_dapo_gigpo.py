"""GiGPO's turn advantages (algorithms/dapo/gigpo.py, arXiv 2505.10978 Eq. 5-8; the estimator
algorithms/dapo/advantage_estimators/gigpo.py) on hand-built groups, worked out by hand; the per-token
advantages collate builds from them; DAPOConfig's GiGPO keys."""

from __future__ import annotations

import math

import numpy as np
import pytest

from algorithms.dapo import DAPOConfig
from algorithms.dapo.advantage_estimators import ADVANTAGE_ESTIMATOR_REGISTRY, EpisodeAdvantage, GiGPO
from algorithms.dapo.collate import collate
from algorithms.dapo.dynamic_sampling import DynamicSampler
from algorithms.dapo.dynamic_sampling_metrics import group_rewards, group_successes
from algorithms.dapo.gigpo import (
    discounted_returns,
    gigpo_credit,
    has_step_signal,
    step_group_metrics,
    step_groups,
)
from algorithms.dapo.groups import shape_and_score_group
from algorithms.trajectory import Trajectory

S2 = math.sqrt(2.0)


def episode(keys: list, rewards: list[float], group_id: int = 0, prompt: int = 3) -> Trajectory:
    """len(keys) turns: a prompt, then per turn a 2-token response and a 1-token observation."""
    token_ids, loss_mask, spans = [1] * prompt, [0] * prompt, []
    for turn in range(len(keys)):
        spans.append((len(token_ids), len(token_ids) + 2))
        token_ids += [10 + turn, 20 + turn, 5]
        loss_mask += [1, 1, 0]
    return Trajectory(
        token_ids=token_ids,
        loss_mask=loss_mask,
        behaviour_logprobs=[0.0] * len(token_ids),
        response_spans=spans,
        turn_rewards=rewards,
        finish_reasons=["stop"] * len(keys),
        env_seed=0,
        group_id=group_id,
        collection_step=0,
        policy_version=0,
        turn_state_keys=list(keys),
    )


def shape(
    group: list[Trajectory],
    advantage_estimator: str = "gigpo",
    advantage_std_normalize: bool = True,
    gigpo_gamma: float = 0.95,
    gigpo_step_weight: float = 1.0,
) -> None:
    if advantage_estimator == "gigpo":
        estimator = GiGPO(
            gamma=gigpo_gamma, step_weight=gigpo_step_weight, eps=0.0, std_normalize=advantage_std_normalize
        )
    else:
        estimator = EpisodeAdvantage(eps=0.0, std_normalize=advantage_std_normalize)
    shape_and_score_group(
        group,
        overlong_punishment=False,
        overlong_scope="trajectory",
        max_response_tokens=8,
        overlong_cache_len=4,
        estimator=estimator,
    )


def crossing_group() -> list[Trajectory]:
    """Three episodes start in a. Episode 0 goes to b and succeeds there; episode 2 reaches b too and fails;
    episode 1 goes to c and fails."""
    return [
        episode(["a", "b"], [0.0, 1.0]),
        episode(["a", "c"], [0.0, 0.0]),
        episode(["a", "b"], [0.0, 0.0]),
    ]


def test_a_shared_state_then_different_actions_worked_by_hand():
    group = crossing_group()
    shape(group, gigpo_gamma=0.5, gigpo_step_weight=1.0)
    # Episode advantages (Eq. 3): returns 1, 0, 0, mean 1/3, population std sqrt(2)/3.
    np.testing.assert_allclose([t.advantage for t in group], [S2, -1 / S2, -1 / S2])
    # Step returns (Eq. 5, gamma 1/2): episode 0 [1/2, 1], episodes 1 and 2 [0, 0].
    # Step group a (Eq. 6-7): returns 1/2, 0, 0 -> sqrt(2), -1/sqrt(2), -1/sqrt(2).
    # Step group b: episode 0's 1 against episode 2's 0 -> +1, -1. Step group c: episode 1 alone -> 0.
    expected = [
        [S2 + S2, S2 + 1.0],
        [-1 / S2 - 1 / S2, -1 / S2 + 0.0],
        [-1 / S2 - 1 / S2, -1 / S2 - 1.0],
    ]
    for trajectory, turns in zip(group, expected, strict=True):
        np.testing.assert_allclose(trajectory.turn_advantages, turns)
    # In b, episode 0's winning move and episode 2's failing one differ by 2 beyond their episode advantages.
    credit = gigpo_credit(
        group, [t.advantage for t in group], gamma=0.5, step_weight=1.0, eps=0.0, std_normalize=True
    )
    assert sorted(credit.step_group_sizes) == [1, 2, 3]
    metrics = step_group_metrics([credit])
    assert metrics["gigpo/shared_turn_fraction"] == pytest.approx(5 / 6)
    assert metrics["gigpo/step_group_size_mean"] == pytest.approx(2.0)
    steps = [S2, -1 / S2, -1 / S2, 1.0, 0.0, -1.0]
    assert metrics["gigpo/step_advantage_std"] == pytest.approx(float(np.std(steps)))


def test_omega_weights_the_step_advantage_and_mean_norm_drops_the_std():
    group = crossing_group()
    shape(group, gigpo_gamma=0.5, gigpo_step_weight=0.5)
    np.testing.assert_allclose(group[2].turn_advantages, [-1 / S2 - 0.5 / S2, -1 / S2 - 0.5])
    shape(group, advantage_std_normalize=False, gigpo_gamma=0.5, gigpo_step_weight=1.0)
    # Centred only (verl-agent's mean_norm): episode 2/3, -1/3, -1/3; group a 1/3, -1/6, -1/6; b 1/2, -1/2.
    np.testing.assert_allclose(group[0].turn_advantages, [2 / 3 + 1 / 3, 2 / 3 + 1 / 2])
    np.testing.assert_allclose(group[2].turn_advantages, [-1 / 3 - 1 / 6, -1 / 3 - 1 / 2])


def test_turns_of_one_episode_that_revisit_a_state_join_its_group():
    # Episode 0's invalid first turn leaves it in a; its second turn starts from a again.
    group = [episode(["a", "a"], [-0.1, 1.0]), episode(["a"], [0.0])]
    assert step_groups([t.turn_state_keys for t in group]) == [[(0, 0), (0, 1), (1, 0)]]
    credit = gigpo_credit(group, [0.0] * len(group), gamma=1.0, step_weight=1.0, eps=0.0, std_normalize=True)
    # Returns 0.9, 1.0, 0.0: mean 19/30, deviations (8, 11, -19)/30, population std sqrt(182)/30.
    np.testing.assert_allclose(credit.step_advantages[0], np.array([8.0, 11.0]) / math.sqrt(182))
    np.testing.assert_allclose(credit.step_advantages[1], [-19.0 / math.sqrt(182)])


def test_without_repeated_states_gigpo_is_the_episode_advantage():
    gigpo = [episode(["a", f"b{i}", f"c{i}"][1:], [0.0, float(i == 1)]) for i in range(3)]
    episodic = [episode(t.turn_state_keys, t.turn_rewards) for t in gigpo]
    shape(gigpo, gigpo_gamma=0.95)
    shape(episodic, advantage_estimator="episode")
    for a, b in zip(gigpo, episodic, strict=True):
        assert a.turn_advantages == [a.advantage] * a.num_turns and a.advantage == b.advantage
    tokens, plain = collate(gigpo), collate(episodic)
    assert tokens["advantages"].shape == tokens["loss_mask"].shape and plain["advantages"].ndim == 1
    mask = tokens["loss_mask"].bool()
    broadcast = plain["advantages"][:, None].expand_as(mask)
    assert tokens["advantages"][mask].tolist() == broadcast[mask].tolist()


def test_an_env_without_state_keys_keeps_episode_advantages():
    group = [episode([None, None], [0.0, 1.0]), episode([None], [0.0])]
    shape(group)
    assert [t.turn_advantages for t in group] == [[], []]
    assert group[0].advantage == pytest.approx(1.0)


def test_turns_without_a_key_are_step_groups_of_their_own():
    group = [episode(["a", None], [0.0, 1.0]), episode(["a", None], [0.0, 0.0])]
    credit = gigpo_credit(group, [0.0] * len(group), gamma=1.0, step_weight=1.0, eps=0.0, std_normalize=True)
    assert sorted(credit.step_group_sizes) == [1, 1, 2]
    assert credit.step_advantages == [[1.0, 0.0], [-1.0, 0.0]]


def test_collate_gives_each_turn_s_tokens_its_advantage():
    group = crossing_group()
    shape(group, gigpo_gamma=0.5)
    batch = collate(group)
    for row, trajectory in enumerate(group):
        spans = trajectory.response_spans
        for (start, end), advantage in zip(spans, trajectory.turn_advantages, strict=True):
            # Token t of the sequence is position t - 1 of the shifted per-token tensors.
            tokens = batch["advantages"][row, start - 1 : end - 1]
            np.testing.assert_allclose(tokens.numpy(), advantage, rtol=1e-6)
            assert batch["loss_mask"][row, start - 1 : end - 1].tolist() == [1.0, 1.0]


def test_discounted_returns():
    np.testing.assert_allclose(discounted_returns([1.0, 2.0, 3.0], 0.5), [2.75, 3.5, 3.0])
    np.testing.assert_allclose(discounted_returns([0.0, 0.0, 1.0], 1.0), [1.0, 1.0, 1.0])
    assert discounted_returns([], 0.9).shape == (0,)


def test_a_trajectory_without_one_key_per_turn_is_refused():
    group = crossing_group()
    group[1].turn_state_keys = ["a"]
    with pytest.raises(ValueError, match="2 turns but 1 state keys"):
        gigpo_credit(group, [0.0] * len(group), gamma=0.95, step_weight=1.0, eps=1e-6, std_normalize=True)


def test_config_defaults_and_validation():
    config = DAPOConfig().environment("freshrl/FrozenLake-v0")
    defaults = (config.advantage_estimator, config.gigpo_gamma, config.gigpo_step_weight)
    assert defaults == ("episode", 0.95, 1.0)
    config.training(advantage_estimator="gigpo", gigpo_gamma=1.0, gigpo_step_weight=0.0).validate()
    for settings, message in [
        ({"advantage_estimator": "gae"}, r"advantage_estimator must be one of \('episode', 'gigpo'"),
        ({"gigpo_gamma": 1.5}, r"gigpo_gamma .* must be in \[0, 1\]"),
        ({"gigpo_gamma": float("nan")}, r"gigpo_gamma .* must be in \[0, 1\]"),
        ({"gigpo_step_weight": -1.0}, "gigpo_step_weight .* must be a finite number >= 0"),
        ({"gigpo_step_weight": True}, "gigpo_step_weight .* must be a finite number >= 0"),
        ({"gigpo_step_weight": math.inf}, "gigpo_step_weight .* must be a finite number >= 0"),
    ]:
        bad = DAPOConfig().environment("freshrl/FrozenLake-v0").training(**settings)
        with pytest.raises(ValueError, match=message):
            bad.validate()


def tied_but_different_steps() -> list[Trajectory]:
    """Both episodes fail with return 0 from state a: episode 0 loses 0.1 at a and wins it back at b,
    episode 1 earns nothing at a or c. Equal returns, so equal success and equal rewards; but at a their
    discounted step returns differ (-0.1 + 0.95 x 0.1 = -0.005 against 0)."""
    return [episode(["a", "b"], [-0.1, 0.1]), episode(["a", "c"], [0.0, 0.0])]


def test_dynamic_sampling_keeps_a_tied_group_with_step_signal_under_gigpo_only():
    gigpo, episodic = tied_but_different_steps(), tied_but_different_steps()
    shape(gigpo, advantage_estimator="gigpo")
    shape(episodic, advantage_estimator="episode")
    # The step group {a} of two: A_S = (-0.005 - (-0.0025)) / std = -1 and +1 (mean-centred, std-normalised).
    assert [t.turn_advantages[0] for t in gigpo] == pytest.approx([-1.0, 1.0])
    assert [t.advantage for t in gigpo] == [0.0, 0.0]
    assert has_step_signal(gigpo) and not has_step_signal(episodic)
    config = DAPOConfig()
    for metric in (group_successes, group_rewards):
        dapo = DynamicSampler(1, 1, filter_groups=True, metric=metric)  # DAPO's Eq. 11 filter alone
        assert not dapo.is_informative(gigpo) and not dapo.is_informative(episodic)
        for name, keeps in (("gigpo", True), ("episode", False)):
            # As DAPO.setup builds the sampler: the estimator's also_keep beside the metric.
            estimator = ADVANTAGE_ESTIMATOR_REGISTRY.get(name)(config)
            sampler = DynamicSampler(1, 1, filter_groups=True, metric=metric, also_keep=estimator.also_keep)
            assert sampler.is_informative(gigpo) is keeps
            # Episode advantages leave Eq. 11 as it is: the tied group is dropped under either estimator.
            assert not sampler.is_informative(episodic)
        # The ablation compared against it: GiGPO's advantages, the episode-outcome filter alone.
        ablation = ADVANTAGE_ESTIMATOR_REGISTRY.get(
            "experiments.ablations.gigpo_episode_filter:gigpo_episode_filter"
        )(config)
        assert ablation.advantages(gigpo, np.zeros(2)).turns == estimator_turns(gigpo, config)
        sampler = DynamicSampler(1, 1, filter_groups=True, metric=metric, also_keep=ablation.also_keep)
        assert not sampler.is_informative(gigpo)


def estimator_turns(group: list[Trajectory], config: DAPOConfig) -> list[list[float]] | None:
    return ADVANTAGE_ESTIMATOR_REGISTRY.get("gigpo")(config).advantages(group, np.zeros(len(group))).turns


def test_a_group_without_a_shared_state_has_no_step_signal():
    group = [episode(["a", "b"], [0.0, 1.0]), episode(["c", "d"], [0.0, 0.0])]
    shape(group, advantage_estimator="gigpo")
    assert not has_step_signal(group)
