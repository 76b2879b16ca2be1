"""DAPO with a remote EnvRunner (a Ray actor with its own vLLM engine) that dies in the middle of a rollout:
it is restarted, receives the current weights, and its task seeds are rolled out again."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import ray

from algorithms.env_runner import MultiTurnEnvRunner
from experiments.ray_session import start_ray


class CrashOnceRunner(MultiTurnEnvRunner):
    """Kills its own process on the first rollout it is asked for (a marker file makes it happen once)."""

    def sample_groups(self, seeds=(), **kwargs):
        marker = Path(os.environ["FRESHRL_TEST_CRASH_MARKER"])
        if seeds and not marker.exists():
            marker.write_text(str(os.getpid()))
            os._exit(1)
        return super().sample_groups(seeds, **kwargs)


@pytest.fixture
def crash_marker(tmp_path):
    """A Ray session whose workers can import this module and know where the crash marker goes."""
    marker = tmp_path / "crashed"
    python_path = os.pathsep.join(
        p for p in [str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")] if p
    )
    env_vars = {"PYTHONPATH": python_path, "FRESHRL_TEST_CRASH_MARKER": str(marker)}
    ray.shutdown()
    start_ray(num_cpus=2, runtime_env={"env_vars": env_vars})
    yield marker
    ray.shutdown()


def test_crashed_remote_runner_is_replaced_and_rollout_retried(small_dapo_config, crash_marker):
    # The random tiny model fails every episode and its responses are all truncated: keep every group and
    # every token so the iteration has something to train on.
    config = small_dapo_config(dynamic_sampling=False, overlong_filtering=False).env_runners(
        num_env_runners=1, env_runner_cls=CrashOnceRunner
    )
    algo = config.build_algo()
    try:
        result = algo.train()
        assert crash_marker.exists(), "the runner never crashed"
        assert result["rollout/env_runners_restored"] >= 1
        assert result["rollout/groups_lost"] == 0
        assert result["rollout/groups_sampled"] == 2
        assert result["learners"]["train/optimizer_steps_fresh"] >= 1
        result = algo.train()
        assert result["rollout/groups_sampled"] == 2
    finally:
        algo.stop()
