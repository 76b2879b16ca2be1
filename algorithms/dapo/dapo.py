"""DAPO (Yu et al., 2025) with optional FreshPER replay, as an RLlib Algorithm.

One ``training_step`` is the story of ARCHITECTURE.md section 3:
  1. roll out groups (G episodes per task seed) on the EnvRunners' vLLM engines;
  2. shape rewards (overlong punishment) and compute group advantages;
  3. dynamic sampling: keep informative groups until P are collected, surplus kept for the next step;
  4. learn on the fresh batch, then on K replay batches (FreshPER), then store the fresh groups;
  5. push the new weights to every engine.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, LEARNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME

from algorithms.dapo.config import DAPOConfig
from algorithms.dapo.dynamic_sampling import DynamicSampler
from algorithms.dapo.groups import DYNAMIC_SAMPLING_METRICS, shape_and_score_group
from algorithms.replay import replay_fraction
from algorithms.trajectory import Trajectory
from envs.seeds import SPLITS

Group = list[Trajectory]

# A rollout that loses groups to a crashed EnvRunner is retried on the restarted runners this many times.
MAX_ROLLOUT_ATTEMPTS = 3
# How long to wait for a crashed runner to come back (it restarts its own vLLM engine) before giving up.
RUNNER_RESTART_TIMEOUT_S = 900.0


# The evaluation stream's key beside the run's seed (numpy SeedSequence entropy [seed, key]).
EVALUATION_STREAM = 1


def sampling_rngs(seed: int | None) -> tuple[np.random.Generator, np.random.Generator]:
    """The generators of training's and evaluation's sampling seeds: both determined by ``seed``, and
    independent, so that drawing evaluation seeds leaves training's sequence as it was."""
    return np.random.default_rng(seed), np.random.default_rng([seed or 0, EVALUATION_STREAM])


