"""Fixtures shared by every test folder."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from algorithms.dapo import DAPOConfig, apply_algorithm, apply_scale
from experiments.common.ray_session import start_ray

# Where a test's EnvRunner that kills itself leaves its mark (tests/algorithms/test_remote_runners.py).
CRASH_MARKER_VARIABLE = "FRESHRL_TEST_CRASH_MARKER"

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

# FrozenLake episodes of 2 turns instead of 5 (a 4x4 map's default): still multi-turn, and the random tiny
# model, which plays every turn, gives the learner rows of a third of the tokens (an iteration 3x faster).
SHORTEST_FROZEN_LAKE: dict[str, Any] = {"max_turns": 2}


@pytest.fixture(scope="session")
def small_dapo_config() -> Callable[..., DAPOConfig]:
    """``make(env, model_path=None, **training)``: ``dapo`` at the tiny scale shrunk to ``SMALLEST_WORKLOAD``
    (and ``SHORTEST_FROZEN_LAKE`` on the FrozenLake envs), then ``training`` (any ``DAPOConfig.training`` key)
    on top."""

    def make(env: str = "freshrl/FrozenLake-v0", model_path: str | None = None, **training) -> DAPOConfig:
        env_config = SHORTEST_FROZEN_LAKE if env.startswith("freshrl/FrozenLake") else {}
        config = DAPOConfig().environment(env, env_config=env_config)
        config = apply_scale(apply_algorithm(config, "dapo"), "tiny")
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


@pytest.fixture(scope="session")
def ray_settings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``ray.init`` settings of the run's one Ray instance: three logical CPUs (two EnvRunner actors and a
    Learner actor fit; the cores are shared), workers that can import the algorithm tests' modules (a test's
    runner class is pickled by reference) and know where a crashing runner leaves its mark."""
    python_path = os.pathsep.join(
        p for p in [str(Path(__file__).parent / "algorithms"), os.environ.get("PYTHONPATH", "")] if p
    )
    marker = tmp_path_factory.mktemp("ray") / "crashed"
    return {
        "num_cpus": 3,
        "runtime_env": {"env_vars": {"PYTHONPATH": python_path, CRASH_MARKER_VARIABLE: str(marker)}},
    }


@pytest.fixture
def ray_session(ray_settings: dict[str, Any]) -> Iterator[None]:
    """Ray for a test: one instance for the whole run, started by the first test that asks and kept for the
    next (a start costs seconds on two cores). A test that needs Ray started otherwise shuts it down after
    itself, and the next test that asks starts this one again; so does a Ray that a library started on its
    first use (RLlib does) without these settings."""
    import ray

    if ray.is_initialized() and ray.get_runtime_context().runtime_env != ray_settings["runtime_env"]:
        ray.shutdown()
    start_ray(**ray_settings)
    yield
