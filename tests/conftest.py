"""Fixtures shared by every test folder."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from algorithms.dapo import DAPOConfig, apply_algorithm, apply_scale

# The smallest DAPO workload that still runs the real path: 2 task seeds x 2 samples, 8 tokens per turn.
SMALLEST_WORKLOAD: dict[str, Any] = {
    "prompts_per_iteration": 2,
    "group_size": 2,
    "max_response_tokens": 8,
    "overlong_cache_len": 4,
    "max_generation_batches": 1,
    "minibatch_size": 4,
    "engine_kv_cache_gib": 0.25,
}


@pytest.fixture(scope="session")
def small_dapo_config() -> Callable[..., DAPOConfig]:
    """``make(env, model_path=None, **training)``: ``dapo`` at the tiny scale shrunk to ``SMALLEST_WORKLOAD``,
    then ``training`` (any ``DAPOConfig.training`` key) on top."""

    def make(env: str = "freshrl/FrozenLake-v0", model_path: str | None = None, **training) -> DAPOConfig:
        config = apply_scale(apply_algorithm(DAPOConfig().environment(env), "dapo"), "tiny")
        return config.training(model_path=model_path, **{**SMALLEST_WORKLOAD, **training})

    return make


@pytest.fixture
def step_gradients() -> Callable[[Any], list[dict[str, Any]]]:
    """``record(learner)`` -> a list that gets, at every AdamW step of ``learner``'s policy, a copy of each
    parameter's gradient by name (None where it has none). The learner frees gradients after its step, so a
    test reads them here."""

    def record(learner) -> list[dict[str, Any]]:
        steps: list[dict[str, Any]] = []
        optimizer = learner.get_optimizer("default_policy")
        model = learner.module["default_policy"].model
        step = optimizer.step

        def spy(*args, **kwargs):
            steps.append(
                {name: None if p.grad is None else p.grad.clone() for name, p in model.named_parameters()}
            )
            return step(*args, **kwargs)

        optimizer.step = spy
        return steps

    return record
