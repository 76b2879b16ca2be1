"""Multi-turn episodes against a served model (an OpenAI-compatible chat-completions server).

The endpoint twin of :func:`algorithms.rollout.rollout_groups` for evaluation: the same tasks (each episode
``reset(seed=task, options={"member": sample})``, as ``envs.group.reset_group`` resets a group's members),
the same turn loop (step the env with the response text, answer with its observation, until the env ends
the episode, the context or the response budget), but the conversation travels as chat messages
(``models.endpoint_messages``) and the model is sampled over HTTP (``models.chat_endpoint``). The server
tokenizes, so nothing here is token-in, token-out: these episodes are measured, never trained on.

Episodes run ``concurrency`` at a time on threads (the time goes to waiting for the server). An episode
whose request fails after every retry is *lost*: recorded as a :class:`LostEpisode` with the error's kind,
never as a failure of the model. A task with a lost sample is left out of the groups, so every group keeps
the same number of samples (``summarize_episodes`` needs that for pass@k). A setup error (HTTP 4xx other
than 429) stops the whole rollout at once: no episode could succeed.
"""

from __future__ import annotations

import math
import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from typing import Any

import gymnasium as gym
import numpy as np

from algorithms.rollout import env_tools
from models.chat_endpoint import ChatEndpoint, ContextLengthExceeded, EndpointUnavailable, Sampling
from models.endpoint_messages import (
    answered_call_id,
    assistant_message,
    response_text,
    system_messages,
    tool_message,
    user_message,
)


@dataclass
class EndpointEpisode:
    """One episode over the endpoint: what ``summarize_episodes`` reads of a ``Trajectory`` (success,
    num_turns, invalid_turns, episode_return, num_response_tokens, env_seed), and the conversation.

    ``response_tokens`` holds each turn's ``usage.completion_tokens`` (None where the server gave none);
    ``ended_by`` is ``env`` (terminated or truncated by the env's turn limit), ``context`` or ``budget``."""

    env_seed: int
    group_id: int
    sample: int
    turn_rewards: list[float] = field(default_factory=list)
    finish_reasons: list[str] = field(default_factory=list)
    response_tokens: list[int | None] = field(default_factory=list)
    success: bool = False
    invalid_turns: int = 0
    terminated: bool = False
    ended_by: str = "env"
    messages: list[dict[str, Any]] = field(default_factory=list)

    @property
    def episode_return(self) -> float:
        return float(sum(self.turn_rewards))

    @property
    def num_turns(self) -> int:
        return len(self.turn_rewards)

    @property
    def num_response_tokens(self) -> int:
        return sum(count or 0 for count in self.response_tokens)


@dataclass(frozen=True)
class LostEpisode:
    """An episode the server could not serve: its task, sample, the error's kind and text, and the turns it
    had played."""

    env_seed: int
    group_id: int
    sample: int
    kind: str
    detail: str
    turns: int


@dataclass
class EndpointRollout:
    """The complete tasks' groups (in task order, samples in order), the lost episodes, and how many tasks
    were left out for a lost sample."""

    groups: list[list[EndpointEpisode]]
    lost: list[LostEpisode]
    tasks_left_out: int

    def lost_kinds(self) -> dict[str, int]:
        """Lost episodes per error kind."""
        kinds: dict[str, int] = {}
        for episode in self.lost:
            kinds[episode.kind] = kinds.get(episode.kind, 0) + 1
        return dict(sorted(kinds.items()))


class _Stopped(Exception):
    """Another episode hit a setup error: stop before the next request."""


