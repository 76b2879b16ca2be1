"""Shared settings for the entry-point tests: the smallest workload that still runs the real path (tiny LM,
real vLLM engine, real RLlib/Tune), and one Ray instance for the session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import ray

from experiments.common.ray_session import start_ray
from models.tiny import tiny_lm_path


@pytest.fixture(scope="session")
def tiny_workload() -> list[str]:
    """Workload options of experiments.sweep / experiments.compare: 2 prompts x 2 samples, 12 tokens per
    turn, one generation batch, 4 validation tasks. The model is named so that the tests do not depend on
    experiments.train's default model."""
    return [
        "--model", str(tiny_lm_path()),
        "--eval-tasks", "4",
        "--group-size", "2",
        "--prompts", "2",
        "--max-response-tokens", "12",
        "--max-generation-batches", "1",
        "--kv-cache-gib", "0.5",
    ]  # fmt: skip


@pytest.fixture(scope="session")
def ray_session() -> Iterator[None]:
    start_ray(num_cpus=2)
    yield
    ray.shutdown()
