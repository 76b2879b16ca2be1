"""The EnvRunner hands the engine's KV cache back after every rollout (so that a local learner's
update runs without the cache resident). A scripted engine, no vLLM."""

from __future__ import annotations

from types import SimpleNamespace

import gymnasium as gym
from character_renderer import CharacterRenderer

import envs  # noqa: F401  (registers the envs)
from algorithms.env_runner import MultiTurnEnvRunner
from envs.seeds import SPLITS
from models.engine import Completion


class CountingEngine:
    """Answers every prompt; records each call, generate or release, in order."""

    def __init__(self):
        self.calls: list[str] = []

    def generate(self, prompts, sampling) -> list[list[Completion]]:
        self.calls.append("generate")
        return [[Completion([1, 0], [-0.5, -0.5], "stop", "<answer>Down</answer>")] for _ in prompts]

    def release_kv_cache(self) -> int:
        self.calls.append("release")
        return 0


def test_sample_groups_releases_the_kv_cache_after_the_rollout():
    group_size = 2
    runner = SimpleNamespace(
        config=SimpleNamespace(
            group_size=group_size,
            temperature=1.0,
            top_p=1.0,
            max_response_tokens=8,
            stop_strings=(),
            max_context_tokens=4096,
            max_trajectory_response_tokens=None,
        ),
        module=SimpleNamespace(engine=CountingEngine(), renderer=CharacterRenderer()),
        _envs=[gym.make("freshrl/FrozenLake-v0", max_turns=2) for _ in range(group_size)],
        _ensure_envs=lambda count: None,
    )
    (group,) = MultiTurnEnvRunner.sample_groups(runner, [SPLITS["train"][0]], log_metrics=False)
    assert len(group) == group_size
    calls = runner.module.engine.calls
    assert calls[-1] == "release" and calls.count("release") == 1
    assert calls.count("generate") >= 1
