"""The statistics of the reports: each test against a case worked out by hand (or scipy's reference
function), and experiments.train's one-line verdict on validation success before and after training."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from algorithms.dapo.evaluation import wilson_interval
from experiments.common.significance import (
    change_sentence,
    curve_over_seeds,
    holm,
    intervals_overlap,
    mcnemar_exact,
    mean_of_means,
    measured_range,
    paired_detectable,
    paired_interval,
    paired_seed_test,
    paired_t_test,
    success_change,
    success_line,
    task_change,
    two_proportion_test,
    two_sample_detectable,
    welch_test,
)


def t_quantile_df2(p: float) -> float:
    """Student's t quantile on 2 degrees of freedom in closed form: (2p - 1) / sqrt(2 p (1 - p))."""
    return (2 * p - 1) / math.sqrt(2 * p * (1 - p))


def t_sf_df2(t: float) -> float:
    """Its survival function: 1/2 - t / (2 sqrt(t^2 + 2))."""
    return 0.5 - t / (2 * math.sqrt(t * t + 2))


def evaluation(successes: int, episodes: int) -> dict[str, float | int]:
    """An evaluation record without per-task outcomes (as saved before they were recorded)."""
    low, high = wilson_interval(successes, episodes)
    return {
        "success": successes / episodes,
        "success_ci95_low": low,
        "success_ci95_high": high,
        "num_episodes": episodes,
    }


def per_task(seeds: list[int], successes: list[int], k: int = 1) -> dict:
    """An evaluation with per-task outcomes: ``successes[i]`` of ``k`` samples on task ``seeds[i]``."""
    total, episodes = sum(successes), k * len(seeds)
    return {
        **evaluation(total, episodes),
        "task_seeds": seeds,
        "task_successes": successes,
        "samples_per_task": k,
        "num_tasks": len(seeds),
    }


# ---------------------------------------------------------------------------------------------- the tests
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


def test_mcnemar_exact_by_hand():
    # 10 tasks: 6 gained (0 -> 1), 1 lost (1 -> 0), 3 unchanged. Under H0 the 7 discordant split as
    # Binomial(7, 1/2): p = 2 x P(X <= 1) = 2 x (1 + 7) / 128 = 0.125.
    before = [0, 0, 0, 0, 0, 0, 1, 1, 0, 1]
    after = [1, 1, 1, 1, 1, 1, 0, 1, 0, 1]
    result = mcnemar_exact(before, after)
    assert (result["test"], result["unit"], result["n"]) == ("McNemar's exact test", "task", 10)
    assert (result["gained"], result["lost"]) == (6, 1)
    assert result["p_value"] == pytest.approx(0.125)
    assert result["p_value"] == pytest.approx(stats.binomtest(1, 7, 0.5).pvalue)
    assert result["difference"] == pytest.approx(0.5)
    # Differences: six 1, one -1, three 0: mean 0.5, variance (6 x 0.25 + 2.25 + 3 x 0.25) / 9 = 0.5.
    # t_0.975(9) = 2.262157 and t_0.8(9) = 0.883404 from the t table.
    assert result["detectable"] == pytest.approx((2.262157 + 0.883404) * math.sqrt(0.5 / 10), abs=1e-5)
    unchanged = mcnemar_exact([1, 0], [1, 0])  # no discordant task: nothing to test or to scale power by
    assert (unchanged["p_value"], unchanged["detectable"]) == (1.0, None)
    with pytest.raises(ValueError, match="pairs outcomes"):
        mcnemar_exact([1, 0], [1])


def test_paired_t_over_three_tasks_by_hand():
    # Task success rates before 0.25, 0.5, 0.75 and after 0.5, 0.75, 0.75: differences 0.25, 0.25, 0,
    # mean 1/6, sd sqrt(((1/12)^2 x 2 + (1/6)^2) / 2) = sqrt(3/144), t = (1/6) / (sd / sqrt 3) = 2 on 2 df.
    result = paired_t_test([0.25, 0.5, 0.75], [0.5, 0.75, 0.75], unit="task")
    assert (result["test"], result["unit"], result["n"]) == ("paired t-test", "task", 3)
    assert result["difference"] == pytest.approx(1 / 6)
    assert result["t"] == pytest.approx(2.0)
    assert result["p_value"] == pytest.approx(2 * t_sf_df2(2.0))
    assert result["p_value"] == pytest.approx(stats.ttest_rel([0.5, 0.75, 0.75], [0.25, 0.5, 0.75]).pvalue)
    sd = math.sqrt(3 / 144)
    expected = (t_quantile_df2(0.975) + t_quantile_df2(0.8)) * sd / math.sqrt(3)
    assert result["detectable"] == pytest.approx(expected)
    assert paired_detectable(sd, 3) == pytest.approx(expected)
    same_gain = paired_t_test([0.25, 0.5], [0.5, 0.75], unit="seed")  # no spread: p 0, no power estimate
    assert (same_gain["p_value"], same_gain["detectable"], same_gain["t"]) == (0.0, None, None)
    assert paired_t_test([0.25], [0.5], unit="seed")["p_value"] is None  # one unit: no test


