"""DAPO with the paper's defaults end to end (dynamic sampling on accuracy, overlong filtering and shaping,
FreshPER replay) on the tiny model and the real vLLM rollout: the replay buffer's importance weights and its
iteration clock reach the loss, not only "the weights changed".

The env is a coin flip a random model can win: one turn, success iff the response has an even number of
characters, so about half of each group succeeds and dynamic sampling keeps most groups. A stop string ends
most responses early; the others hit the token limit and are what overlong filtering removes.
"""

from __future__ import annotations

from collections import defaultdict

import gymnasium as gym
import numpy as np
import pytest
import torch

import algorithms.dapo.learner as learner_module
from algorithms.dapo.learner import DAPOTorchLearner
from algorithms.dapo.overlong import is_overlong
from envs.base import MultiTurnEnv, Outcome, Parsed

COIN_FLIP = "tests/CoinFlip-v0"
ITERATIONS = 3
GROUP = 4
TAU, ALPHA, BETA_0, BETA_HORIZON, EPS = 2.0, 0.6, 0.4, 10.0, 0.1


class CoinFlipEnv(MultiTurnEnv):
    """One turn: reward 1 and success iff the response has an even number of characters, else 0."""

    def __init__(self, max_turns: int = 1, **kwargs):
        super().__init__(max_turns=max_turns, **kwargs)

    def _new_task(self) -> str:
        return "Say anything."

    def _parse(self, response: str) -> Parsed:
        return Parsed(format_ok=True, valid=True, action=response)

    def _apply(self, response: str) -> Outcome:
        success = len(response) % 2 == 0
        return Outcome(reward=float(success), observation="Done.", terminated=True, success=success)

    def _state_text(self) -> str:
        return "Say anything."


if COIN_FLIP not in gym.registry:
    gym.register(id=COIN_FLIP, entry_point=CoinFlipEnv, disable_env_checker=True)


class Recorder:
    """Spies on the path replay data takes: buffer (add, sample, update) -> learner update -> collate ->
    policy_loss, in one process (local EnvRunner and learner)."""

    def __init__(self, monkeypatch, algo):
        self.clock: int | None = None
        self.adds: list[dict] = []
        self.samples: list[dict] = []
        self.updates: list[dict] = []
        self.losses: list[dict] = []
        self.buffer_items: dict[int, list[float]] = {}  # id -> [signal, t_i]
        self._tag: str | None = None
        self._collated: dict | None = None
        buffer = algo.replay_buffer
        add, sample, update = buffer.add, buffer.sample, buffer.update_priorities

        def spy_add(items, signals, t, collection_steps=None):
            ids = add(items, signals, t, collection_steps=collection_steps)
            steps = np.broadcast_to(t if collection_steps is None else collection_steps, (len(items),))
            for i, signal, step in zip(ids, signals, steps, strict=True):
                self.buffer_items[int(i)] = [float(signal), float(step)]
            self.adds.append({"t": t, "clock": self.clock, "items": list(items), "steps": list(steps)})
            return ids

        def spy_sample(batch_size, t):
            drawn = sample(batch_size, t)
            snapshot = {i: list(v) for i, v in self.buffer_items.items()}
            self.samples.append({"t": t, "clock": self.clock, "sample": drawn, "buffer": snapshot})
            return drawn

        def spy_update(indices, signals):
            for i, signal in zip(indices, signals, strict=True):
                self.buffer_items[int(i)][0] = float(signal)
            return update(indices, signals)

        monkeypatch.setattr(buffer, "add", spy_add)
        monkeypatch.setattr(buffer, "sample", spy_sample)
        monkeypatch.setattr(buffer, "update_priorities", spy_update)

        real_update = DAPOTorchLearner.update_from_trajectories
        real_collate = learner_module.collate
        real_loss = learner_module.policy_loss

        def spy_learner_update(learner, trajectories, weights=None, **kwargs):
            self._tag = kwargs.get("tag", "fresh")
            self.updates.append({"tag": self._tag, "trajectories": list(trajectories), "weights": weights})
            return real_update(learner, trajectories, weights, **kwargs)

        def spy_collate(trajectories, **kwargs):
            self._collated = {"trajectories": list(trajectories), "weights": kwargs.get("weights")}
            return real_collate(trajectories, **kwargs)

        def spy_loss(*args, **kwargs):
            self.losses.append(
                {
                    "tag": self._tag,
                    "update": len(self.updates) - 1,
                    "trajectories": self._collated["trajectories"],
                    "collated_weights": np.asarray(self._collated["weights"], dtype=np.float64),
                    "weights": kwargs["weights"].detach().double().cpu().numpy(),
                    "mask": args[3].detach().cpu().bool(),
                    "dual_clip_c": kwargs["cfg"].dual_clip_c,
                }
            )
            return real_loss(*args, **kwargs)

        monkeypatch.setattr(DAPOTorchLearner, "update_from_trajectories", spy_learner_update)
        monkeypatch.setattr(learner_module, "collate", spy_collate)
        monkeypatch.setattr(learner_module, "policy_loss", spy_loss)


