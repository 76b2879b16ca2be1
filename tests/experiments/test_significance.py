"""The one-line verdict experiments.train prints on validation success before and after training."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from algorithms.dapo.evaluation import wilson_interval
from experiments.common.significance import (
    change_sentence,
    intervals_overlap,
    success_change,
    success_line,
    two_proportion_test,
)


def evaluation(successes: int, episodes: int) -> dict[str, float | int]:
    low, high = wilson_interval(successes, episodes)
    return {
        "success": successes / episodes,
        "success_ci95_low": low,
        "success_ci95_high": high,
        "num_episodes": episodes,
    }


def test_two_proportion_test_by_hand():
    # 117/512 against 170/512: pooled 287/1024, se = sqrt(p (1 - p) 2 / 512).
    pooled = 287 / 1024
    z_expected = (170 - 117) / 512 / math.sqrt(pooled * (1 - pooled) * 2 / 512)
    z, p = two_proportion_test(117, 512, 170, 512)
    assert z == pytest.approx(z_expected)
    assert z == pytest.approx(3.688, abs=0.001)
    assert p == pytest.approx(2 * stats.norm.sf(z_expected))
    assert two_proportion_test(170, 512, 117, 512) == pytest.approx((-z, p))


@pytest.mark.parametrize(("a", "b"), [((0, 10), (0, 10)), ((10, 10), (10, 10)), ((0, 0), (3, 10))])
def test_no_variance_or_no_trials_separates_nothing(a, b):
    assert two_proportion_test(*a, *b) == (0.0, 1.0)


def test_a_separated_gain_is_called_more_than_noise():
    before, after = evaluation(117, 512), evaluation(170, 512)
    change = success_change(before, after)
    assert not change["intervals_overlap"] and change["p_value"] < 0.001
    assert change["difference"] == pytest.approx(53 / 512)
    line = change_sentence(before, after)
    assert line.startswith("validation success rose from 22.9% to 33.2% (+10.4 points)")
    assert "do not overlap" in line and "512 episodes each" in line and line.endswith("more than noise")


def test_a_gain_inside_the_noise_is_called_so():
    # The default job's figures of an earlier version: 0.273 -> 0.359 on 128 episodes.
    before, after = evaluation(35, 128), evaluation(46, 128)
    assert success_change(before, after)["intervals_overlap"]
    line = change_sentence(before, after)
    assert "intervals overlap" in line and "not separated from the noise" in line


def test_a_fall_is_a_fall():
    line = change_sentence(evaluation(60, 100), evaluation(20, 100))
    assert line.startswith("validation success fell from 60.0% to 20.0% (-40.0 points)")
    assert line.endswith("more than noise")


def test_intervals_overlap_in_either_direction_or_not_at_all():
    low, high, middle = (
        {"success_ci95_low": 0.1, "success_ci95_high": 0.2},
        {"success_ci95_low": 0.3, "success_ci95_high": 0.4},
        {"success_ci95_low": 0.15, "success_ci95_high": 0.35},
    )
    assert not intervals_overlap(low, high) and not intervals_overlap(high, low)  # a gain or a fall
    assert intervals_overlap(low, middle) and intervals_overlap(middle, high)


def test_an_evaluation_reads_as_its_rate_interval_and_episodes():
    assert success_line(evaluation(170, 512)) == "0.332 (95% CI 0.293-0.374, 512 episodes)"