def test_welch_by_hand_and_against_scipy():
    # se = sqrt(2 x 0.0025 / 3) = 0.040825; Welch-Satterthwaite df = 4 for equal variances and sizes.
    a, b = [0.40, 0.45, 0.50], [0.20, 0.25, 0.30]
    result = welch_test(a, b)
    assert (result["test"], result["unit"], result["n"]) == ("Welch's t-test", "seed", 6)
    assert result["difference"] == pytest.approx(0.2)
    assert result["p_value"] == pytest.approx(stats.ttest_ind(a, b, equal_var=False).pvalue)
    # t_0.975(4) = 2.776445, t_0.8(4) = 0.940965 (the t table).
    se = math.sqrt(2 * 0.0025 / 3)
    assert result["detectable"] == pytest.approx((2.776445 + 0.940965) * se, abs=1e-5)
    assert two_sample_detectable(a, b) == result["detectable"]
    assert welch_test([0.5], b)["p_value"] is None


def test_the_seed_test_pairs_shared_seeds_and_falls_back_to_welch():
    a, b = {0: 0.40, 1: 0.45, 2: 0.50}, {2: 0.25, 0: 0.20, 1: 0.30}  # b given out of seed order
    paired = paired_seed_test(a, b)
    assert (paired["test"], paired["unit"], paired["n"]) == ("paired t-test", "seed", 3)
    assert paired["difference"] == pytest.approx(0.2)  # a minus b
    assert paired["p_value"] == pytest.approx(stats.ttest_rel([0.40, 0.45, 0.50], [0.20, 0.30, 0.25]).pvalue)
    partial = paired_seed_test(a, {0: 0.20, 1: 0.30})
    assert partial["test"] == "Welch's t-test"
    assert partial["p_value"] == pytest.approx(
        stats.ttest_ind([0.40, 0.45, 0.50], [0.20, 0.30], equal_var=False).pvalue
    )


def test_holm_by_hand():
    # m = 4, sorted 0.005, 0.01, 0.03, 0.04 -> 4 x 0.005, 3 x 0.01, 2 x 0.03, max(0.06, 1 x 0.04).
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.6]) == [1.0, 1.0]  # capped at 1, and monotone (0.6 x 1 is raised to 1)
    assert holm([None, 0.02, 0.04]) == [None, pytest.approx(0.04), pytest.approx(0.04)]  # m = 2
    assert holm([]) == []


# ---------------------------------------------------------------------------------------------- before/after
def test_before_and_after_with_one_sample_a_task_is_mcnemar_by_task_seed():
    seeds = [101, 102, 103, 104, 105, 106, 107, 108, 109, 110]
    before = per_task(seeds, [0, 0, 0, 0, 0, 0, 1, 1, 0, 1])
    # The same outcomes as test_mcnemar_exact_by_hand, listed in another task order: pairing is by seed.
    order = [9, 0, 1, 2, 3, 4, 5, 6, 7, 8]
    outcomes = [1, 1, 1, 1, 1, 1, 0, 1, 0, 1]
    after = per_task([seeds[i] for i in order], [outcomes[i] for i in order])
    change = success_change(before, after)
    assert (change["test"], change["n"]) == ("McNemar's exact test", 10)
    assert (change["gained"], change["lost"]) == (6, 1)
    assert change["p_value"] == pytest.approx(0.125)
    line = change_sentence(before, after)
    assert line.startswith("validation success rose from 30.0% to 80.0% (+50.0 points)")
    assert "McNemar's exact test over 10 tasks (6 gained, 1 lost) gives p = 0.12" in line
    assert line.endswith("not separated from the noise (it detects changes of 70.3 points or more)")


def test_before_and_after_with_several_samples_is_the_paired_t_over_tasks():
    before = per_task([1, 2, 3], [1, 2, 3], k=4)  # rates 0.25, 0.5, 0.75
    after = per_task([1, 2, 3], [2, 3, 3], k=4)  # rates 0.5, 0.75, 0.75
    change = task_change(before, after)
    assert (change["test"], change["unit"], change["n"]) == ("paired t-test", "task", 3)
    assert change["p_value"] == pytest.approx(2 * t_sf_df2(2.0))
    assert "a paired t-test over 3 tasks (4 samples each) gives p = 0.18" in change_sentence(before, after)


