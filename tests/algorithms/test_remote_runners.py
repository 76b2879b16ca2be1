"""DAPO with remote EnvRunners (Ray actors, each with its own vLLM engine): two runners and a learner actor
train as a cluster would place them, and a runner that dies in the middle of a rollout is restarted,
receives the current weights, and its task seeds are rolled out again."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from algorithms.env_runner import MultiTurnEnvRunner

# Set in the workers of the run's Ray session (tests/conftest.py, ray_settings).
CRASH_MARKER_VARIABLE = "FRESHRL_TEST_CRASH_MARKER"


class CrashOnceRunner(MultiTurnEnvRunner):
    """Kills its own process on the first rollout it is asked for: the one runner that creates the marker
    file (atomically, so two runners never both crash) dies, once."""

    def sample_groups(self, seeds=(), **kwargs):
        if seeds:
            try:
                os.close(os.open(os.environ[CRASH_MARKER_VARIABLE], os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                pass
            else:
                os._exit(1)
        return super().sample_groups(seeds, **kwargs)


@pytest.fixture
def crash_marker(ray_session, ray_settings) -> Iterator[Path]:
    """The run's Ray session (its workers import this module) and the crash marker its runners know of,
    absent before the test and after it."""
    marker = Path(ray_settings["runtime_env"]["env_vars"][CRASH_MARKER_VARIABLE])
    marker.unlink(missing_ok=True)
    yield marker
    marker.unlink(missing_ok=True)


def test_two_remote_runners_and_a_learner_in_their_own_processes_survive_a_crashed_runner(
    small_dapo_config, crash_marker
):
    """The cluster layout (docs/scaling.md): rollouts on two EnvRunner actors, each with its own vLLM engine,
    and the update on one Learner actor; nothing of either runs in the driver. One runner dies in the
    middle of the first rollout: it is replaced, receives the current weights and its task seeds are rolled
    out again, and nothing is lost. (One algorithm serves both stories: each actor starts its own engine.)"""
    # The random tiny model fails every episode and its responses are all truncated: keep every group and
    # every token so the iteration has something to train on.
    config = (
        small_dapo_config(dynamic_sampling=False, overlong_filtering=False, prompts_per_iteration=4)
        .env_runners(num_env_runners=2, create_local_env_runner=False, env_runner_cls=CrashOnceRunner)
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
    assert crash_marker.exists(), "no runner crashed"
    assert results[0]["rollout/env_runners_restored"] >= 1
    for result in results:
        assert result["rollout/groups_sampled"] == 4 and result["rollout/groups_lost"] == 0
        assert result["learners"]["train/optimizer_steps_fresh"] >= 1
    # Each runner, the replacement included, rolled out its share (4 task seeds split 2 and 2) ...
    assert len(steps) == 2 and all(count > 0 for count in steps)
    # ... and the remote learner trained.
    weights_before, weights_after = before["default_policy"], after["default_policy"]
    assert any(
        not torch.equal(torch.as_tensor(weights_before[k]), torch.as_tensor(weights_after[k]))
        for k in before["default_policy"]
    )
    # The runners loaded the weights pushed after iteration 1 before they sampled iteration 2.
    assert "timing/weight_load_s" in results[1]["env_runners"]
