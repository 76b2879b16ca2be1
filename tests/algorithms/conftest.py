"""Fixtures of the algorithm tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import ray

from experiments.common.ray_session import start_ray


@pytest.fixture
def ray_session() -> Iterator[None]:
    """A fresh two-CPU Ray session for one test (shut down before and after it)."""
    ray.shutdown()
    start_ray(num_cpus=2)
    yield
    ray.shutdown()
