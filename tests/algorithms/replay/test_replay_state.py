"""Checkpoint round trip: a restored buffer continues with exactly the same samples."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from algorithms.replay import make_reference_buffer


def _drive(buf, rng: np.random.Generator, t0: int, n_steps: int) -> list:
    """A training-like sequence of add / sample / update; returns everything observable."""
    out = []
    for t in range(t0, t0 + n_steps):
        buf.add([f"traj{t}-{j}" for j in range(5)], rng.normal(size=5), t=float(t))
        for _ in range(2):
            batch = buf.sample(16, t=float(t))
            out.append((batch.items, batch.indices, batch.probabilities, batch.is_weights, batch.ages))
            buf.update_priorities(batch.indices, rng.normal(size=16))
    return out


@pytest.mark.parametrize("mode", ["per", "freshper", "freshper_poly"])
def test_state_round_trip_continues_exactly(mode):
    kwargs = dict(capacity=23, tau=2.0, beta_horizon=30, seed=11)
    original = make_reference_buffer(mode, **kwargs)
    _drive(original, np.random.default_rng(0), 0, 12)
    # Leave the polynomial buffer with a pending refresh (added at a new step, not sampled yet).
    original.add(["pending"], [2.0], t=12.5)
    state = pickle.loads(pickle.dumps(original.state_dict()))

    restored = make_reference_buffer(mode, **{**kwargs, "seed": 999})  # seed is overwritten by the state
    restored.load_state_dict(state)
    a = _drive(original, np.random.default_rng(1), 13, 10)
    b = _drive(restored, np.random.default_rng(1), 13, 10)
    for x, y in zip(a, b, strict=True):
        assert x[0] == y[0]
        for u, v in zip(x[1:], y[1:], strict=True):
            np.testing.assert_array_equal(u, v)
    assert original.metrics() == restored.metrics()


def test_load_rejects_a_different_configuration():
    state = make_reference_buffer("freshper", capacity=8, tau=5.0).state_dict()
    with pytest.raises(ValueError, match="config mismatch"):
        make_reference_buffer("freshper", capacity=8, tau=6.0).load_state_dict(state)
    with pytest.raises(ValueError, match="config mismatch"):
        make_reference_buffer("per", capacity=8).load_state_dict(state)
