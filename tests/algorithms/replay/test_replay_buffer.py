"""Ring eviction, stale-id guard, priority updates, beta annealing, metrics, factory and edge cases."""

from __future__ import annotations

import numpy as np
import pytest

from algorithms.replay import (
    ExponentialDecay,
    NoDecay,
    PolynomialDecay,
    effective_sample_size,
    make_reference_buffer,
    replay_fraction,
)


def test_fifo_eviction_keeps_the_newest_items():
    buf = make_reference_buffer("freshper", capacity=5, seed=0)
    for k in range(12):
        ids = buf.add([f"item{k}"], [1.0], t=float(k))
        assert ids.tolist() == [k]
    assert len(buf) == 5
    ids, _ = buf.probabilities(12.0)
    assert sorted(ids.tolist()) == [7, 8, 9, 10, 11]
    drawn = set(buf.sample(2000, t=12.0).items)
    assert drawn == {f"item{k}" for k in range(7, 12)}


def test_items_are_stored_as_given_objects():
    items = [[1, 2], (3, 4), np.zeros(2), {"tokens": [5]}]
    buf = make_reference_buffer("per", capacity=8, seed=0)
    buf.add(items, np.ones(4), t=0.0)
    batch = buf.sample(200, t=0.0)
    for item, i in zip(batch.items, batch.indices.tolist(), strict=True):
        assert item is items[i]
    restored = make_reference_buffer("per", capacity=8, seed=0)
    restored.load_state_dict(buf.state_dict())
    assert all(a is b for a, b in zip(restored.state_dict()["items"], items, strict=True))


def test_add_more_than_capacity_in_one_call_keeps_the_last():
    buf = make_reference_buffer("per", capacity=4, seed=0)
    ids = buf.add(list("abcdefg"), np.ones(7), t=0.0)
    assert ids.tolist() == list(range(7))
    assert set(buf.sample(1000, t=0.0).items) == set("defg")
    assert buf.metrics()["replay/size"] == 4.0


def test_update_of_overwritten_slot_is_ignored():
    buf = make_reference_buffer("per", capacity=4, alpha=1.0, seed=0)
    buf.add(list("abcd"), [1.0, 1.0, 1.0, 1.0], t=0.0)
    batch = buf.sample(8, t=0.0)
    old = batch.indices.copy()
    buf.add(list("ef"), [1.0, 1.0], t=1.0)  # overwrites ids 0 and 1 (slots 0, 1)
    assert buf.update_priorities(old, np.full(8, 100.0)) == int(np.sum(old >= 2))
    ids, probs = buf.probabilities(1.0)
    by_id = dict(zip(ids.tolist(), probs.tolist(), strict=True))
    # The new occupants of slots 0 and 1 kept their own priority 1.
    live_updated = set(np.unique(old[old >= 2]).tolist())
    weights = {i: (100.0 if i in live_updated else 1.0) + 1e-6 for i in by_id}
    total = sum(weights.values())
    for i, p in by_id.items():
        assert p == pytest.approx(weights[i] / total, rel=1e-12)


def test_update_priorities_last_signal_wins_and_age_is_kept(reference):
    ref_probs, _ = reference
    buf = make_reference_buffer("freshper", capacity=3, alpha=1.0, tau=2.0, seed=0)
    buf.add(list("abc"), [1.0, 1.0, 1.0], t=0.0)
    buf.add(list("d"), [1.0], t=2.0)  # evicts "a" (id 0)
    assert buf.update_priorities(np.array([1, 2, 1, 0]), np.array([5.0, -3.0, 7.0, 9.0])) == 3
    ids, probs = buf.probabilities(4.0)
    expected = ref_probs(np.array([7.0, 3.0, 1.0]) + 1e-6, np.array([0.0, 0.0, 2.0]), 4.0, buf.decay, 1.0)
    np.testing.assert_allclose(probs[np.argsort(ids)], expected, rtol=1e-12)


def test_insert_at_max_priority_uses_running_max():
    buf = make_reference_buffer("per", capacity=8, alpha=1.0, seed=0, insert_at_max_priority=True)
    buf.add(list("ab"), None, t=0.0)  # running max starts at 1.0
    batch = buf.sample(4, t=0.0)
    buf.update_priorities(batch.indices[:1], [5.0])
    buf.add(list("c"), [0.1], t=1.0)  # enters at the running max 5 + 1e-6, not 0.1
    ids, probs = buf.probabilities(1.0)
    by_id = dict(zip(ids.tolist(), probs.tolist(), strict=True))
    assert by_id[2] == pytest.approx(by_id[int(batch.indices[0])])
    with pytest.raises(ValueError, match="signals"):
        make_reference_buffer("per", capacity=2).add(["x"], None, t=0.0)


