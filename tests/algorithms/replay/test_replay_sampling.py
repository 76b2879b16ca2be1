"""Sampling distribution and IS weights of every replay variant against a brute-force reference."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from algorithms.replay import make_reference_buffer

MODES = ("per", "freshper", "freshper_poly")


def _filled_buffer(mode: str, alpha: float = 0.6, capacity: int = 40, seed: int = 1):
    """A buffer that has wrapped around (items 0..59 added over 6 steps, 40 kept) plus its ground truth."""
    settings = {"capacity": capacity, "alpha": alpha, "beta_0": 0.4, "tau": 3.0, "poly_k": 2.0, "seed": seed}
    buf = make_reference_buffer(mode, **settings)
    rng = np.random.default_rng(123)
    signals = rng.normal(0.0, 2.0, size=60)
    steps = np.repeat(np.arange(6) * 2.0, 10)
    for s in range(6):
        sl = slice(10 * s, 10 * s + 10)
        buf.add(list(range(sl.start, sl.stop)), signals[sl], t=2.0 * s)
    base = np.abs(signals) + 1e-6
    return buf, base[-capacity:], steps[-capacity:], np.arange(60 - capacity, 60)


@pytest.mark.parametrize("mode", MODES)
def test_probabilities_and_is_weights_match_direct_computation(mode, reference):
    ref_probs, ref_weights = reference
    buf, base, steps, live = _filled_buffer(mode)
    t = 13.0
    expected = ref_probs(base, steps, t, buf.decay, buf.alpha)
    batch = buf.sample(500, t=t)
    pos = np.asarray(batch.items) - live[0]
    np.testing.assert_allclose(batch.probabilities, expected[pos], rtol=1e-10)
    np.testing.assert_allclose(batch.is_weights, ref_weights(expected, expected[pos], 0.4), rtol=1e-10)
    np.testing.assert_allclose(batch.ages, t - steps[pos])
    assert np.all(np.asarray(batch.items) == batch.indices)  # item k was the k-th added
    ids, probs = buf.probabilities(t)
    np.testing.assert_allclose(probs[np.argsort(ids)], expected, rtol=1e-10)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("alpha", [0.6, 1.0, 0.0])
def test_sampling_frequencies_pass_chi_square(mode, alpha, reference):
    ref_probs, _ = reference
    buf, base, steps, live = _filled_buffer(mode, alpha=alpha)
    t = 13.0
    expected = ref_probs(base, steps, t, buf.decay, alpha)
    counts = np.zeros(live.shape[0])
    n_draws = 0
    for _ in range(50):
        batch = buf.sample(4000, t=t)
        counts += np.bincount(np.asarray(batch.items) - live[0], minlength=live.shape[0])
        n_draws += len(batch)
    # Pool cells with tiny expectation so the chi-square approximation holds.
    small = expected * n_draws < 5
    obs = np.append(counts[~small], counts[small].sum())
    exp = np.append(expected[~small], expected[small].sum()) * n_draws
    if exp[-1] == 0:
        obs, exp = obs[:-1], exp[:-1]
    p_value = stats.chisquare(obs, exp).pvalue
    assert p_value > 1e-3, (mode, alpha, p_value)


@pytest.mark.parametrize("mode", MODES)
def test_distribution_follows_the_current_step(mode, reference):
    """Without new data, exponential decay and PER keep P(i) as t advances (every item ages alike);
    polynomial decay does not, and each must still match the direct computation at every step."""
    ref_probs, _ = reference
    buf, base, steps, _ = _filled_buffer(mode)
    seen = []
    for t in (10.0, 20.0, 400.0):
        ids, probs = buf.probabilities(t)
        probs = probs[np.argsort(ids)]
        np.testing.assert_allclose(probs, ref_probs(base, steps, t, buf.decay, 0.6), rtol=1e-10)
        seen.append(probs)
    changed = not np.allclose(seen[0], seen[-1], rtol=1e-6)
    assert changed == (mode == "freshper_poly")


def test_polynomial_keys_refresh_lazily_and_exactly(reference):
    ref_probs, _ = reference
    buf = make_reference_buffer("freshper_poly", capacity=16, tau=2.0, poly_k=1.5, seed=0)
    base, steps = [], []
    rng = np.random.default_rng(5)
    for t in range(8):
        sig = rng.normal(size=3)
        buf.add([0] * 3, sig, t=float(t))
        base.extend(np.abs(sig) + 1e-6)
        steps.extend([float(t)] * 3)
        batch = buf.sample(8, t=float(t))
        upd = rng.normal(size=8)
        buf.update_priorities(batch.indices, upd)
        # Apply the same update to the reference: the last write per id wins.
        for i, s in zip(batch.indices.tolist(), upd.tolist(), strict=True):
            if i >= len(base) - 16:
                base[i] = abs(s) + 1e-6
        b = np.asarray(base)[-16:]
        st = np.asarray(steps)[-16:]
        ids, probs = buf.probabilities(float(t) + 0.5)
        order = np.argsort(ids)
        np.testing.assert_allclose(probs[order], ref_probs(b, st, t + 0.5, buf.decay, 0.6), rtol=1e-10)


def test_underflowed_leaves_are_renormalised_when_nothing_else_is_left(reference):
    """A dominant item sets the sum-tree scale; once it is evicted the tiny keys left are rescaled."""
    ref_probs, _ = reference
    buf = make_reference_buffer("freshper", capacity=2, tau=1.0, alpha=1.0)
    buf.add(["big"], [1e200], t=800.0)
    buf.add(["old"], [1.0], t=800.0, collection_steps=[0.0])  # key exp(-800 - 460) relative: leaf 0
    buf.add(["older"], [2.0], t=800.0, collection_steps=[1.0])  # evicts "big"
    batch = buf.sample(2000, t=800.0)
    # The direct formula underflows here (exp(-799)); in ratio form P(older) = 2e / (2e + 1).
    expected_older = 2 * np.e / (2 * np.e + 1)
    assert set(batch.items) == {"older", "old"}
    np.testing.assert_allclose(batch.probabilities[np.asarray(batch.items) == "older"], expected_older)
    assert abs(np.mean(np.asarray(batch.items) == "older") - expected_older) < 0.03


def _chi_square_p(items: list, names: list[str], expected: np.ndarray) -> float:
    counts = np.array([np.sum(np.asarray(items) == name) for name in names])
    return stats.chisquare(counts, expected * len(items)).pvalue


@pytest.mark.parametrize("how", ["evicted", "updated_down"])
def test_keys_far_below_a_departed_dominant_item_are_sampled_exactly(how):
    """A 1e200 item sets the sum-tree scale at a rebase; the items kept are ~744 nats below
    it, where float64 keys are subnormal or 0. Once the dominant item is gone, sampling must follow the
    analytic P(i) (in ratio form: relative keys e^1, e^-1, e^0), not the underflowed leaves."""
    t = 800.0
    buf = make_reference_buffer("freshper", capacity=3, tau=1.0, alpha=1.0, eps=0.0)
    big = buf.add(["big"], [1e200], t=t)  # out of range at reference step 0: rebases, scale = this key
    # log keys relative to "big": log(1e-200) - 283 = -743.5 (subnormal), -745.5 (0), -744.5 (subnormal)
    buf.add(["a", "b"], [1.0, 1.0], t=t, collection_steps=[t - 283.0, t - 285.0])
    if how == "evicted":
        buf.add(["c"], [1.0], t=t, collection_steps=[t - 284.0])  # evicts "big"
        names, log_keys = ["a", "b", "c"], np.array([1.0, -1.0, 0.0])
    else:
        buf.update_priorities(big, [np.exp(-284.0)])  # "big" (age 0) drops to between "a" and "b"
        names, log_keys = ["big", "a", "b"], np.array([0.0, 1.0, -1.0])
    expected = np.exp(log_keys) / np.exp(log_keys).sum()
    ids, probs = buf.probabilities(t)
    np.testing.assert_allclose(np.sort(probs), np.sort(expected), rtol=1e-9)
    batch = buf.sample(30_000, t=t)
    assert _chi_square_p(batch.items, names, expected) > 1e-3
    np.testing.assert_allclose(
        batch.is_weights.min(), (expected.min() / expected.max()) ** batch.beta, rtol=1e-9
    )
