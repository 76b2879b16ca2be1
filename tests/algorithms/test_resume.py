"""Resume loses nothing, sync mode (docs/design.md, section 6): a run of N iterations saves a checkpoint after
k of them; a new algorithm restored from it and trained N - k more ends in the same state: the same metrics
every iteration (timings aside), evaluations included, and bitwise the same weights. The resumed run
evaluates before it trains, as ``experiments.train`` does: evaluating must change nothing of training.

The checkpoint is taken where every piece of state matters: dynamic sampling holds a surplus group, the
FreshPER buffer is filled and sampled, the learning rate is still warming up, each pass shuffles
mini-batches and runs two epochs, and the env is multi-turn with rewards a random model can earn.

The LoRA case (``lora_rank > 0``, models/lora.py) runs the same story; its checkpoint holds the adapters and
their AdamW state, not the frozen base weights, which the restored learner reloads from the model directory.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import pytest
import torch

from algorithms.dapo import DAPO, DAPOConfig
from envs.base import MultiTurnEnv, Outcome, Parsed

EVEN_LENGTHS = "tests/EvenLengths-v0"
ITERATIONS, CHECKPOINT_AT = 3, 2


class EvenLengthsEnv(MultiTurnEnv):
    """Two turns; each response of an even number of characters earns 0.5; success iff both do."""

    def __init__(self, max_turns: int = 2, **kwargs):
        super().__init__(max_turns=max_turns, **kwargs)
        self._even = 0

    def _new_task(self) -> str:
        self._even = 0
        return "Say anything, twice."

    def _parse(self, response: str) -> Parsed:
        return Parsed(format_ok=True, valid=True, action=response)

    def _apply(self, response: str) -> Outcome:
        even = len(response) % 2 == 0
        self._even += even
        return Outcome(
            reward=0.5 * even, observation="Again.", terminated=False, success=self._even == self.max_turns
        )

    def _state_text(self) -> str:
        return "Say anything."


if EVEN_LENGTHS not in gym.registry:
    gym.register(id=EVEN_LENGTHS, entry_point=EvenLengthsEnv, disable_env_checker=True)


def informative_unless_group_1(group) -> list[float]:
    """Dynamic sampling's metric, under the test's control: only group 1 is dropped, so with two prompts and
    two generation batches every iteration ends with one surplus group (3, then 5, 7, ...)."""
    return [0.0] * len(group) if group[0].group_id == 1 else list(range(len(group)))


def resume_config(make, **training) -> DAPOConfig:
    config = make(
        EVEN_LENGTHS,
        group_size=4,
        prompts_per_iteration=2,
        max_generation_batches=2,
        max_response_tokens=8,
        stop_strings=("e",),  # responses of different lengths (and characters), some ending early
        dynamic_sampling=True,
        num_epochs=2,
        minibatch_size=4,
        micro_batch_size=2,
        warmup_steps=ITERATIONS + 2,  # the learning rate changes every iteration
        **training,
    )
    config = config.replay(mode="freshper", num_batches=1, tau=2.0)
    return config.evaluation(evaluation_interval=1, evaluation_num_tasks=2, evaluation_samples_per_task=2)


def build(config: DAPOConfig) -> DAPO:
    algo = config.build_algo()
    algo.sampler.metric = informative_unless_group_1
    return algo


def deterministic_metrics(result: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """The result's numbers that do not depend on timing (no timers, durations, rates, host facts)."""
    kept = {}
    for key, value in result.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            kept.update(deterministic_metrics(value, f"{name}/"))
            continue
        timed = any(
            part in name for part in ("timing", "timer", "time", "perf/", "_s/", "per_s", "_throughput")
        )
        counted = name.startswith(("rollout/", "replay/", "evaluation/", "learners/", "env_runners/"))
        if counted and not timed and not name.endswith("_s") and isinstance(value, (int, float)):
            kept[name] = "nan" if math.isnan(value) else value
        elif name.startswith("evaluation/") and isinstance(value, str | list):  # split, per-task outcomes
            kept[name] = value
    return kept


