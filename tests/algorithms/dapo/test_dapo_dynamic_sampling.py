"""Dynamic sampling on hand-made reward tables: filtering, surplus, budget, checkpoints."""

from __future__ import annotations

import pickle
import warnings

import pytest

from algorithms.dapo import DAPOConfig
from algorithms.dapo.advantage_estimators import ADVANTAGE_ESTIMATOR_REGISTRY
from algorithms.dapo.dynamic_sampling import (
    DynamicSampler,
    DynamicSamplingBudgetWarning,
    DynamicSamplingStats,
)
from algorithms.dapo.dynamic_sampling_metrics import DYNAMIC_SAMPLING_METRIC_REGISTRY
from algorithms.dapo.groups import shape_and_score_group
from algorithms.trajectory import Trajectory


class Batches:
    """``generate``: hands out pre-made batches of groups (tuples of rewards) and records what was asked."""

    def __init__(self, *batches):
        self.batches = list(batches)
        self.requests: list[int] = []

    def __call__(self, n_groups):
        self.requests.append(n_groups)
        return list(self.batches.pop(0)) if self.batches else []


def rewards(group):
    return group


EQUAL = [(1.0, 1.0, 1.0), (-1.0, -1.0, -1.0), (0.5,)]
MIXED = [(1.0, -1.0, -1.0), (0.0, 0.0, 1.0), (1.0, 0.9, 1.0), (-1.0, 1.0, 1.0), (0.2, 0.1, 0.2)]


def test_all_equal_groups_are_dropped():
    gen = Batches([EQUAL[0], MIXED[0], EQUAL[1], MIXED[1], EQUAL[2]], [MIXED[2], EQUAL[0]])
    sampler = DynamicSampler(3, 5, filter_groups=True, metric=rewards)
    groups, stats = sampler.collect(gen)
    assert groups == [MIXED[0], MIXED[1], MIXED[2]]
    assert stats == DynamicSamplingStats(
        groups_sampled=7,
        groups_kept=3,
        groups_dropped=4,
        generation_batches=2,
        budget_exhausted=False,
        surplus_groups=0,
        groups_from_surplus=0,
        groups_returned=3,
    )
    assert gen.requests == [3, 3]


def test_surplus_is_kept_and_used_first_next_call():
    sampler = DynamicSampler(2, 3, filter_groups=True, metric=rewards)
    groups, stats = sampler.collect(Batches([MIXED[0], EQUAL[0], MIXED[1], MIXED[2], MIXED[3]]))
    assert groups == [MIXED[0], MIXED[1]]
    assert sampler.surplus == [MIXED[2], MIXED[3]]
    assert (stats.groups_kept, stats.surplus_groups, stats.groups_from_surplus) == (4, 2, 0)

    gen = Batches([MIXED[4]])
    groups, stats = sampler.collect(gen)
    assert groups == [MIXED[2], MIXED[3]]
    assert gen.requests == []  # the surplus filled the batch: nothing generated
    assert (stats.groups_from_surplus, stats.generation_batches, stats.surplus_groups) == (2, 0, 0)
    assert not stats.budget_exhausted


def test_partial_surplus_then_generation_and_new_surplus():
    sampler = DynamicSampler(3, 2, filter_groups=True, metric=rewards)
    sampler.surplus = [MIXED[0]]
    groups, stats = sampler.collect(Batches([EQUAL[0], MIXED[1], MIXED[2], MIXED[3]]))
    assert groups == [MIXED[0], MIXED[1], MIXED[2]]
    assert sampler.surplus == [MIXED[3]]
    assert (stats.groups_from_surplus, stats.groups_kept, stats.groups_dropped) == (1, 3, 1)
    assert stats.groups_returned == 3 and stats.surplus_groups == 1


def test_surplus_larger_than_target_is_consumed_oldest_first():
    sampler = DynamicSampler(2, 1, filter_groups=True, metric=rewards)
    sampler.surplus = [MIXED[0], MIXED[1], MIXED[2]]
    assert sampler.collect(Batches())[0] == [MIXED[0], MIXED[1]]
    assert sampler.surplus == [MIXED[2]]


