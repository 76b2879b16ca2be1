"""MultiTurnEnvRunner: RLlib EnvRunner that runs GRPO groups of multi-turn episodes with a vLLM engine.

RLlib's stock runner cannot batch text spaces (docs/design.md, section 6), so this one owns the loop: its
inference-only policy module holds the vLLM engine and chat renderer, ``sample_groups`` runs
:func:`algorithms.rollout.rollout_groups` for the task seeds the algorithm hands it, and weight syncs arrive
through ``set_state`` like any RLlib runner's. Works as the local runner (0 remote runners) or as N remote
actors, each with its own engine.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import ray
from ray.rllib.core import COMPONENT_RL_MODULE, DEFAULT_MODULE_ID
from ray.rllib.env.env_runner import EnvRunner
from ray.rllib.utils.checkpoints import Checkpointable
from ray.rllib.utils.metrics import NUM_ENV_STEPS_SAMPLED, NUM_ENV_STEPS_SAMPLED_LIFETIME, WEIGHTS_SEQ_NO

import envs  # noqa: F401  (registers the freshrl/... ids)
from algorithms.rollout import rollout_groups
from algorithms.trajectory import Trajectory
from models.engine import SamplingConfig


class MultiTurnEnvRunner(EnvRunner, Checkpointable):
    def __init__(self, *, config, **kwargs):
        super().__init__(config=config, **kwargs)
        self.env = self._make_env()
        self._envs: list[gym.Env] = [self.env]
        self.module = None
        self._weights_seq_no = 0
        self.make_module()

    # ------------------------------------------------------------------ RLlib plumbing
    def _make_env(self) -> gym.Env:
        if not isinstance(self.config.env, str):
            raise ValueError(
                "DAPOConfig.environment(env=...) must be a registered gymnasium id, e.g. 'freshrl/Sokoban-v0'"
            )
        return gym.make(self.config.env, **dict(self.config.env_config or {}))

    def make_module(self) -> None:
        spec = self.config.get_rl_module_spec(spaces=self.get_spaces(), inference_only=True)
        self.module = spec.build()

    def get_spaces(self) -> dict[str, tuple[gym.Space, gym.Space]]:
        spaces = (self.env.observation_space, self.env.action_space)
        return {"__env__": spaces, "__env_single__": spaces, DEFAULT_MODULE_ID: spaces}

    def assert_healthy(self) -> None:
        assert self.env is not None and self.module is not None, "MultiTurnEnvRunner is not initialised"

    def get_metrics(self) -> dict[str, Any]:
        return self.metrics.reduce()

    def get_state(self, components=None, *, not_components=None, **kwargs) -> dict[str, Any]:
        state: dict[str, Any] = {NUM_ENV_STEPS_SAMPLED_LIFETIME: self.num_env_steps_sampled_lifetime}
        if self._check_component(COMPONENT_RL_MODULE, components, not_components):
            state[COMPONENT_RL_MODULE] = self.module.get_state()
            state[WEIGHTS_SEQ_NO] = self._weights_seq_no
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        if COMPONENT_RL_MODULE in state:
            seq_no = state.get(WEIGHTS_SEQ_NO, 0)
            # Released weights (release_engine_weights) are loaded whatever the sequence number says.
            if seq_no == 0 or self._weights_seq_no < seq_no or self.module.engine.weights_released:
                module_state = state[COMPONENT_RL_MODULE]
                if isinstance(module_state, ray.ObjectRef):
                    module_state = ray.get(module_state)
                if isinstance(module_state, dict) and DEFAULT_MODULE_ID in module_state:
                    module_state = module_state[DEFAULT_MODULE_ID]
                started = time.perf_counter()
                self.module.set_state(module_state)
                self.metrics.log_value("timing/weight_load_s", time.perf_counter() - started, reduce="sum")
            if seq_no > 0:
                self._weights_seq_no = seq_no
        if NUM_ENV_STEPS_SAMPLED_LIFETIME in state:
            self.num_env_steps_sampled_lifetime = state[NUM_ENV_STEPS_SAMPLED_LIFETIME]

    def get_ctor_args_and_kwargs(self):
        return (), {"config": self.config}

    def get_checkpointable_components(self):
        return []

    def stop(self) -> None:
        for env in self._envs:
            env.close()

    def sample(self, **kwargs) -> list[list[Trajectory]]:
        """RLlib's entry point; DAPO calls :meth:`sample_groups` with explicit task seeds."""
        return self.sample_groups(**kwargs)

    # ------------------------------------------------------------------ rollouts
    def sample_groups(
        self,
        seeds: Sequence[int] = (),
        *,
        collection_step: int = 0,
        policy_version: int = 0,
        group_ids: Sequence[int] | None = None,
        sampling_seed: int | None = None,
        group_size: int | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        log_metrics: bool = True,
    ) -> list[list[Trajectory]]:
        """G rollouts from each task seed; returns one list of G trajectories per seed."""
        if not seeds:
            return []
        config = self.config
        group_size = group_size or config.group_size
        self._ensure_envs(len(seeds) * group_size)
        sampling = SamplingConfig(
            temperature=config.temperature if temperature is None else temperature,
            top_p=config.top_p if top_p is None else top_p,
            max_tokens=config.max_response_tokens,
            stop=tuple(config.stop_strings),
            seed=sampling_seed,
        )
        started = time.perf_counter()
        groups = rollout_groups(
            self.module.engine,
            self.module.renderer,
            self._envs,
            seeds,
            group_size,
            sampling,
            max_context_tokens=config.max_context_tokens,
            collection_step=collection_step,
            policy_version=policy_version,
            group_ids=group_ids,
            max_trajectory_response_tokens=config.max_trajectory_response_tokens,
        )
        if log_metrics:
            self._log_rollout_metrics([t for group in groups for t in group], time.perf_counter() - started)
        # Until the next rollout (a learner update, in this process with a local learner) the KV cache holds
        # nothing of use: a weight sync empties the prefix cache anyway (RolloutEngine.release_kv_cache).
        self.module.engine.release_kv_cache()
        return groups

    def release_engine_weights(self) -> int:
        """Drop the engine's weights until the next weight load (``RolloutEngine.release_weights``)."""
        return self.module.engine.release_weights()

    def _ensure_envs(self, count: int) -> None:
        while len(self._envs) < count:
            self._envs.append(self._make_env())

    def _log_rollout_metrics(self, trajectories: list[Trajectory], seconds: float) -> None:
        turns = sum(t.num_turns for t in trajectories)
        generated = sum(t.num_response_tokens for t in trajectories)
        self.num_env_steps_sampled_lifetime += turns
        log = self.metrics.log_value
        log(NUM_ENV_STEPS_SAMPLED, turns, reduce="sum")
        log(NUM_ENV_STEPS_SAMPLED_LIFETIME, turns, reduce="lifetime_sum")
        log("rollout/episodes", len(trajectories), reduce="sum")
        log("rollout/generated_tokens", generated, reduce="sum")
        log("rollout/generation_s", seconds, reduce="sum")
        log("rollout/tokens_per_s", generated / max(seconds, 1e-9), reduce="mean")
        invalid = sum(t.invalid_turns for t in trajectories)
        log("rollout/invalid_output_rate", invalid / max(turns, 1), reduce="mean")
        log(
            "rollout/episode_return_mean",
            float(np.mean([t.episode_return for t in trajectories])),
            reduce="mean",
        )
        # Every sampled episode's: the policy's success on its training tasks, before dynamic sampling.
        log("rollout/success", float(np.mean([t.success for t in trajectories])), reduce="mean")
