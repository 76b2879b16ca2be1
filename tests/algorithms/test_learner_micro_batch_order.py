"""The learner cuts a mini-batch into micro-batches in ``micro_batch_order``: a group's samples side by side
(their shared prompt runs once), shortest first (a micro-batch pads its rows to similar lengths)."""

from __future__ import annotations

from algorithms.dapo.learner import micro_batch_order
from algorithms.trajectory import Trajectory


def trajectory(group_id: int, length: int) -> Trajectory:
    return Trajectory(
        token_ids=list(range(1, length + 1)),
        loss_mask=[0] * 4 + [1] * (length - 4),
        behaviour_logprobs=[0.0] * length,
        response_spans=[(4, length)],
        turn_rewards=[0.0],
        finish_reasons=["stop"],
        env_seed=0,
        group_id=group_id,
        collection_step=0,
        policy_version=0,
    )


def padded_tokens(rows: list[Trajectory], size: int) -> int:
    chunks = [rows[i : i + size] for i in range(0, len(rows), size)]
    return sum(len(chunk) * max(len(t.token_ids) for t in chunk) for chunk in chunks)


def test_groups_stay_together_and_each_is_shortest_first() -> None:
    rows = [trajectory(g, n) for g, n in [(1, 30), (0, 90), (1, 10), (0, 20), (0, 50), (1, 70)]]
    ordered = sorted(rows, key=micro_batch_order)
    assert [(t.group_id, len(t.token_ids)) for t in ordered] == [
        (0, 20), (0, 50), (0, 90), (1, 10), (1, 30), (1, 70),
    ]  # fmt: skip


def test_the_order_pads_less_than_groups_alone() -> None:
    # Two groups of four, each with two short and two long episodes, in the order they were sampled.
    rows = [trajectory(g, n) for g in (0, 1) for n in (130, 300, 130, 300)]
    by_group = sorted(rows, key=lambda t: t.group_id)
    assert padded_tokens(by_group, 2) == 4 * 2 * 300
    assert padded_tokens(sorted(rows, key=micro_batch_order), 2) == 2 * (2 * 130 + 2 * 300)