def test_beta_anneals_linearly_then_stays_at_one():
    buf = make_reference_buffer("freshper", capacity=8, beta_0=0.4, beta_horizon=100, seed=0)
    assert buf.beta(0.0) == pytest.approx(0.4)
    assert buf.beta(50.0) == pytest.approx(0.7)
    assert buf.beta(100.0) == pytest.approx(1.0)
    assert buf.beta(1e6) == pytest.approx(1.0)
    buf.add(list("abcd"), [0.1, 1.0, 2.0, 4.0], t=0.0)
    for t in (0.0, 25.0, 100.0, 300.0):
        batch = buf.sample(64, t=t)
        assert batch.beta == pytest.approx(buf.beta(t))
        _, probs = buf.probabilities(t)
        expected = (probs.min() / batch.probabilities) ** batch.beta
        np.testing.assert_allclose(batch.is_weights, expected, rtol=1e-10)
    assert make_reference_buffer("per", capacity=2, beta_0=0.4).beta(1e9) == 0.4


def test_metrics_report_size_ages_and_ess():
    buf = make_reference_buffer("freshper", capacity=4, seed=0)
    assert buf.metrics() == {
        "replay/size": 0.0,
        "replay/mean_age": 0.0,
        "replay/max_age": 0.0,
        "replay/oldest_decay": 1.0,
    }
    buf.add(list("ab"), [1.0, 2.0], t=3.0, collection_steps=[0.0, 2.0])
    buf.add(list("cde"), [1.0, 1.0, 1.0], t=5.0)  # evicts "a"
    batch = buf.sample(32, t=6.0)
    successes = [item in "bd" for item in batch.items]
    m = buf.metrics(batch, successes=successes)
    assert m["replay/size"] == 4.0
    assert m["replay/mean_age"] == pytest.approx(6.0 - (2.0 + 5.0 * 3) / 4)
    assert m["replay/max_age"] == pytest.approx(4.0)
    assert m["replay/oldest_decay"] == pytest.approx(np.exp(-4.0 / 500.0))
    w = batch.is_weights
    assert m["replay/ess"] == pytest.approx(w.sum() ** 2 / (w**2).sum())
    assert m["replay/is_weight_mean"] == pytest.approx(w.mean())
    assert m["replay/is_weight_min"] == w.min()
    assert m["replay/batch_mean_age"] == pytest.approx(batch.ages.mean())
    assert m["replay/success_fraction"] == pytest.approx(np.mean(successes))
    assert "replay/success_fraction" not in buf.metrics(batch)
    with pytest.raises(ValueError, match="successes"):
        buf.metrics(batch, successes=[True])
    assert effective_sample_size(np.ones(10)) == pytest.approx(10.0)
    assert effective_sample_size(np.array([1.0, 0.0, 0.0])) == pytest.approx(1.0)
    assert replay_fraction(64, 192) == 0.75
    assert replay_fraction(0, 0) == 0.0


def test_factory_modes():
    assert make_reference_buffer("on_policy") is None
    assert isinstance(make_reference_buffer("per").decay, NoDecay)
    assert make_reference_buffer("freshper", tau=7.0).decay == ExponentialDecay(7.0)
    assert make_reference_buffer("freshper_poly", tau=7.0, poly_k=3.0).decay == PolynomialDecay(7.0, 3.0)
    for mode in ("freshper", "freshper_poly"):  # tau = inf: no decay, the limit of both (a sweep's PER point)
        assert isinstance(make_reference_buffer(mode, tau=float("inf")).decay, NoDecay)
    with pytest.raises(
        ValueError, match="replay_mode must be one of .* got 'fresh' \\(did you mean 'freshper'"
    ):
        make_reference_buffer("fresh")


def test_edge_cases_raise_clear_errors():
    buf = make_reference_buffer("freshper", capacity=4, seed=0)
    with pytest.raises(ValueError, match="empty replay buffer"):
        buf.sample(4, t=0.0)
    buf.add(list("abc"), [1.0, 2.0, 3.0], t=5.0)
    big = buf.sample(100, t=5.0)  # more draws than items: with replacement
    assert len(big) == 100 and set(big.items) <= set("abc") and len(set(big.items)) == 3
    with pytest.raises(ValueError, match="must not decrease"):
        buf.sample(1, t=4.0)
    with pytest.raises(ValueError, match="collection_steps"):
        buf.add(["x"], [1.0], t=6.0, collection_steps=[7.0])
    with pytest.raises(ValueError, match="expected 2 signals"):
        buf.add(["x", "y"], [1.0], t=6.0)
    with pytest.raises(ValueError, match="finite"):
        buf.add(["x"], [np.nan], t=6.0)
    with pytest.raises(ValueError, match="indices"):
        buf.update_priorities(np.array([-1]), [1.0])
    with pytest.raises(ValueError, match="batch_size"):
        buf.sample(0, t=6.0)
    with pytest.raises(ValueError, match="eps > 0"):
        make_reference_buffer("per", capacity=2, eps=0.0).add(["x"], [0.0], t=0.0)
    with pytest.raises(ValueError, match="tau"):
        ExponentialDecay(0.0)
    with pytest.raises(ValueError, match="capacity"):
        make_reference_buffer("per", capacity=0)
