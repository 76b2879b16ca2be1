"""DAPO with remote EnvRunners (Ray actors, each with its own vLLM engine): one that dies in the middle of a
rollout is restarted, receives the current weights, and its task seeds are rolled out again; two runners
and a learner actor train as a cluster would place them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import ray
import torch

from algorithms.env_runner import MultiTurnEnvRunner
from experiments.common.ray_session import start_ray


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


@pytest.fixture
def three_actor_session():
    """Room for two EnvRunner actors and one Learner actor (one logical CPU each; the cores are shared)."""
    ray.shutdown()
    start_ray(num_cpus=3)
    yield
    ray.shutdown()


def test_two_remote_runners_and_a_learner_in_its_own_process(small_dapo_config, three_actor_session):
    """The cluster layout (docs/scaling.md): rollouts on two EnvRunner actors, each with its own vLLM engine,
    and the update on one Learner actor; nothing of either runs in the driver."""
    config = (
        small_dapo_config(dynamic_sampling=False, overlong_filtering=False, prompts_per_iteration=4)
        .env_runners(num_env_runners=2, create_local_env_runner=False)
        .learners(num_learners=1)
    )
    algo = config.build_algo()
    try:
        assert algo.env_runner is None and algo.learner_group.is_remote
        (learner_pid,) = [call.get() for call in algo.learner_group.foreach_learner(lambda _: os.getpid())]
        runner_pids = algo.env_runner_group.foreach_env_runner(lambda _: os.getpid(), local_env_runner=False)
        assert len({os.getpid(), learner_pid, *runner_pids}) == 4, (
            "driver, learner and runners share a process"
        )
        before = algo.learner_group.get_state(components="learner/rl_module")["learner"]["rl_module"]
        results = [algo.train() for _ in range(2)]
        after = algo.learner_group.get_state(components="learner/rl_module")["learner"]["rl_module"]
        steps = algo.env_runner_group.foreach_env_runner(
            lambda r: r.num_env_steps_sampled_lifetime, local_env_runner=False
        )
    finally:
        algo.stop()
    for result in results:
        assert result["rollout/groups_sampled"] == 4 and result["rollout/groups_lost"] == 0
        assert result["learners"]["train/optimizer_steps_fresh"] >= 1
    # Each runner rolled out its share (4 task seeds split 2 and 2, every iteration) ...
    assert len(steps) == 2 and all(count > 0 for count in steps)
    # ... and the remote learner trained.
    weights_before, weights_after = before["default_policy"], after["default_policy"]
    assert any(
        not torch.equal(torch.as_tensor(weights_before[k]), torch.as_tensor(weights_after[k]))
        for k in before["default_policy"]
    )
    # The runners loaded the weights pushed after iteration 1 before they sampled iteration 2.
    assert "timing/weight_load_s" in results[1]["env_runners"]
