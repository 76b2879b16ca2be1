"""Multi-turn group rollouts: P tasks x G samples, generation batched across all live conversations.

For each of P task seeds, G envs are reset as a GRPO group (:func:`envs.group.reset_group`: the same seed, and
each member its index, so slippery envs give members their own luck). Every turn, the conversations
still running are rendered to token ids and generated in one engine call; each response is stepped in its
env and the observation is appended as chat-template glue (loss mask 0). An env's tools go into the prompt,
and an observation that answers a tool call (``info["tool_call"]``) is rendered as its ``tool`` message.
The result is one :class:`Trajectory` per episode (docs/design.md, section 2).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from algorithms.trajectory import Trajectory
from envs.group import reset_group
from models.chat import ChatRenderer, Segment
from models.engine import Completion, Prompt, RolloutEngine, SamplingConfig


@dataclass
class _Conversation:
    env: gym.Env
    seed: int
    group_id: int
    response_budget: int | None
    token_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    images: list[np.ndarray] = field(default_factory=list)
    spans: list[tuple[int, int]] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    finish_reasons: list[str] = field(default_factory=list)
    turn_policy_versions: list[int] = field(default_factory=list)
    state_keys: list[Any] = field(default_factory=list)
    success: bool = False
    terminated: bool = False
    done: bool = False
    invalid_turns: int = 0
    info: dict[str, Any] = field(default_factory=dict)

    def append_context(self, segment: Segment) -> None:
        self.token_ids += segment.token_ids
        self.loss_mask += [0] * len(segment.token_ids)
        self.logprobs += [0.0] * len(segment.token_ids)
        self.images += segment.images

    def append_response(self, completion: Completion, policy_version: int) -> None:
        start = len(self.token_ids)
        self.token_ids += completion.token_ids
        self.loss_mask += [1] * len(completion.token_ids)
        self.logprobs += completion.logprobs
        self.spans.append((start, len(self.token_ids)))
        self.finish_reasons.append(completion.finish_reason)
        self.turn_policy_versions.append(policy_version)

    @property
    def generated(self) -> int:
        return sum(end - start for start, end in self.spans)


def rollout_groups(
    engine: RolloutEngine,
    renderer: ChatRenderer,
    envs: Sequence[gym.Env],
    seeds: Sequence[int],
    group_size: int,
    sampling: SamplingConfig,
    *,
    max_context_tokens: int,
    collection_step: int = 0,
    policy_version: int = 0,
    group_ids: Sequence[int] | None = None,
    max_trajectory_response_tokens: int | None = None,
    on_turn: Callable[[int, int], None] | None = None,
) -> list[list[Trajectory]]:
    """Run ``group_size`` episodes for each seed and return the trajectories grouped by seed.

    ``envs`` must hold at least ``len(seeds) * group_size`` environments; they are reset here, ``group_size``
    consecutive ones per seed. A conversation whose next prompt would leave no room for a response within
    ``max_context_tokens``, or that has used its response budget, ends (not terminated: counted like the turn
    limit). The response budget of an episode (``Trajectory.response_budget``) is
    ``max_trajectory_response_tokens``, by default ``sampling.max_tokens`` x the env's ``max_turns`` (None
    for an env without ``max_turns``). ``sampling.seed`` seeds this call's generation; each
    turn uses a distinct derived seed so that the G samples of a group differ.
    """
    group_ids = list(range(len(seeds))) if group_ids is None else list(group_ids)
    if len(group_ids) != len(seeds):
        raise ValueError(f"got {len(group_ids)} group ids for {len(seeds)} seeds")
    needed = len(seeds) * group_size
    if len(envs) < needed:
        raise ValueError(
            f"rollout_groups needs {needed} envs for {len(seeds)} seeds x {group_size}, got {len(envs)}"
        )
    conversations: list[_Conversation] = []
    for group_index, seed in enumerate(seeds):
        members = envs[group_index * group_size : (group_index + 1) * group_size]
        group = reset_group(members, int(seed))
        for env, observation, info in zip(group.envs, group.observations, group.infos, strict=True):
            conversation = _Conversation(
                env=env,
                seed=int(seed),
                group_id=group_ids[group_index],
                response_budget=_response_budget(env, sampling.max_tokens, max_trajectory_response_tokens),
                info=info,
            )
            conversation.append_context(renderer.prompt(observation, tools=env_tools(env)))
            conversations.append(conversation)

    turn = 0
    while True:
        live = [c for c in conversations if not c.done]
        for conversation in live:
            if len(conversation.token_ids) + 1 >= max_context_tokens or _remaining(conversation) <= 0:
                conversation.done = True
        live = [c for c in live if not c.done]
        if not live:
            break
        # One engine call per distinct response budget: usually all conversations share the full budget,
        # those near the context limit or the end of their response budget get a smaller one instead of
        # shrinking everyone's.
        budgets: dict[int, list[_Conversation]] = {}
        for conversation in live:
            budget = int(
                min(
                    sampling.max_tokens,
                    max_context_tokens - len(conversation.token_ids),
                    _remaining(conversation),
                )
            )
            budgets.setdefault(budget, []).append(conversation)
        for budget, batch in budgets.items():
            turn_sampling = dataclasses.replace(
                sampling,
                n=1,
                max_tokens=budget,
                seed=None if sampling.seed is None else sampling.seed + 7919 * turn + budget,
            )
            outputs = engine.generate([Prompt(c.token_ids, list(c.images)) for c in batch], turn_sampling)
            for conversation, samples in zip(batch, outputs, strict=True):
                _step(conversation, samples[0], renderer, policy_version)
        turn += 1
        if on_turn is not None:
            on_turn(turn, len(live))

    groups: list[list[Trajectory]] = [[] for _ in seeds]
    for index, conversation in enumerate(conversations):
        groups[index // group_size].append(
            Trajectory(
                token_ids=conversation.token_ids,
                loss_mask=conversation.loss_mask,
                behaviour_logprobs=conversation.logprobs,
                response_spans=conversation.spans,
                turn_rewards=conversation.rewards,
                finish_reasons=conversation.finish_reasons,
                env_seed=conversation.seed,
                group_id=conversation.group_id,
                collection_step=collection_step,
                policy_version=policy_version,
                success=conversation.success,
                turn_policy_versions=conversation.turn_policy_versions,
                terminated=conversation.terminated,
                response_budget=conversation.response_budget,
                invalid_turns=conversation.invalid_turns,
                turn_state_keys=conversation.state_keys,
                images=conversation.images,
                info=conversation.info,
            )
        )
    return groups


def env_tools(env: gym.Env) -> tuple[dict[str, Any], ...]:
    """The tools ``env`` declares (OpenAI function schemas, ``envs.base.MultiTurnEnv.tools``); () if none."""
    return tuple(getattr(env.unwrapped, "tools", ()))


def _response_budget(env: gym.Env, max_tokens: int, explicit: int | None) -> int | None:
    if explicit is not None:
        return explicit
    max_turns = getattr(env.unwrapped, "max_turns", None)
    return None if max_turns is None else max_tokens * int(max_turns)


def _remaining(conversation: _Conversation) -> float:
    budget = conversation.response_budget
    return math.inf if budget is None else budget - conversation.generated


def _step(
    conversation: _Conversation, completion: Completion, renderer: ChatRenderer, policy_version: int
) -> None:
    conversation.append_response(completion, policy_version)
    # The state this turn starts from: reported by reset's info or by the previous step's.
    conversation.state_keys.append(conversation.info.get("state_key"))
    observation, reward, terminated, truncated, info = conversation.env.step(completion.text)
    conversation.rewards.append(float(reward))
    conversation.info = info
    conversation.success = conversation.success or bool(info.get("success", False))
    conversation.invalid_turns += not info.get("action_valid", True)
    if terminated or truncated:
        conversation.terminated = bool(terminated)
        conversation.done = True
        return
    ended_with_eos = bool(completion.token_ids) and completion.token_ids[-1] == renderer.eos_token_id
    # An observation answering a tool call is that call's tool message (envs.base.MultiTurnEnv.tools).
    segment = renderer.continuation(observation, ended_with_eos, tool_call=info.get("tool_call"))
    conversation.append_context(segment)
