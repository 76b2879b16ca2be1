"""DAPO (Yu et al., 2025) with optional FreshPER replay, as an RLlib Algorithm.

One ``training_step`` (docs/design.md, section 3, names the function behind each step):
  1. roll out groups (G episodes per task seed) on the EnvRunners' vLLM engines;
  2. shape rewards (overlong punishment) and compute group advantages;
  3. dynamic sampling: keep informative groups until P are collected, surplus kept for the next step; groups
     older than max_staleness policy versions are dropped; with replay backfill, a short batch is filled
     from the buffer;
  4. learn on the fresh batch, then on K replay batches (FreshPER), then store the fresh groups;
  5. push the new weights to every engine.
In async mode (rollout_mode="async") the remote runners generate the next batch during step 4
(algorithms/dapo/remote_rollouts.py has the schedule).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.core import COMPONENT_LEARNER, COMPONENT_RL_MODULE
from ray.rllib.utils.metrics import (
    ENV_RUNNER_RESULTS,
    LEARNER_RESULTS,
    NUM_ENV_STEPS_SAMPLED_LIFETIME,
    WEIGHTS_SEQ_NO,
)

from algorithms.dapo.advantage_estimators import ADVANTAGE_ESTIMATOR_REGISTRY, AdvantageEstimator
from algorithms.dapo.config import DAPOConfig, evaluation_task_checks
from algorithms.dapo.dynamic_sampling import DynamicSampler
from algorithms.dapo.dynamic_sampling_metrics import DYNAMIC_SAMPLING_METRIC_REGISTRY
from algorithms.dapo.evaluation import summarize_episodes
from algorithms.dapo.group_staleness import within_staleness
from algorithms.dapo.groups import shape_and_score_group
from algorithms.dapo.overlong import is_overlong
from algorithms.dapo.remote_rollouts import (
    InFlightRollout,
    launch_rollout,
    sample_on_remote_runners,
    wait_for_rollout,
)
from algorithms.replay import PrioritizedReplayBuffer, ReplaySample, replay_fraction
from algorithms.trajectory import Trajectory
from envs.seeds import SPLITS
from envs.seeds import seeds as task_seeds

Group = list[Trajectory]

# A rollout that loses groups to a crashed EnvRunner is retried on the restarted runners this many times.
MAX_ROLLOUT_ATTEMPTS = 3
# How long to wait for a crashed runner to come back (it restarts its own vLLM engine) before giving up.
RUNNER_RESTART_TIMEOUT_S = 900.0


# The evaluation stream's key beside the run's seed (numpy SeedSequence entropy [seed, key, policy version]).
EVALUATION_STREAM = 1


def sampling_rngs(
    seed: int | None, policy_version: int = 0
) -> tuple[np.random.Generator, np.random.Generator]:
    """The generators of training's sampling seeds and of evaluation's at ``policy_version``: determined by
    ``seed`` and independent, so that drawing evaluation seeds leaves training's sequence as it was.
    Evaluation's depends on the policy version only, not on how many evaluations came before, so the same
    weights are evaluated on the same samples: a resumed run's evaluations equal the straight run's."""
    return np.random.default_rng(seed), np.random.default_rng([seed or 0, EVALUATION_STREAM, policy_version])


def priority_signal(trajectory: Trajectory, replay_priority: str) -> float:
    """|R_i| or |A_i| before the absolute value (FreshPER Eq. 15; the buffer adds eps), by the config's
    ``replay_priority``."""
    return trajectory.reward if replay_priority == "reward" else trajectory.advantage


def replay_step(replay_age_unit: str, training_iteration: int, optimizer_steps: int) -> int:
    """The replay step t (ages t - t_i, tau and beta_horizon are in its unit): the training iteration by
    default, as the FreshPER reference code counts; or the optimizer steps the learners have run."""
    return training_iteration if replay_age_unit == "iterations" else optimizer_steps


@dataclass(frozen=True)
class DAPOCounters:
    """DAPO's bookkeeping at one moment, read-only (``DAPO.counters``): the counters a checkpoint stores and
    the sizes of what waits between iterations."""

    task_cursor: int  # training tasks drawn from the split so far
    next_group_id: int
    optimizer_steps: int  # the learners' own count: skipped (empty) steps are not counted
    policy_version: int  # weight syncs so far
    sampling_rng_state: dict[str, Any]  # the training sampling stream's generator state
    replay_size: int  # items in the replay buffer, 0 without one
    surplus_groups: int  # kept groups that wait for the next iteration (dynamic sampling)


class DAPO(Algorithm):
    @classmethod
    def get_default_config(cls) -> DAPOConfig:
        return DAPOConfig()

    def setup(self, config: DAPOConfig) -> None:
        # DAPO's own state first: Algorithm.setup ends with the callbacks' on_algorithm_init, which may
        # evaluate the starting policy (experiments.sweep measures its curve's start there).
        self._task_cursor = 0
        self._optimizer_steps = 0
        self._policy_version = 0
        self._next_group_id = 0
        self._rng, _ = sampling_rngs(config.seed)
        self._advantage_estimator: AdvantageEstimator = ADVANTAGE_ESTIMATOR_REGISTRY.get(
            config.advantage_estimator
        )(config)
        self._sampler: DynamicSampler[Group] = DynamicSampler(
            config.prompts_per_iteration,
            config.max_generation_batches,
            filter_groups=config.dynamic_sampling,
            metric=DYNAMIC_SAMPLING_METRIC_REGISTRY.get(config.dynamic_sampling_metric),
            also_keep=self._advantage_estimator.also_keep,
        )
        self._replay = config.build_replay_buffer()
        # Async mode: the generation batch launched during the last update, used by the next iteration.
        self._in_flight: InFlightRollout | None = None
        super().setup(config)

    @property
    def counters(self) -> DAPOCounters:
        """The bookkeeping now, as a copy: what get_state stores, and what tests and tools read."""
        return DAPOCounters(
            task_cursor=self._task_cursor,
            next_group_id=self._next_group_id,
            optimizer_steps=self._optimizer_steps,
            policy_version=self._policy_version,
            sampling_rng_state=self._rng.bit_generator.state,
            replay_size=0 if self._replay is None else len(self._replay),
            surplus_groups=len(self._sampler.surplus),
        )

    @property
    def replay_buffer(self) -> PrioritizedReplayBuffer | None:
        """The replay buffer the config built, or None (on-policy)."""
        return self._replay

    @property
    def sampler(self) -> DynamicSampler[Group]:
        """Dynamic sampling's state: its filter and the surplus groups kept for the next iteration."""
        return self._sampler

    @property
    def in_flight(self) -> InFlightRollout | None:
        """Async mode: the generation batch launched during the last update, or None."""
        return self._in_flight

    # ------------------------------------------------------------------------------------------------
    def training_step(self) -> None:
        with self._timer("timing/rollout_s"):
            self._drop_stale_surplus()
            groups, stats = self._sampler.collect(self._generate_groups)
            if self.config.rollout_mode == "async":
                self._launch_next_rollout()
        self._log_groups(groups, stats)
        fresh = [t for group in groups for t in group]
        backfill = self._backfill(self.config.prompts_per_iteration - len(groups))
        if not fresh and backfill is None:
            return

        with self._timer("timing/learn_s"):
            self._release_local_engine_weights()
            if fresh:
                self.update_learners(fresh, weights=None, tag="fresh")
            if backfill is not None:
                self._learn_replayed(backfill, tag="backfill")
            backfilled = 0 if backfill is None else len(backfill)
            self._learn_from_replay(batch_size=len(fresh) + backfilled, backfilled=backfilled)
            self._store(fresh)

        with self._timer("timing/weight_sync_s"):
            self._sync_weights()

    # ------------------------------------------------------------------------------------------------
    def _generate_groups(self, num_groups: int) -> list[Group]:
        """One generation batch: num_groups new task seeds, G rollouts each, shaped and scored; in async mode
        the batch launched during the last update, if there is one. Groups staler than max_staleness are
        dropped (never one of a batch generated now)."""
        if self._in_flight is not None:
            groups = self._collect_in_flight()
        else:
            groups = self._rollout(self._next_seeds(num_groups))
        groups = self._drop_stale(groups)
        for group in groups:
            shape_and_score_group(
                group,
                overlong_punishment=self.config.overlong_punishment,
                overlong_scope=self.config.overlong_scope,
                max_response_tokens=self.config.max_response_tokens,
                overlong_cache_len=self.config.resolved_overlong_cache_len(),
                estimator=self._advantage_estimator,
            )
        for key, value in self._advantage_estimator.generation_batch_metrics(groups).items():
            self.metrics.log_value(key, value, reduce="sum")
        return groups

    def _next_seeds(self, count: int) -> list[int]:
        split = SPLITS[self.config.task_split]
        first = self.config.task_offset + self._task_cursor
        seeds = [split[(first + i) % len(split)] for i in range(count)]
        self._task_cursor += count
        return seeds

    def _rollout(self, seeds: Sequence[int]) -> list[Group]:
        """Spread the seeds over the EnvRunners; seeds lost to a crashed runner are retried after restart."""
        pending = self._new_groups(seeds)
        return self._retry_lost(pending, self._sample_on_runners(pending))

    def _new_groups(self, seeds: Sequence[int]) -> dict[int, int]:
        """{group id: task seed} for the next groups."""
        first_id = self._next_group_id
        self._next_group_id += len(seeds)
        return {first_id + i: seed for i, seed in enumerate(seeds)}

    def _retry_lost(self, pending: dict[int, int], groups: list[Group]) -> list[Group]:
        """``groups`` of ``pending``, plus those a crashed runner lost, rolled out again after restart."""
        groups, lost = self._complete(pending, groups)
        self.metrics.log_value("rollout/groups_lost", len(lost), reduce="sum")
        return groups

    def _complete(
        self, pending: dict[int, int], groups: list[Group], **sampling: Any
    ) -> tuple[list[Group], dict[int, int]]:
        """``groups`` (sampled for ``pending``) completed with those a crashed runner lost, rolled out again
        with the same ``sampling`` once the runners are back, up to MAX_ROLLOUT_ATTEMPTS in all; returns the
        groups in id order and the {group id: task seed} still lost."""
        pending = dict(pending)
        done: dict[int, Group] = {}
        for attempt in range(MAX_ROLLOUT_ATTEMPTS):
            if attempt:
                groups = self._sample_on_runners(pending, **sampling)
            for group in groups:
                done[group[0].group_id] = group
                pending.pop(group[0].group_id, None)
            if not pending:
                break
            self._wait_for_runners()
        return [done[gid] for gid in sorted(done)], pending

    def _sampling_kwargs(self, rng: np.random.Generator | None = None, **overrides: Any) -> dict[str, Any]:
        """The EnvRunners' sample_groups arguments: age clock and policy version now, a sampling seed from
        ``rng`` (default: the training stream)."""
        return {
            "collection_step": self._age_clock(),
            "policy_version": self._policy_version,
            "sampling_seed": int((self._rng if rng is None else rng).integers(2**31 - 1)),
            **overrides,
        }

    def _launch_next_rollout(self) -> None:
        """Async mode: start the next iteration's first generation batch on the current weights."""
        pending = self._new_groups(self._next_seeds(self.config.prompts_per_iteration))
        self._in_flight = launch_rollout(self.env_runner_group, pending, self._sampling_kwargs())

    def _collect_in_flight(self) -> list[Group]:
        """The launched batch (waiting for it if needed); groups a crashed runner lost are rolled out now."""
        rollout, self._in_flight = self._in_flight, None
        wait_for_rollout(self.env_runner_group, rollout)
        self.metrics.aggregate(rollout.metrics, key=ENV_RUNNER_RESULTS)
        return self._retry_lost(rollout.pending, rollout.groups)

    def _collected_in_flight(self) -> InFlightRollout | None:
        """The async batch in flight, waited for (a checkpoint stores its groups: resuming trains on the same
        batch, generated by the same weights), or None."""
        if self._in_flight is not None:
            wait_for_rollout(self.env_runner_group, self._in_flight)
        return self._in_flight

    def _drop_stale(self, groups: list[Group]) -> list[Group]:
        kept = within_staleness(groups, self._policy_version, self.config.max_staleness)
        self.metrics.log_value("rollout/groups_dropped_stale", len(groups) - len(kept), reduce="sum")
        return kept

    def _drop_stale_surplus(self) -> None:
        """Surplus groups age one version per iteration they wait: drop those past max_staleness."""
        self._sampler.surplus = self._drop_stale(self._sampler.surplus)

    def _backfill(self, missing_groups: int) -> ReplaySample | None:
        """Replay backfill: ``missing_groups`` x G trajectories from the buffer (FreshPER priorities and IS
        weights) for a batch dynamic sampling left short, or None (off, nothing missing, empty buffer)."""
        enabled = self.config.replay_backfill and self._replay is not None and len(self._replay) > 0
        if not enabled or missing_groups <= 0:
            self.metrics.log_value("rollout/groups_backfilled", 0, reduce="sum")
            return None
        self.metrics.log_value("rollout/groups_backfilled", missing_groups, reduce="sum")
        return self._replay.sample(missing_groups * self.config.group_size, self._age_clock())

    def _sample_on_runners(
        self, pending: dict[int, int], rng: np.random.Generator | None = None, **overrides: Any
    ) -> list[Group]:
        """Roll out the ``pending`` {group id: task seed}; the sampling seed comes from ``rng`` (default: the
        training stream)."""
        runner_group = self.env_runner_group
        kwargs = self._sampling_kwargs(rng, **overrides)
        # Without its own metrics (evaluation), a call leaves the runners' metrics to the next training one.
        aggregate = kwargs.get("log_metrics", True)
        ids = sorted(pending)
        if runner_group.num_remote_env_runners() == 0:
            groups = self.env_runner.sample_groups([pending[i] for i in ids], group_ids=ids, **kwargs)
            if aggregate:
                self.metrics.aggregate([self.env_runner.get_metrics()], key=ENV_RUNNER_RESULTS)
            return groups
        groups, metrics = sample_on_remote_runners(runner_group, pending, kwargs)
        if aggregate:
            self.metrics.aggregate(metrics, key=ENV_RUNNER_RESULTS)
        return groups

    # ------------------------------------------------------------------------------------------------
    @classmethod
    def _should_create_evaluation_env_runners(cls, eval_config: DAPOConfig) -> bool:
        """Never: evaluation runs on the training EnvRunners and their engines (no second vLLM engine)."""
        return False

    def evaluate(self, parallel_train_future=None) -> dict[str, float | int | str]:
        """RLlib's evaluation hook (``train()`` calls it every ``evaluation_interval`` iterations and files
        the result under ``result["evaluation"]``): :meth:`evaluate_policy` with the config's settings."""
        return self.evaluate_policy()

    def evaluate_policy(
        self, num_tasks: int | None = None, samples_per_task: int | None = None, split: str | None = None
    ) -> dict[str, float | int | str]:
        """Roll out ``samples_per_task`` episodes on each of the first ``num_tasks`` tasks of ``split`` with
        the current policy (None: the config's ``evaluation_*`` value) and summarize them
        (:func:`algorithms.dapo.evaluation.summarize_episodes`). Nothing is trained, stored or counted in the
        training metrics, and the sampling seeds come from their own stream, so evaluating does not change
        what training samples next."""
        config = self.config
        num_tasks = config.evaluation_num_tasks if num_tasks is None else num_tasks
        samples_per_task = (
            config.evaluation_samples_per_task if samples_per_task is None else samples_per_task
        )
        split = config.evaluation_split if split is None else split
        for ok, message in evaluation_task_checks(num_tasks, samples_per_task, split):
            if not ok:
                raise ValueError(f"DAPO.evaluate_policy: {message}")
        pending = dict(enumerate(task_seeds(split, num_tasks)))
        _, rng = sampling_rngs(config.seed, self._policy_version)
        sampling = dict(
            rng=rng,
            group_size=samples_per_task,
            temperature=config.evaluation_temperature,
            top_p=config.evaluation_top_p,
            log_metrics=False,
        )
        groups, lost = self._complete(pending, self._sample_on_runners(pending, **sampling), **sampling)
        if lost:
            raise RuntimeError(
                f"DAPO.evaluate_policy: {len(lost)} of {num_tasks} tasks were lost to crashed EnvRunners "
                f"{MAX_ROLLOUT_ATTEMPTS} times"
            )
        return summarize_episodes(groups, split=split)

    # ------------------------------------------------------------------------------------------------
    def update_learners(self, trajectories: list[Trajectory], weights: np.ndarray | None, tag: str) -> None:
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

    def _learn_from_replay(self, batch_size: int, backfilled: int = 0) -> None:
        """K replay passes of ``batch_size`` (the iteration's batch, ``backfilled`` of it from the buffer) and
        replay/fraction, the share of the iteration's samples drawn from the buffer, backfill included."""
        if self._replay is None or len(self._replay) == 0:
            self.metrics.log_value("replay/fraction", 0.0, reduce="mean")
            return
        replayed = 0
        for _ in range(self.config.replay_batches):
            sample = self._replay.sample(batch_size, self._age_clock())
            self._learn_replayed(sample, tag="replay")
            replayed += len(sample)
        fraction = replay_fraction(batch_size - backfilled, replayed + backfilled)
        self.metrics.log_value("replay/fraction", fraction, reduce="mean")

    def _learn_replayed(self, sample: ReplaySample, tag: str) -> None:
        """One pass on a batch drawn from the buffer, weighted by its IS weights."""
        self.update_learners(list(sample.items), sample.is_weights, tag=tag)
        # After their step, replayed items get the base priority of their own signal: unchanged unless
        # they entered at the buffer's max priority (insert_at_max_priority, as the reference code).
        self._replay.update_priorities(sample.indices, [self._priority_signal(t) for t in sample.items])
        successes = [t.success for t in sample.items]
        for key, value in self._replay.metrics(sample, successes=successes).items():
            self.metrics.log_value(key, value, reduce="mean")

    def _store(self, fresh: list[Trajectory]) -> None:
        """Only groups that survived dynamic sampling enter the buffer (FreshPER section 3), less the episodes
        overlong filtering masks (DAPO section 3.4): a replayed one would take a draw and train nothing."""
        if self._replay is None:
            return
        if self.config.overlong_filtering:
            fresh = [t for t in fresh if not is_overlong(t, self.config.overlong_scope)]
        signals = (
            None if self.config.replay_insert_at_max_priority else [self._priority_signal(t) for t in fresh]
        )
        self._replay.add(
            fresh, signals, self._age_clock(), collection_steps=[t.collection_step for t in fresh]
        )

    def _priority_signal(self, trajectory: Trajectory) -> float:
        return priority_signal(trajectory, self.config.replay_priority)

    def _age_clock(self) -> int:
        return replay_step(self.config.replay_age_unit, self.training_iteration, self._optimizer_steps)

    def _release_local_engine_weights(self) -> None:
        """Generation in this process: the engine's weights sit idle through the update, and the sync after it
        replaces them, so the update gets their memory (0.6 GiB at the 0.5B shape in bf16)."""
        if self.env_runner_group.num_remote_env_runners() == 0:
            self.env_runner_group.local_env_runner.release_engine_weights()

    def _sync_weights(self) -> None:
        runner_group = self.env_runner_group
        if runner_group.num_remote_env_runners() == 0:
            # RLlib's sync_weights ray.put()s the weights even when only the local runner takes them: a
            # second copy that stays mapped from the object store (0.68 GiB at the 0.5B shape, dapo_step).
            state = self.learner_group.get_state(
                components=f"{COMPONENT_LEARNER}/{COMPONENT_RL_MODULE}", inference_only=True
            )[COMPONENT_LEARNER]
            runner_group.local_env_runner.set_state(
                {key: value for key, value in state.items() if key in (COMPONENT_RL_MODULE, WEIGHTS_SEQ_NO)}
            )
        else:
            # Wait for every engine (timeout None): the next rollout must use the new weights.
            runner_group.sync_weights(
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
        staleness = np.array([self._policy_version - t.oldest_policy_version for t in trajectories])
        log("rollout/staleness_mean", float(staleness.mean()), reduce="mean")
        log("rollout/staleness_max", int(staleness.max()), reduce="max")
        rewards = np.array([t.reward for t in trajectories])
        lengths = np.array([t.num_response_tokens for t in trajectories])
        log("rollout/reward_mean", float(rewards.mean()), reduce="mean")
        log("rollout/reward_std", float(rewards.std()), reduce="mean")
        log("rollout/return_mean", float(np.mean([t.episode_return for t in trajectories])), reduce="mean")
        # Of the groups kept: dynamic sampling keeps mixed groups, so this sits near 1/2 whatever the policy's
        # success (the EnvRunners' rollout/success counts every sampled episode).
        log("rollout/kept_groups_success", float(np.mean([t.success for t in trajectories])), reduce="mean")
        log("rollout/response_length_mean", float(lengths.mean()), reduce="mean")
        log("rollout/response_length_max", float(lengths.max()), reduce="max")
        log(
            "rollout/response_clip_ratio",
            float(np.mean([t.response_truncated for t in trajectories])),
            reduce="mean",
        )
        log("rollout/turns_mean", float(np.mean([t.num_turns for t in trajectories])), reduce="mean")
        for key, value in self._advantage_estimator.training_batch_metrics(groups).items():
            log(key, value, reduce="mean")

    @contextmanager
    def _timer(self, key: str):
        started = time.perf_counter()
        yield
        self.metrics.log_value(key, time.perf_counter() - started, reduce="sum")

    # ------------------------------------------------------------------------------------------------
    def get_state(self, *args, **kwargs) -> dict[str, Any]:
        state = super().get_state(*args, **kwargs)
        counters = self.counters
        state["dapo"] = {
            "task_cursor": counters.task_cursor,
            "optimizer_steps": counters.optimizer_steps,
            "policy_version": counters.policy_version,
            "next_group_id": counters.next_group_id,
            "rng": counters.sampling_rng_state,
            "sampler": self._sampler.state_dict(),
            "replay": None if self._replay is None else self._replay.state_dict(),
            "in_flight": self._collected_in_flight(),
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
        self._sampler.load_state_dict(dapo["sampler"])
        if self._replay is not None and dapo["replay"] is not None:
            self._replay.load_state_dict(dapo["replay"])
        self._in_flight = dapo.get("in_flight")

    @property
    def num_env_steps_sampled_lifetime(self) -> int:
        return int(self.metrics.peek((ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME), default=0))
