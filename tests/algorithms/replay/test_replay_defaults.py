"""FreshPER acts at the defaults (docs/design.md, section 7): a simulated FrozenLake-like run through the
buffer that ``DAPOConfig`` builds, with DAPO's own priority signal and age clock.

The stream: 20 iterations of 4 groups x 8 trajectories (the tiny scale), binary success rewards, GRPO
advantages, only mixed groups kept (dynamic sampling), one replay batch of the fresh batch's size per
iteration, in ``DAPO.training_step``'s order (learn fresh, sample, learn replay, update priorities, store).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np
import pytest
from scipy import stats

from algorithms.dapo import DAPOConfig, apply_algorithm, apply_scale
from algorithms.dapo.advantages import group_advantages
from algorithms.dapo.dapo import priority_signal, replay_step
from algorithms.replay import PrioritizedReplayBuffer, ReplaySample
from algorithms.trajectory import Trajectory


def tiny_freshper_config(**replay: object) -> DAPOConfig:
    """The default job's configuration (dapo preset, tiny scale) with FreshPER on."""
    return apply_scale(apply_algorithm(DAPOConfig(), "dapo"), "tiny").replay(mode="freshper", **replay)


@dataclass
class SimulatedRun:
    """A buffer driven like ``DAPO`` does, and every replay batch with its metrics."""

    config: DAPOConfig
    buffer: PrioritizedReplayBuffer
    clock: SimpleNamespace  # the run's training iteration and optimizer steps
    batches: list[tuple[ReplaySample, dict[str, float]]] = field(default_factory=list)

    @property
    def t(self) -> int:
        clock = self.clock
        return replay_step(self.config.replay_age_unit, clock.training_iteration, clock.optimizer_steps)

    def signal(self, trajectory: Trajectory) -> float:
        return priority_signal(trajectory, self.config.replay_priority)


def _mixed_groups(rng: np.random.Generator, iteration: int, config: DAPOConfig, t: int) -> list[Trajectory]:
    """P groups of G with a FrozenLake-like success rate (0.1-0.5 per task), all-equal groups redrawn."""
    fresh = []
    for g in range(config.prompts_per_iteration):
        k = 0
        while not 0 < k < config.group_size:
            k = rng.binomial(config.group_size, rng.uniform(0.1, 0.5))
        rewards = np.zeros(config.group_size)
        rewards[:k] = 1.0
        advantages = group_advantages(rewards[None, :], eps=config.advantage_eps)[0]
        for r, a in zip(rewards, advantages, strict=True):
            fresh.append(
                Trajectory(
                    token_ids=[0],
                    loss_mask=[1],
                    behaviour_logprobs=[0.0],
                    response_spans=[(0, 1)],
                    turn_rewards=[float(r)],
                    finish_reasons=["stop"],
                    env_seed=g,
                    group_id=iteration * config.prompts_per_iteration + g,
                    collection_step=t,
                    policy_version=iteration,
                    success=bool(r),
                    info={"iteration": iteration},
                    reward=float(r),
                    advantage=float(a),
                )
            )
    return fresh


def simulate(config: DAPOConfig, iterations: int = 20, seed: int = 0) -> SimulatedRun:
    buffer = config.build_replay_buffer()
    clock = SimpleNamespace(training_iteration=0, optimizer_steps=0)
    run = SimulatedRun(config, buffer, clock)
    rng = np.random.default_rng(seed)
    # What the learner runs per update pass when no step is empty.
    steps_per_pass = config.num_epochs * math.ceil(32 / min(config.minibatch_size, 32))
    for iteration in range(iterations):
        run.clock.training_iteration = iteration
        fresh = _mixed_groups(rng, iteration, config, run.t)
        run.clock.optimizer_steps += steps_per_pass  # the fresh update
        if len(buffer):
            sample = buffer.sample(len(fresh), run.t)
            run.clock.optimizer_steps += steps_per_pass  # the replay update
            buffer.update_priorities(sample.indices, [run.signal(x) for x in sample.items])
            run.batches.append((sample, buffer.metrics(sample, successes=[x.success for x in sample.items])))
        buffer.add(fresh, [run.signal(x) for x in fresh], run.t, [x.collection_step for x in fresh])
    return run