class DAPO(Algorithm):
    @classmethod
    def get_default_config(cls) -> DAPOConfig:
        return DAPOConfig()

    def setup(self, config: DAPOConfig) -> None:
        super().setup(config)
        self._task_cursor = 0
        self._optimizer_steps = 0
        self._policy_version = 0
        self._next_group_id = 0
        self._rng, self._eval_rng = sampling_rngs(config.seed)
        self._sampler: DynamicSampler[Group] = DynamicSampler(
            config.prompts_per_iteration,
            config.max_generation_batches,
            filter_groups=config.dynamic_sampling,
            metric=DYNAMIC_SAMPLING_METRICS[config.dynamic_sampling_metric],
        )
        self._replay = config.build_replay_buffer()

    # ------------------------------------------------------------------------------------------------
    def training_step(self) -> None:
        with self._timer("timing/rollout_s"):
            groups, stats = self._sampler.collect(self._generate_groups)
        self._log_groups(groups, stats)
        if not groups:
            return
        fresh = [t for group in groups for t in group]

        with self._timer("timing/learn_s"):
            self._learn(fresh, weights=None, tag="fresh")
            self._learn_from_replay(batch_size=len(fresh))
            self._store(fresh)

        with self._timer("timing/weight_sync_s"):
            self._sync_weights()

    # ------------------------------------------------------------------------------------------------
    def _generate_groups(self, num_groups: int) -> list[Group]:
        """One generation batch: num_groups new task seeds, G rollouts each, shaped and scored."""
        seeds = self._next_seeds(num_groups)
        groups = self._rollout(seeds)
        for group in groups:
            shape_and_score_group(
                group,
                overlong_punishment=self.config.overlong_punishment,
                overlong_scope=self.config.overlong_scope,
                max_response_tokens=self.config.max_response_tokens,
                overlong_cache_len=self.config.overlong_cache_len,
                advantage_eps=self.config.advantage_eps,
            )
        return groups

    def _next_seeds(self, count: int) -> list[int]:
        split = SPLITS[self.config.task_split]
        seeds = [split[(self._task_cursor + i) % len(split)] for i in range(count)]
        self._task_cursor += count
        return seeds

    def _rollout(self, seeds: Sequence[int]) -> list[Group]:
        """Spread the seeds over the EnvRunners; seeds lost to a crashed runner are retried after restart."""
        first_id = self._next_group_id
        self._next_group_id += len(seeds)
        pending = {first_id + i: seed for i, seed in enumerate(seeds)}
        done: dict[int, Group] = {}
        for _ in range(MAX_ROLLOUT_ATTEMPTS):
            for group in self._sample_on_runners(pending):
                done[group[0].group_id] = group
                pending.pop(group[0].group_id, None)
            if not pending:
                break
            self._wait_for_runners()
        self.metrics.log_value("rollout/groups_lost", len(pending), reduce="sum")
        return [done[gid] for gid in sorted(done)]

    def _sample_on_runners(
        self, pending: dict[int, int], rng: np.random.Generator | None = None, **overrides: Any
    ) -> list[Group]:
        """Roll out the ``pending`` {group id: task seed}; the sampling seed comes from ``rng`` (default: the
        training stream)."""
        runner_group = self.env_runner_group
        kwargs = {
            "collection_step": self._age_clock(),
            "policy_version": self._policy_version,
            "sampling_seed": int((self._rng if rng is None else rng).integers(2**31 - 1)),
            **overrides,
        }
        ids = sorted(pending)
        if runner_group.num_remote_env_runners() == 0:
            groups = self.env_runner.sample_groups([pending[i] for i in ids], group_ids=ids, **kwargs)
            self.metrics.aggregate([self.env_runner.get_metrics()], key=ENV_RUNNER_RESULTS)
            return groups
        runner_ids = runner_group.healthy_env_runner_ids()
        chunks = {rid: ids[k :: len(runner_ids)] for k, rid in enumerate(runner_ids)}

        def sample(runner) -> tuple[list[Group], dict[str, Any]]:
            mine = chunks.get(runner.worker_index, [])
            seed = kwargs["sampling_seed"] + runner.worker_index
            groups = runner.sample_groups(
                [pending[gid] for gid in mine], group_ids=mine, **{**kwargs, "sampling_seed": seed}
            )
            return groups, runner.get_metrics()

        results = runner_group.foreach_env_runner(
            sample, local_env_runner=False, remote_worker_ids=runner_ids
        )
        self.metrics.aggregate([metrics for _, metrics in results], key=ENV_RUNNER_RESULTS)
        return [group for groups, _ in results for group in groups]

    def evaluate_success(self, seeds: Sequence[int], samples_per_seed: int = 1) -> list[bool]:
        """Success of ``samples_per_seed`` episodes per task seed with the current policy (training sampling
        settings); nothing is trained, stored or counted in the training metrics. Its sampling seeds come from
        their own stream, so evaluating does not change what training samples next."""
        pending = dict(enumerate(seeds))
        groups = self._sample_on_runners(
            pending, rng=self._eval_rng, group_size=samples_per_seed, log_metrics=False
        )
        return [t.success for group in groups for t in group]

    # ------------------------------------------------------------------------------------------------
    def _learn(self, trajectories: list[Trajectory], weights: np.ndarray | None, tag: str) -> None:
        """One update pass on every learner. The learning-rate warm-up counts this iteration (fresh and replay
        passes alike); the optimizer-step count is the learners' own, so skipped steps are not counted."""
        iteration = self.training_iteration

        def update(learner) -> tuple[dict[str, Any], int]:
            results = learner.update_from_trajectories(trajectories, weights, tag=tag, iteration=iteration)
            return results, learner.optimizer_steps

        calls = self.learner_group.foreach_learner(update)
        failed = [call.get() for call in calls if not call.ok]
        if failed:
            raise RuntimeError(f"DAPO learner update failed on {len(failed)} learner(s)") from failed[0]
        results = [call.get() for call in calls]
        self.metrics.aggregate([metrics for metrics, _ in results], key=LEARNER_RESULTS)
        # Every learner runs every step (DDP), so any one learner's count is the run's.
        self._optimizer_steps = results[0][1]

    def _learn_from_replay(self, batch_size: int) -> None:
        if self._replay is None or len(self._replay) == 0:
            self.metrics.log_value("replay/fraction", 0.0, reduce="mean")
            return
        replayed = 0
        for _ in range(self.config.replay_batches):
            sample = self._replay.sample(batch_size, self._age_clock())
            self._learn(list(sample.items), sample.is_weights, tag="replay")
            # After their step, replayed items get the base priority of their own signal: unchanged unless
            # they entered at the buffer's max priority (insert_at_max_priority, as the reference code).
            self._replay.update_priorities(sample.indices, [self._priority_signal(t) for t in sample.items])
            replayed += len(sample)
            successes = [t.success for t in sample.items]
            for key, value in self._replay.metrics(sample, successes=successes).items():
                self.metrics.log_value(key, value, reduce="mean")
        self.metrics.log_value("replay/fraction", replay_fraction(batch_size, replayed), reduce="mean")

    def _store(self, fresh: list[Trajectory]) -> None:
        """Only groups that survived dynamic sampling enter the buffer (FreshPER section 3)."""
        if self._replay is None:
            return
        signals = (
            None if self.config.replay_insert_at_max_priority else [self._priority_signal(t) for t in fresh]
        )
        self._replay.add(
            fresh, signals, self._age_clock(), collection_steps=[t.collection_step for t in fresh]
        )

    def _priority_signal(self, trajectory: Trajectory) -> float:
        """|R_i| or |A_i| before the absolute value (FreshPER Eq. 15; the buffer adds eps)."""
        return trajectory.reward if self.config.replay_priority == "reward" else trajectory.advantage

    def _age_clock(self) -> int:
        """The replay step t (ages t - t_i, tau and beta_horizon are in its unit): the training iteration by
        default, as the FreshPER reference code counts; or the optimizer steps the learners have run."""
        if self.config.replay_age_unit == "iterations":
            return self.training_iteration
        return self._optimizer_steps

    def _sync_weights(self) -> None:
        # Wait for every engine (timeout None): the next rollout must use the new weights.
        self.env_runner_group.sync_weights(
            from_worker_or_learner_group=self.learner_group, inference_only=True, timeout_seconds=None
        )
        self._policy_version += 1

    def _wait_for_runners(self) -> None:
        """Bring crashed remote runners back (restart, current weights) before retrying their seeds."""
        runner_group = self.env_runner_group
        deadline = time.monotonic() + RUNNER_RESTART_TIMEOUT_S
        total = runner_group.num_remote_env_runners()
        while True:
            self.restore_env_runners(runner_group)
            healthy = runner_group.num_healthy_remote_env_runners()
            if healthy == total:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"EnvRunners did not come back within {RUNNER_RESTART_TIMEOUT_S:.0f} s after a crash; "
                    f"{healthy} of {total} are healthy"
                )
            time.sleep(2.0)

    def restore_env_runners(self, env_runner_group) -> list[int]:
        """Restarted runners come back with the initial weights: push the current ones before they sample."""
        restored = env_runner_group.probe_unhealthy_env_runners()
        if restored:
            env_runner_group.sync_weights(
                from_worker_or_learner_group=self.learner_group,
                to_worker_indices=restored,
                inference_only=True,
                timeout_seconds=None,
            )
            self.metrics.log_value("rollout/env_runners_restored", len(restored), reduce="sum")
        return restored

    # ------------------------------------------------------------------------------------------------
    def _log_groups(self, groups: list[Group], stats) -> None:
        log = self.metrics.log_value
        log("rollout/groups_sampled", stats.groups_sampled, reduce="sum")
        log("rollout/groups_kept", stats.groups_kept, reduce="sum")
        log("rollout/groups_from_surplus", stats.groups_from_surplus, reduce="sum")
        log("rollout/surplus_groups", stats.surplus_groups, reduce="mean")
        log("rollout/generation_batches", stats.generation_batches, reduce="sum")
        log("rollout/budget_exhausted", float(stats.budget_exhausted), reduce="mean")
        trajectories = [t for group in groups for t in group]
        if not trajectories:
            return
        rewards = np.array([t.reward for t in trajectories])
        lengths = np.array([t.num_response_tokens for t in trajectories])
        log("rollout/reward_mean", float(rewards.mean()), reduce="mean")
        log("rollout/reward_std", float(rewards.std()), reduce="mean")
        log("rollout/return_mean", float(np.mean([t.episode_return for t in trajectories])), reduce="mean")
        log("rollout/success", float(np.mean([t.success for t in trajectories])), reduce="mean")
        log("rollout/response_length_mean", float(lengths.mean()), reduce="mean")
        log("rollout/response_length_max", float(lengths.max()), reduce="max")
        log(
            "rollout/response_clip_ratio",
            float(np.mean([t.response_truncated for t in trajectories])),
            reduce="mean",
        )
        log("rollout/turns_mean", float(np.mean([t.num_turns for t in trajectories])), reduce="mean")

    @contextmanager
    def _timer(self, key: str):
        started = time.perf_counter()
        yield
        self.metrics.log_value(key, time.perf_counter() - started, reduce="sum")

    # ------------------------------------------------------------------------------------------------
    def get_state(self, *args, **kwargs) -> dict[str, Any]:
        state = super().get_state(*args, **kwargs)
        state["dapo"] = {
            "task_cursor": self._task_cursor,
            "optimizer_steps": self._optimizer_steps,
            "policy_version": self._policy_version,
            "next_group_id": self._next_group_id,
            "rng": self._rng.bit_generator.state,
            "eval_rng": self._eval_rng.bit_generator.state,
            "sampler": self._sampler.state_dict(),
            "replay": None if self._replay is None else self._replay.state_dict(),
        }
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        super().set_state(state)
        dapo = state.get("dapo")
        if dapo is None:
            return
        self._task_cursor = dapo["task_cursor"]
        self._optimizer_steps = dapo["optimizer_steps"]
        self._policy_version = dapo["policy_version"]
        self._next_group_id = dapo["next_group_id"]
        self._rng.bit_generator.state = dapo["rng"]
        if "eval_rng" in dapo:  # checkpoints from before evaluation had its own stream
            self._eval_rng.bit_generator.state = dapo["eval_rng"]
        self._sampler.load_state_dict(dapo["sampler"])
        if self._replay is not None and dapo["replay"] is not None:
            self._replay.load_state_dict(dapo["replay"])

    @property
    def num_env_steps_sampled_lifetime(self) -> int:
        return int(self.metrics.peek((ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME), default=0))
