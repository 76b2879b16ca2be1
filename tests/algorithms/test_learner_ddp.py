"""Two learners under real torch DDP (two CPU processes, gloo): a minibatch with fewer trajectories than
learners does not hang, train/loss is the whole step's loss on every learner, and the ranks stay in step.
About two minutes on 2 CPU cores (process start-up and imports dominate)."""

from __future__ import annotations

import datetime
import json
import os
import socket
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD = 2
# Without the fix, rank 0 waits in DDP's collectives for a backward rank 1 never runs: fail after this.
COLLECTIVE_TIMEOUT_S = 120


def trajectory(advantage: float, length: int):
    from algorithms.trajectory import Trajectory

    return Trajectory(
        token_ids=[1, 2] + [3] * length,
        loss_mask=[0, 0] + [1] * length,
        behaviour_logprobs=[0.0, 0.0] + [-1.0] * length,
        response_spans=[(2, 2 + length)],
        turn_rewards=[1.0],
        finish_reasons=["stop"],
        env_seed=0,
        group_id=0,
        collection_step=0,
        policy_version=0,
        response_budget=64,
        advantage=advantage,
    )


def run_rank(rank: int, port: int, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    timeout = datetime.timedelta(seconds=COLLECTIVE_TIMEOUT_S)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD, timeout=timeout)
    from algorithms.dapo import DAPOConfig, apply_algorithm, apply_scale
    from envs.base import AnyText

    config = apply_scale(apply_algorithm(DAPOConfig().environment("freshrl/FrozenLake-v0"), "dapo"), "tiny")
    config = config.training(num_epochs=1, minibatch_size=4, micro_batch_size=1, warmup_steps=0)
    config = config.learners(num_learners=WORLD)
    text = AnyText()
    learner = config.build_learner(spaces={"default_policy": (text, text)})
    learner._learner_index = rank  # what RLlib's LearnerGroup sets on each remote learner
    learner.build()
    steps = []
    # One row for two learners (rank 1 runs the stand-in), then three (2 and 1 rows: uneven micro-batches).
    for batch in ([trajectory(1.0, 3)], [trajectory(1.0, 3), trajectory(-1.0, 5), trajectory(0.5, 2)]):
        results = learner.update_from_trajectories(batch)
        weights = torch.cat([p.detach().flatten() for p in learner.module["default_policy"].parameters()])
        gathered = [torch.zeros_like(weights) for _ in range(WORLD)]
        dist.all_gather(gathered, weights)
        steps.append(
            {
                "loss": results["train/loss"].peek(),
                "tokens": results["train/tokens"].peek() if "train/tokens" in results else 0.0,
                "same_weights": all(torch.equal(gathered[0], g) for g in gathered),
                "optimizer_steps": learner.optimizer_steps,
            }
        )
    dist.destroy_process_group()
    Path(out, f"{rank}.json").write_text(json.dumps(steps))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_ddp_learners_with_fewer_rows_than_learners(tmp_path):
    mp.spawn(run_rank, args=(free_port(), str(tmp_path)), nprocs=WORLD, join=True)
    ranks = [json.loads(Path(tmp_path, f"{rank}.json").read_text()) for rank in range(WORLD)]
    for step in range(2):
        losses = [ranks[rank][step]["loss"] for rank in range(WORLD)]
        assert losses[0] == losses[1], "train/loss is the all-reduced whole-step loss on every learner"
        assert all(ranks[rank][step]["same_weights"] for rank in range(WORLD))
        assert all(ranks[rank][step]["optimizer_steps"] == step + 1 for rank in range(WORLD))
    # The tokens are the shards': 3 | 0 (rank 1's stand-in adds none) for one row; all 10 split over both
    # ranks for three rows (2 rows and 1, in the shuffled order).
    assert [ranks[rank][0]["tokens"] for rank in range(WORLD)] == [3.0, 0.0]
    tokens = [ranks[rank][1]["tokens"] for rank in range(WORLD)]
    assert sum(tokens) == 10.0 and min(tokens) > 0