def learner_weights(algo: DAPO) -> dict[str, torch.Tensor]:
    state = algo.learner_group.get_state(components="learner/rl_module")
    return {k: torch.as_tensor(v).clone() for k, v in state["learner"]["rl_module"]["default_policy"].items()}


def counters_of(algo: DAPO) -> tuple[int, int, int]:
    """Where the run is in the split and its group ids, and the buffer's size."""
    counters = algo.counters
    return counters.task_cursor, counters.next_group_id, counters.replay_size


def train(algo: DAPO, iterations: int) -> list[dict[str, Any]]:
    return [deterministic_metrics(algo.train()) for _ in range(iterations)]


def assert_checkpoint_holds_adapters_only(algo: DAPO) -> None:
    """The learner's state (what a checkpoint stores) is the adapters and their optimizer state alone."""
    state = algo.learner_group.get_state()["learner"]
    module_state = state["rl_module"]["default_policy"]
    model = algo.learner_group._learner.module["default_policy"].model
    adapters = {name for name, p in model.named_parameters() if p.requires_grad}
    assert module_state.keys() == adapters and all(".lora_" in name for name in adapters)
    (optimizer,) = state["optimizer"].values()
    assert len(optimizer["state"]["state"]) == len(adapters)


@pytest.mark.parametrize("lora_rank", [0, 4], ids=["full", "lora"])
def test_resumed_run_equals_the_straight_run(small_dapo_config, tmp_path, lora_rank):
    config = resume_config(small_dapo_config, lora_rank=lora_rank)

    # The straight run takes the checkpoint on its way (saving must change nothing of it either).
    straight = build(config)
    try:
        straight_metrics = train(straight, CHECKPOINT_AT)
        # The checkpoint holds the state that a lossy resume would drop.
        assert straight.counters.surplus_groups > 0, {
            k: v for m in straight_metrics for k, v in m.items() if "rollout/" in k
        }
        # sampled, too
        assert straight.counters.replay_size > 0 and "replay/batch_mean_age" in straight_metrics[-1]
        if lora_rank:
            assert_checkpoint_holds_adapters_only(straight)
        checkpoint = straight.save_to_path(str(tmp_path / "checkpoint"))
        straight_metrics += train(straight, ITERATIONS - CHECKPOINT_AT)
        straight_weights = learner_weights(straight)
        straight_counters = counters_of(straight)
    finally:
        straight.stop()

    resumed = build(config)
    try:
        resumed.restore_from_path(checkpoint)
        # Evaluation before training sees the checkpoint's weights, as the straight run's evaluation at
        # the checkpoint did.
        evaluation = resumed.evaluate_policy()
        assert deterministic_metrics({"evaluation": evaluation}) == {
            key: value
            for key, value in straight_metrics[CHECKPOINT_AT - 1].items()
            if key.startswith("evaluation/")
        }
        resumed_metrics = train(resumed, ITERATIONS - CHECKPOINT_AT)
        resumed_weights = learner_weights(resumed)
        resumed_counters = counters_of(resumed)
    finally:
        resumed.stop()

    for iteration, (want, got) in enumerate(
        zip(straight_metrics[CHECKPOINT_AT:], resumed_metrics, strict=True), start=CHECKPOINT_AT + 1
    ):
        differ = {
            key: (want.get(key), got.get(key))
            for key in want.keys() | got.keys()
            if want.get(key) != got.get(key)
        }
        assert not differ, f"iteration {iteration}: {differ}"
    assert any(m["learners/train/loss"] != 0.0 for m in straight_metrics)
    assert resumed_counters == straight_counters
    assert straight_weights.keys() == resumed_weights.keys()
    for name, tensor in straight_weights.items():
        assert torch.equal(tensor, resumed_weights[name]), name
    assert len({m["learners/train/lr"] for m in straight_metrics}) == ITERATIONS, "the warm-up is over"