def test_budget_exhaustion_warns_once_and_returns_what_it_has():
    sampler = DynamicSampler(3, 4, filter_groups=True, metric=rewards)
    gen = Batches([EQUAL[0], MIXED[0]], [EQUAL[1]], [EQUAL[0], EQUAL[2]], [MIXED[1]], [MIXED[2]])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        groups, stats = sampler.collect(gen)
    assert [w.category for w in caught] == [DynamicSamplingBudgetWarning]
    assert groups == [MIXED[0], MIXED[1]]
    assert stats.budget_exhausted and stats.generation_batches == 4 and len(gen.requests) == 4
    assert (stats.groups_sampled, stats.groups_kept, stats.groups_dropped) == (6, 2, 4)


def test_budget_exhaustion_with_nothing_informative_returns_empty():
    sampler = DynamicSampler(2, 3, filter_groups=True, metric=rewards)
    with pytest.warns(DynamicSamplingBudgetWarning, match="0 of 2 groups after 3 generation batches"):
        groups, stats = sampler.collect(Batches(EQUAL, EQUAL, EQUAL, [MIXED[0]]))
    assert groups == [] and stats.budget_exhausted and stats.groups_returned == 0
    assert stats.groups_dropped == 9 and stats.surplus_groups == 0


def test_generate_returning_nothing_counts_as_a_batch():
    sampler = DynamicSampler(1, 2, filter_groups=True, metric=rewards)
    with pytest.warns(DynamicSamplingBudgetWarning):
        groups, stats = sampler.collect(Batches())
    assert groups == [] and stats.generation_batches == 2 and stats.groups_sampled == 0


def test_filter_off_keeps_every_group_with_target_and_surplus():
    sampler = DynamicSampler(3, 2, filter_groups=False)
    gen = Batches([EQUAL[0], MIXED[0]], [EQUAL[1], EQUAL[2], MIXED[1]])
    groups, stats = sampler.collect(gen)
    assert groups == [EQUAL[0], MIXED[0], EQUAL[1]]
    assert sampler.surplus == [EQUAL[2], MIXED[1]]
    assert (stats.groups_kept, stats.groups_dropped, stats.budget_exhausted) == (5, 0, False)
    groups, stats = sampler.collect(Batches([MIXED[2]]))
    assert groups == [EQUAL[2], MIXED[1], MIXED[2]] and stats.groups_from_surplus == 2


def test_filters_on_the_metric_it_is_given():
    """All answers correct but different overlong penalties: informative on the shaped reward, not on
    accuracy."""
    group = ({"acc": 1.0, "shaped": 1.0}, {"acc": 1.0, "shaped": 0.75})
    shaped = DynamicSampler(1, 1, filter_groups=True, metric=lambda g: [t["shaped"] for t in g])
    assert shaped.collect(Batches([group]))[0] == [group]
    acc = DynamicSampler(1, 1, filter_groups=True, metric=lambda g: [t["acc"] for t in g])
    with pytest.warns(DynamicSamplingBudgetWarning):
        assert acc.collect(Batches([group]))[0] == []


def test_state_dict_round_trip_through_pickle():
    sampler = DynamicSampler(1, 1, filter_groups=True, metric=rewards)
    sampler.collect(Batches([MIXED[0], MIXED[1], MIXED[2]]))
    state = pickle.loads(pickle.dumps(sampler.state_dict()))
    restored = DynamicSampler(1, 1, filter_groups=True, metric=rewards)
    restored.load_state_dict(state)
    assert restored.surplus == [MIXED[1], MIXED[2]]
    assert restored.collect(Batches())[0] == sampler.collect(Batches())[0] == [MIXED[1]]