def expected_is_weights(buffer: dict[int, list[float]], t: float) -> tuple[dict[int, float], float]:
    """FreshPER's weights from first principles: p_i = (|A_i| + eps) exp(-(t - t_i) / tau),
    P(i) = p_i^alpha / sum_k p_k^alpha, w_i = (P(i) / min_j P(j))^-beta with beta annealed over iterations."""
    ids = np.array(sorted(buffer))
    signal, step = np.array([buffer[i] for i in ids]).T
    log_key = ALPHA * (np.log(np.abs(signal) + EPS) - (t - step) / TAU)
    prob = np.exp(log_key - log_key.max())
    prob /= prob.sum()
    beta = BETA_0 + (1.0 - BETA_0) * min(1.0, t / BETA_HORIZON)
    weights = (prob / prob.min()) ** -beta
    return dict(zip(ids.tolist(), weights.tolist(), strict=True)), beta


def test_replay_weights_and_age_clock_reach_the_loss(small_dapo_config, monkeypatch):
    config = small_dapo_config(
        COIN_FLIP,
        group_size=GROUP,
        prompts_per_iteration=2,
        max_response_tokens=8,
        overlong_cache_len=4,
        max_generation_batches=4,
        minibatch_size=4,
        num_epochs=2,
        stop_strings=("e",),
        # The paper's switches, set explicitly so the test does not depend on today's defaults.
        dynamic_sampling=True,
        dynamic_sampling_metric="success",
        overlong_filtering=True,
        overlong_punishment=True,
        overlong_scope="trajectory",
        mismatch_correction=False,  # pi_old is the engine's: the replay ratio is against the collection's
    ).replay(
        mode="freshper",
        tau=TAU,
        alpha=ALPHA,
        beta_0=BETA_0,
        beta_horizon=BETA_HORIZON,
        eps=EPS,
        capacity=1000,
        num_batches=1,
        priority="advantage",
        age_unit="iterations",
        insert_at_max_priority=False,
    )
    algo = config.build_algo()
    record = Recorder(monkeypatch, algo)
    try:
        for _ in range(ITERATIONS):
            record.clock = algo.training_iteration
            result = algo.train()
    finally:
        algo.stop()
    assert [a["clock"] for a in record.adds] == list(range(ITERATIONS)), "every iteration stores its groups"

    # The age clock is the iteration: the buffer is told t = iteration when storing and sampling, and each
    # item's t_i is the iteration it was collected in (an earlier one only for a surplus group kept over).
    for add in record.adds:
        assert add["t"] == add["clock"]
        assert all(step <= add["t"] for step in add["steps"])
        assert [t.collection_step for t in add["items"]] == add["steps"]
    assert record.samples and all(s["t"] == s["clock"] >= 1 for s in record.samples)

    replay_updates = [k for k, u in enumerate(record.updates) if u["tag"] == "replay"]
    assert len(replay_updates) == len(record.samples) == ITERATIONS - 1  # one replay batch per iteration
    replayed_weights, weight_of = [], {}
    for drawn, k in zip(record.samples, replay_updates, strict=True):
        sample = drawn["sample"]
        want, beta = expected_is_weights(drawn["buffer"], drawn["t"])
        assert sample.beta == pytest.approx(beta, rel=1e-12)
        np.testing.assert_allclose(sample.is_weights, [want[int(i)] for i in sample.indices], rtol=1e-9)
        np.testing.assert_array_equal(
            sample.ages, drawn["t"] - np.array([t.collection_step for t in sample.items])
        )
        # Buffer -> learner: the replay pass gets exactly the drawn items and their weights.
        update = record.updates[k]
        assert all(a is b for a, b in zip(update["trajectories"], sample.items, strict=True))
        np.testing.assert_array_equal(update["weights"], sample.is_weights)
        replayed_weights.extend(sample.is_weights.tolist())
        weight_of[k] = {id(t): w for t, w in zip(sample.items, sample.is_weights, strict=True)}
    assert min(replayed_weights) < 0.95, "FreshPER weights are not all 1 (ages and |A| differ)"

    # Learner -> loss: every micro-batch of a replay pass multiplies each trajectory's loss by its weight.
    replay_losses = [call for call in record.losses if call["tag"] == "replay"]
    assert {call["update"] for call in replay_losses} == set(replay_updates)
    for call in replay_losses:
        want = np.array([weight_of[call["update"]][id(t)] for t in call["trajectories"]])
        np.testing.assert_array_equal(call["collated_weights"], want)
        np.testing.assert_allclose(call["weights"], want, rtol=1e-7)  # float32 in the loss
    assert min(w for call in replay_losses for w in call["weights"]) < 0.95
    for call in record.losses:
        assert call["dual_clip_c"] == 3.0  # replay is on: dual clip by default
        if call["tag"] == "fresh":
            assert (call["weights"] == 1.0).all()

    # Dynamic sampling on accuracy: every group a fresh pass trains on has 0 < #successes < G.
    for update in record.updates:
        if update["tag"] == "fresh":
            groups = defaultdict(list)
            for t in update["trajectories"]:
                groups[t.group_id].append(t.success)
            assert all(0 < sum(g) < len(g) for g in groups.values())
    # Overlong filtering: an overlong episode's tokens never reach the loss; the others' do. (Which episodes
    # are overlong is tests/algorithms/dapo/test_dapo_overlong.py's subject; here, that the filter reaches
    # the loss.)
    seen = {"filtered": 0, "kept": 0}
    for call in record.losses:
        for row, t in enumerate(call["trajectories"]):
            if is_overlong(t, "trajectory"):
                assert not call["mask"][row].any()
                seen["filtered"] += 1
            elif t.num_response_tokens:
                assert call["mask"][row].any()
                seen["kept"] += 1
    assert seen["kept"] > 0

    assert result["learners"]["train/optimizer_steps_replay"] >= 1
    assert torch.isfinite(torch.tensor(float(result["learners"]["train/loss"])))