def test_a_paired_test_refuses_different_tasks():
    with pytest.raises(ValueError, match=r"different tasks \(1 task seeds only before, 1 only after\)"):
        success_change(per_task([1, 2, 3], [1, 0, 1]), per_task([1, 2, 4], [1, 1, 1]))
    with pytest.raises(ValueError, match="one success count per distinct task seed"):
        success_change(per_task([1, 1], [1, 0]), per_task([1, 1], [1, 1]))


def test_records_without_per_task_outcomes_get_the_unpaired_test_named_so():
    before, after = evaluation(117, 512), evaluation(170, 512)
    change = success_change(before, after)
    assert change["test"] == "unpaired two-proportion (no per-task outcomes)" and change["unit"] == "episode"
    assert not change["intervals_overlap"] and change["p_value"] < 0.001
    assert change["difference"] == pytest.approx(53 / 512)
    # (z_0.975 + z_0.8) x the pooled standard error: (1.959964 + 0.841621) x sqrt(p (1 - p) x 2 / 512).
    pooled = 287 / 1024
    se = math.sqrt(pooled * (1 - pooled) * 2 / 512)
    assert change["detectable"] == pytest.approx((1.959964 + 0.841621) * se, abs=1e-6)
    line = change_sentence(before, after)
    assert line.startswith("validation success rose from 22.9% to 33.2% (+10.4 points)")
    assert "an unpaired two-proportion test (no per-task outcomes; 512 episodes each)" in line
    assert "do not overlap" in line and line.endswith("more than noise")
    # One old record is enough to fall back: nothing to pair it with.
    new = per_task(list(range(512)), [1] * 170 + [0] * 342)
    assert success_change(before, new)["test"] == "unpaired two-proportion (no per-task outcomes)"


def test_a_gain_inside_the_noise_is_called_so():
    # The default job's figures of an earlier version: 0.273 -> 0.359 on 128 episodes.
    before, after = evaluation(35, 128), evaluation(46, 128)
    assert success_change(before, after)["intervals_overlap"]
    line = change_sentence(before, after)
    assert "intervals overlap" in line and "not separated from the noise" in line


def test_a_fall_is_a_fall_and_no_change_says_so():
    line = change_sentence(evaluation(60, 100), evaluation(20, 100))
    assert line.startswith("validation success fell from 60.0% to 20.0% (-40.0 points)")
    assert line.endswith("more than noise")
    line = change_sentence(per_task([1, 2], [0, 0]), per_task([1, 2], [0, 0]))
    assert line == (
        "validation success stayed at 0.0% (+0.0 points); the 95% intervals overlap and McNemar's exact test "
        "over 2 tasks (0 gained, 0 lost) gives p = 1: not separated from the noise"
    )


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


def test_the_paired_interval_by_hand():
    # Differences 1, 0, 0, 1: mean 0.5, sd sqrt(1/3), t(0.975, 3) = 3.182446 from the t table.
    half = 3.182446 * math.sqrt(1 / 3) / 2
    result = paired_t_test([0, 1, 1, 0], [1, 1, 1, 1], unit="task")
    assert result["difference_ci95_low"] == pytest.approx(0.5 - half, abs=1e-5)
    assert result["difference_ci95_high"] == pytest.approx(0.5 + half, abs=1e-5)
    # McNemar reports the same t interval over its per-task differences (-1, 0 or 1).
    assert mcnemar_exact([0, 1, 1, 0], [1, 1, 1, 1])["difference_ci95_low"] == pytest.approx(
        0.5 - half, abs=1e-5
    )
    assert paired_interval([0.2]) == {"difference_ci95_low": None, "difference_ci95_high": None}


def test_a_curve_over_seeds_a_mean_of_run_means_and_a_measured_range():
    assert curve_over_seeds([[0.0, 0.5, 0.25], [0.0, 0.25, 0.75]]) == {
        "mean": [0.0, 0.375, 0.5],
        "min": [0.0, 0.25, 0.25],
        "max": [0.0, 0.5, 0.75],
    }
    # Each run weighs the same whatever its number of values; a run without any is left out.
    assert mean_of_means([[1.0, 2.0, 3.0], [4.0], []]) == 3.0
    assert mean_of_means([[], []]) is None
    assert measured_range([2.0, None, 4.0]) == {"mean": 3.0, "min": 2.0, "max": 4.0, "n": 2, "of": 3}
    assert measured_range([None]) is None