def test_non_finite_metric_raises():
    sampler = DynamicSampler(1, 1, filter_groups=True, metric=rewards)
    with pytest.raises(ValueError, match="non-finite"):
        sampler.collect(Batches([(1.0, float("nan"))]))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"target_groups": 0, "max_generation_batches": 1, "filter_groups": True, "metric": rewards},
        {"target_groups": 1, "max_generation_batches": 0, "filter_groups": True, "metric": rewards},
        {"target_groups": 1, "max_generation_batches": 1, "filter_groups": True},
    ],
)
def test_invalid_arguments_raise(kwargs):
    with pytest.raises(ValueError):
        DynamicSampler(**kwargs)


def episode(length: int, success: bool, budget: int) -> Trajectory:
    """A one-turn episode of ``length`` response tokens (cut at ``budget``) and reward 1 if ``success``."""
    return Trajectory(
        token_ids=[5] * (2 + length),
        loss_mask=[0, 0] + [1] * length,
        behaviour_logprobs=[0.0, 0.0] + [-1.0] * length,
        response_spans=[(2, 2 + length)],
        turn_rewards=[float(success)],
        finish_reasons=["length" if length >= budget else "stop"],
        env_seed=0,
        group_id=0,
        collection_step=0,
        policy_version=0,
        success=success,
        response_budget=budget,
    )


def sampler_with_defaults(config: DAPOConfig) -> DynamicSampler:
    """The sampler DAPO.setup builds, and groups shaped as DAPO._generate_groups shapes them."""
    return DynamicSampler(
        1,
        1,
        filter_groups=config.dynamic_sampling,
        metric=DYNAMIC_SAMPLING_METRIC_REGISTRY.get(config.dynamic_sampling_metric),
    )


def shaped(config: DAPOConfig, group: list[Trajectory]) -> list[Trajectory]:
    shape_and_score_group(
        group,
        overlong_punishment=config.overlong_punishment,
        overlong_scope=config.overlong_scope,
        max_response_tokens=config.max_response_tokens,
        overlong_cache_len=config.overlong_cache_len,
        estimator=ADVANTAGE_ESTIMATOR_REGISTRY.get(config.advantage_estimator)(config),
    )
    return group


def test_defaults_keep_groups_by_accuracy_not_by_shaped_reward():
    """An all-wrong group with one truncated answer (shaped rewards [-1, 0, 0, 0]) and an
    all-correct group that differs only in length have non-zero shaped advantages, but 0 or G correct: the
    defaults drop both (DAPO Eq. 11); a group with 0 < #correct < G is kept."""
    config = DAPOConfig().training(max_response_tokens=40, overlong_cache_len=8, max_context_tokens=64)
    budget = config.max_response_tokens
    wrong = [episode(budget, False, budget)] + [episode(10, False, budget) for _ in range(3)]
    all_wrong = shaped(config, wrong)
    assert [t.reward for t in all_wrong] == [-1.0, 0.0, 0.0, 0.0]
    all_right = shaped(config, [episode(n, True, budget) for n in (10, 34, 36, 10)])
    assert len({t.reward for t in all_right}) > 1 and any(t.advantage != 0 for t in all_right)
    mixed = shaped(config, [episode(10, True, budget)] + [episode(10, False, budget) for _ in range(3)])

    with pytest.warns(DynamicSamplingBudgetWarning):
        assert sampler_with_defaults(config).collect(Batches([all_wrong, all_right]))[0] == []
    assert sampler_with_defaults(config).collect(Batches([all_wrong, all_right, mixed]))[0] == [mixed]
    # The reward-variance option keeps whatever has non-zero advantages.
    by_reward = config.copy(copy_frozen=False).training(dynamic_sampling_metric="reward")
    assert sampler_with_defaults(by_reward).collect(Batches([all_wrong]))[0] == [all_wrong]


def test_dynamic_sampling_metric_is_validated():
    with pytest.raises(ValueError, match="dynamic_sampling_metric"):
        DAPOConfig().environment("freshrl/FrozenLake-v0").training(dynamic_sampling_metric="acc").validate()
