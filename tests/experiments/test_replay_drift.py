"""The staleness of replayed data measured from a run's metrics, and the decay constant it implies
(experiments/common/replay_drift.py)."""

from __future__ import annotations

import pytest

from experiments.common.replay_drift import drift, staleness_point


def iteration(age, kl_replay, kl_fresh=0.0, kind="approx_kl"):
    return {
        "replay/batch_mean_age": age,
        f"learners/train/{kind}_replay": kl_replay,
        f"learners/train/{kind}_fresh": kl_fresh,
    }


def test_a_point_is_the_replay_batch_s_age_and_kl_above_the_fresh_batch_s():
    assert staleness_point(iteration(2.0, 0.07, 0.01)) == pytest.approx((2.0, 0.06))
    assert staleness_point(iteration(2.0, 0.07, 0.01, kind="mismatch_kl")) == pytest.approx((2.0, 0.06))
    # With the mismatch correction on, the mismatch KL is the staleness; approx_kl is then against pi_old.
    both = {**iteration(2.0, 0.001, 0.0), **iteration(2.0, 0.05, 0.01, kind="mismatch_kl")}
    assert staleness_point(both) == pytest.approx((2.0, 0.04))
    assert staleness_point({"learners/train/approx_kl_fresh": 0.01}) is None  # no replay batch
    assert staleness_point({"replay/batch_mean_age": 3.0}) is None  # no KL logged
    assert staleness_point(iteration(float("nan"), 0.05)) is None


def test_the_slope_through_the_origin_by_hand():
    # kl = 0.03 x age exactly: c = 0.03, tau = 1 / 0.03.
    rows = [iteration(age, 0.01 + 0.03 * age, 0.01) for age in (1.0, 2.0, 4.0)] + [{}]
    fitted = drift(rows)
    assert fitted["kl_per_age"] == pytest.approx(0.03) and fitted["tau"] == pytest.approx(100 / 3)
    assert fitted["points"] == 3
    # Noisy points: sum(a k) / sum(a^2) = (1 x 0.02 + 3 x 0.1) / (1 + 9) = 0.032.
    assert drift([iteration(1.0, 0.02), iteration(3.0, 0.1), iteration(3.0, 0.1)])["kl_per_age"] == (
        pytest.approx((0.02 + 0.3 + 0.3) / 19)
    )


def test_no_fit_from_too_few_points_or_without_drift():
    assert drift([iteration(1.0, 0.03), iteration(2.0, 0.06)]) is None
    assert drift([iteration(age, 0.01, 0.02) for age in (1.0, 2.0, 3.0)]) is None  # replay fresher than fresh
