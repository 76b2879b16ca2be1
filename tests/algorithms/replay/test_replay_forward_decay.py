"""Forward decay (stored keys never refreshed) equals direct decay, before and after rebases."""

from __future__ import annotations

import numpy as np

from algorithms.replay import make_reference_buffer
from algorithms.replay.prioritized_buffer import REBASE_EXPONENT


def test_forward_decay_matches_direct_decay_across_rebases(reference):
    ref_probs, ref_weights = reference
    tau, alpha, capacity = 1.0, 1.0, 8
    buf = make_reference_buffer("freshper", capacity=capacity, tau=tau, alpha=alpha, beta_0=0.5, seed=3)
    rng = np.random.default_rng(0)
    base, steps, refs = [], [], set()
    # Ages reach 8 * 50 = 400 steps = 400 tau: exp(-400) is still a normal float64, so the direct reference
    # is exact, while the forward exponent alpha * (t - t_ref) / tau passes REBASE_EXPONENT many times.
    for t in np.arange(0.0, 5000.0, 50.0):
        sig = rng.exponential(size=1)
        buf.add([len(base)], sig, t=t)
        base.append(abs(sig[0]) + 1e-6)
        steps.append(t)
        refs.add(buf.reference_step)
        b, st = np.asarray(base)[-capacity:], np.asarray(steps)[-capacity:]
        ids, probs = buf.probabilities(t + 25.0)
        expected = ref_probs(b, st, t + 25.0, buf.decay, alpha)
        np.testing.assert_allclose(probs[np.argsort(ids)], expected, rtol=1e-9)
        batch = buf.sample(16, t=t + 25.0)
        pos = batch.indices - (len(base) - len(b))
        np.testing.assert_allclose(batch.probabilities, expected[pos], rtol=1e-9)
        np.testing.assert_allclose(batch.is_weights, ref_weights(expected, expected[pos], 0.5), rtol=1e-9)
    assert len(refs) >= 5000 * alpha / tau / REBASE_EXPONENT  # it rebased about every 500 steps


def test_rebase_keeps_priority_updates_and_distribution():
    """Updating priorities right across a rebase gives the same distribution as a buffer that never
    needed one (large tau: exponents stay tiny)."""
    small = make_reference_buffer("freshper", capacity=6, tau=1.0, alpha=0.7)
    big_t = make_reference_buffer("freshper", capacity=6, tau=1.0, alpha=0.7)
    sig = np.array([0.5, 2.0, 1.0, 3.0, 0.1, 1.5])
    steps = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    small.add(list(range(6)), sig, t=5.0, collection_steps=steps)
    # Same relative ages, shifted by 1e6 steps: the first add already rebases.
    big_t.add(list(range(6)), sig, t=1e6 + 5.0, collection_steps=steps + 1e6)
    assert big_t.reference_step == 1e6 + 5.0
    for buf in (small, big_t):
        buf.update_priorities(np.array([1, 4]), np.array([0.2, 4.0]))
    _, p_small = small.probabilities(5.0)
    _, p_big = big_t.probabilities(1e6 + 5.0)
    np.testing.assert_allclose(p_small, p_big, rtol=1e-9)


def test_far_future_steps_never_overflow():
    buf = make_reference_buffer("freshper", capacity=4, tau=0.01, alpha=1.0)
    for k in range(20):
        t = 1e5 * k
        buf.add([k], [1.0 + k], t=t)
        batch = buf.sample(8, t=t)
        assert np.all(np.isfinite(batch.probabilities)) and np.all(np.isfinite(batch.is_weights))
        assert np.all(batch.indices == k)  # older items are ~exp(-1e7) less likely