def rollout_over_endpoint(
    endpoint: ChatEndpoint,
    make_env: Callable[[], gym.Env],
    seeds: Sequence[int],
    samples_per_task: int,
    sampling: Sampling,
    *,
    max_context_tokens: int,
    system_prompt: str | None = None,
    max_trajectory_response_tokens: int | None = None,
    concurrency: int = 8,
    on_episode: Callable[[EndpointEpisode | LostEpisode], None] | None = None,
) -> EndpointRollout:
    """``samples_per_task`` episodes of each task seed against ``endpoint``.

    ``sampling.max_tokens`` is the per-turn limit and ``sampling.seed`` the base of the request seeds (each
    request gets its own, derived from it, the task, the sample and the turn, so a server that honours
    ``seed`` gives the same episodes again). An episode's response budget is
    ``max_trajectory_response_tokens``, by default ``max_tokens`` x the env's ``max_turns``, as in
    ``rollout_groups``. ``make_env`` makes a fresh env; at most ``concurrency`` are made and reused. Raises
    ``EndpointSetupError`` on the first setup error.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    envs: queue.SimpleQueue[gym.Env] = queue.SimpleQueue()
    made: list[gym.Env] = []
    stop = threading.Event()

    def run(group_id: int, seed: int, sample: int) -> EndpointEpisode | LostEpisode:
        try:
            env = envs.get_nowait()
        except queue.Empty:
            env = make_env()
            made.append(env)
        episode = EndpointEpisode(env_seed=int(seed), group_id=group_id, sample=sample)
        try:
            _play(
                endpoint,
                env,
                episode,
                sampling,
                max_context_tokens,
                system_prompt,
                max_trajectory_response_tokens,
                stop,
            )
            result: EndpointEpisode | LostEpisode = episode
        except EndpointUnavailable as error:
            result = LostEpisode(int(seed), group_id, sample, error.kind, str(error), episode.num_turns)
        except BaseException:
            stop.set()
            raise
        finally:
            envs.put(env)
        if on_episode is not None:
            on_episode(result)
        return result

    jobs = [(index, seed, sample) for index, seed in enumerate(seeds) for sample in range(samples_per_task)]
    try:
        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="endpoint") as pool:
            futures = [pool.submit(run, *job) for job in jobs]
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            if any(future.exception() is not None for future in done):
                stop.set()
                for future in futures:
                    future.cancel()
                wait(futures)
                errors = [f.exception() for f in futures if not f.cancelled() and f.exception() is not None]
                raise next((e for e in errors if not isinstance(e, _Stopped)), errors[0])
    finally:
        for env in made:
            env.close()
    results = [future.result() for future in futures]
    groups: list[list[EndpointEpisode]] = []
    lost = [result for result in results if isinstance(result, LostEpisode)]
    left_out = 0
    for index in range(len(seeds)):
        group = results[index * samples_per_task : (index + 1) * samples_per_task]
        if all(isinstance(result, EndpointEpisode) for result in group):
            groups.append(group)  # type: ignore[arg-type]
        else:
            left_out += 1
    return EndpointRollout(groups=groups, lost=lost, tasks_left_out=left_out)


def request_seed(base: int, env_seed: int, sample: int, turn: int) -> int:
    """A request's sampling seed (31 bits, what every server takes), from the run's seed and the turn."""
    state = np.random.SeedSequence([abs(base), env_seed, sample, turn]).generate_state(1, np.uint32)
    return int(state[0] >> 1)


def _play(
    endpoint: ChatEndpoint,
    env: gym.Env,
    episode: EndpointEpisode,
    sampling: Sampling,
    max_context_tokens: int,
    system_prompt: str | None,
    trajectory_budget: int | None,
    stop: threading.Event,
) -> None:
    observation, _ = env.reset(seed=episode.env_seed, options={"member": episode.sample})
    tools = env_tools(env)
    max_turns = getattr(env.unwrapped, "max_turns", None)
    budget = trajectory_budget or (math.inf if max_turns is None else sampling.max_tokens * int(max_turns))
    episode.messages = [*system_messages(system_prompt), user_message(observation)]
    # The context's length as the server last counted it (prompt + completion); 0 before the first reply.
    # The latest observation is not in it yet: a server's context-length refusal covers that last step.
    context = 0
    while True:
        remaining = budget - episode.num_response_tokens
        if remaining <= 0 or context + 1 >= max_context_tokens:
            episode.ended_by = "budget" if remaining <= 0 else "context"
            return
        if stop.is_set():
            raise _Stopped()
        seed = None
        if sampling.seed is not None:
            seed = request_seed(sampling.seed, episode.env_seed, episode.sample, episode.num_turns)
        limit = int(min(sampling.max_tokens, max_context_tokens - context, remaining))
        try:
            reply = endpoint.complete(episode.messages, replace(sampling, max_tokens=limit, seed=seed), tools)
        except ContextLengthExceeded:
            episode.ended_by = "context"
            return
        text = response_text(reply)
        observation, reward, terminated, truncated, info = env.step(text)
        episode.turn_rewards.append(float(reward))
        episode.finish_reasons.append(reply.finish_reason)
        episode.response_tokens.append(reply.completion_tokens)
        episode.success = episode.success or bool(info.get("success", False))
        episode.invalid_turns += not info.get("action_valid", True)
        if reply.prompt_tokens is not None and reply.completion_tokens is not None:
            context = reply.prompt_tokens + reply.completion_tokens
        assistant = assistant_message(reply, text, info.get("tool_call"))
        episode.messages.append(assistant)
        if terminated or truncated:
            episode.terminated = bool(terminated)
            return
        answers_call = info.get("tool_call") is not None
        episode.messages.append(
            tool_message(answered_call_id(assistant), observation)
            if answers_call
            else user_message(observation)
        )
