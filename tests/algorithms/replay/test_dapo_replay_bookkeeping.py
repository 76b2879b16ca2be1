"""How DAPO feeds and accounts for its replay buffer: what enters it, and replay/fraction, the share of an
iteration's training samples drawn from the buffer (docs/design.md, section 3, ``replay_fraction``)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from algorithms.dapo.dapo import DAPO, priority_signal
from algorithms.replay import make_reference_buffer
from algorithms.trajectory import Trajectory


def _stub(replay_batches: int) -> tuple[SimpleNamespace, dict[str, float]]:
    """What DAPO._learn_from_replay reads: a filled buffer, the config, a clock and a metrics logger."""
    logged: dict[str, float] = {}
    buffer = make_reference_buffer("freshper", capacity=16, eps=0.1)
    buffer.add(list(range(8)), [1.0] * 8, t=0)
    stub = SimpleNamespace(
        _replay=buffer,
        config=SimpleNamespace(replay_batches=replay_batches),
        _age_clock=lambda: 1,
        _learn_replayed=lambda sample, tag: None,
        metrics=SimpleNamespace(log_value=lambda key, value, reduce: logged.__setitem__(key, value)),
    )
    return stub, logged


@pytest.mark.parametrize(
    ("fresh", "backfilled", "batches", "want"),
    [
        (4, 0, 1, 0.5),  # 4 fresh + 4 replayed
        (0, 4, 1, 1.0),  # nothing fresh: 4 backfilled + 4 replayed, all from the buffer
        (2, 2, 1, 0.75),  # 2 fresh, 2 backfilled + 4 replayed
        (2, 2, 0, 0.5),  # no replay batches: the backfill is still half of what was trained on
    ],
)
def test_backfilled_samples_count_as_replay(fresh, backfilled, batches, want):
    stub, logged = _stub(batches)
    DAPO._learn_from_replay(stub, batch_size=fresh + backfilled, backfilled=backfilled)
    assert logged["replay/fraction"] == pytest.approx(want)


def _episode(finish_reason: str) -> Trajectory:
    """A one-turn episode whose response used its whole budget of 2 tokens."""
    return Trajectory(
        [5, 6, 7], [0, 1, 1], [0.0] * 3, [(1, 3)], [1.0], [finish_reason], 0, 0, 0, 0, response_budget=2,
        reward=1.0, advantage=0.5,
    )  # fmt: skip


@pytest.mark.parametrize("filtering", [True, False])
def test_episodes_overlong_filtering_masks_do_not_enter_the_buffer(filtering):
    """A masked episode would take replay draws and train nothing; without filtering it is trained on."""
    buffer = make_reference_buffer("freshper", capacity=16, eps=0.1)
    stub = SimpleNamespace(
        _replay=buffer,
        config=SimpleNamespace(
            overlong_filtering=filtering,
            overlong_scope="trajectory",
            replay_insert_at_max_priority=False,
            replay_priority="advantage",
        ),
        _age_clock=lambda: 0,
    )
    stub._priority_signal = lambda t: priority_signal(t, stub.config.replay_priority)
    cut, ended = _episode("length"), _episode("stop")
    DAPO._store(stub, [cut, ended])
    assert len(buffer) == (1 if filtering else 2)
    assert ended in buffer.sample(16, 0).items