def check_replay_acts(run: SimulatedRun) -> None:
    """What the defaults must give (also run on the old defaults, where it fails)."""
    successes = np.array([m["replay/success_fraction"] for _, m in run.batches])
    mean_w = np.array([m["replay/is_weight_mean"] for _, m in run.batches])
    assert all(0 < s < 1 for s in successes), f"a replay batch without failures or successes: {successes}"
    assert 0.25 < successes.mean() < 0.75, successes.mean()
    assert mean_w.mean() > 0.3, f"mean IS weight {mean_w.mean():.4f}"
    last_sample, last = run.batches[-1]
    assert last_sample.beta > 0.95, "beta should reach ~1 by the end of the default job"
    assert mean_w[-5:].mean() > 0.3, f"mean IS weight near beta 1: {mean_w[-5:].mean():.4f}"
    # Fresh vs old: the oldest item's decay (ages 1..capacity/32 in the default unit) is far from 1.
    assert last["replay/oldest_decay"] < 0.5, last["replay/oldest_decay"]
    freshest_age = float(last_sample.ages.min())
    ratio = float(run.buffer.decay.factor(np.array([freshest_age]))[0]) / last["replay/oldest_decay"]
    assert ratio > 3, f"freshest/oldest priority ratio {ratio:.2f}"


def test_freshper_acts_at_the_default_settings():
    check_replay_acts(simulate(tiny_freshper_config()))


def old_bucket_shares(run: SimulatedRun, draws: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Measured and analytic (FreshPER Eq. 14, ages in iterations) sampling share of each collection
    iteration left in the buffer, at the step after the run's last."""
    config, buffer = run.config, run.buffer
    run.clock.training_iteration += 1
    run.clock.optimizer_steps += 1
    t_iter = run.clock.training_iteration
    ids, _ = buffer.probabilities(run.t)
    items = buffer.state_dict()["items"]
    iters = np.array([x.info["iteration"] for x in items])
    base = np.abs([run.signal(x) for x in items]) + config.replay_eps
    keys = (base * np.exp(-(t_iter - iters) / config.replay_tau)) ** config.replay_alpha
    buckets = np.unique(iters)
    expected = np.array([keys[iters == b].sum() for b in buckets]) / keys.sum()
    counts = np.zeros(buckets.shape[0])
    for _ in range(draws // 10_000):
        drawn = np.array([x.info["iteration"] for x in buffer.sample(10_000, run.t).items])
        counts += np.array([np.sum(drawn == b) for b in buckets])
    return buckets, counts, expected


def test_old_items_share_falls_as_eq14_says_with_a_small_tau():
    run = simulate(tiny_freshper_config(tau=1.0), iterations=12)
    buckets, counts, expected = old_bucket_shares(run, draws=200_000)
    assert buckets.shape[0] == 8  # 256 slots = the last 8 iterations' batches
    p_value = stats.chisquare(counts, expected * counts.sum()).pvalue
    assert p_value > 1e-3, (counts / counts.sum(), expected, p_value)
    # Each iteration older holds a share ~exp(-alpha / tau) = 0.55x the next: the oldest ~0.01 of the newest.
    share = counts / counts.sum()
    assert np.all(np.diff(share) > 0) and share[0] < 0.02 * share[-1]


@pytest.mark.parametrize(
    ("setting", "value"),
    [("eps", 0.0), ("capacity", 0), ("capacity", 2.5), ("alpha", -1.0), ("beta_0", 1.5), ("beta_horizon", 0)],
)
def test_bad_replay_settings_are_refused_by_name(setting, value):
    with pytest.raises(ValueError, match=f"replay {setting}"):
        tiny_freshper_config(**{setting: value}).validate()
