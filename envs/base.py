"""The multi-turn MDP every freshrl environment derives from (FreshPER paper, section 2).

State = the whole conversation, which the rollout keeps, not the env. Action = one assistant response (any
string). Observation = the environment's next message: text, or text and an RGB image for vision envs.
Rewards are summed undiscounted (gamma = 1) and an episode ends after at most ``max_turns`` turns.

A subclass implements four small hooks and gets the rest (spaces, invalid-output policy, turn limit,
``info`` keys) from here:

- ``_new_task()``: build the task from ``self.np_random``; return the first observation's text, which states
  the task and the exact answer format.
- ``_parse(response)``: strict parser with an optional lenient fallback, returning a :class:`Parsed`.
  It must never raise: model output is never "bad input".
- ``_apply(action)``: apply a valid action, returning an :class:`Outcome`.
- ``_state_text()``: the current state as text (shown again after a no-op).
- optionally ``_task_info()``: facts about the current task merged into every ``info`` (for example
  Sokoban's optimal solution length).
Vision envs also set ``image_shape`` and implement ``_render_image()``.

An env that acts through tool calls declares them in ``tools`` (OpenAI function schemas,
``envs.tool_schemas``); its default ``_parse`` reads one Hermes ``<tool_call>`` per response
(``envs.tool_calls``) into a :class:`~envs.tool_calls.ToolCall` checked against its schema, and the step's
``info["tool_call"]`` ties the observation to the call, so the rollout renders it as a ``tool`` message
(docs/adding_an_env.md, "Tools (function calling)").

Generated tasks are split by content (:func:`draw_in_split`): a reset seed of one split only ever yields
tasks whose content hashes to that split, so no validation or test task is also a training task.
"""

from __future__ import annotations

import math
import numbers
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from envs.seeds import split_of_content
from envs.tool_calls import TOOL_CALL_CLOSE, TOOL_CALL_OPEN, ToolCall, parse_tool_calls
from envs.tool_schemas import argument_error, check_tools, tool_names, tool_parameters

INVALID_OUTPUT_POLICIES = ("noop", "reprompt", "terminate")

# Penalty added to the reward of a turn whose output could not be used; GEM's environments use -0.1 for
# format errors.
DEFAULT_INVALID_PENALTY = -0.1

MAX_TEXT_CHARS = 65_536

Task = TypeVar("Task")


def bounded_text(body: str, *, head: str = "", limit: int = MAX_TEXT_CHARS) -> str:
    """``head + body`` in at most ``limit`` characters: ``head`` (an error message) whole, ``body`` cut from
    its start, the oldest text, behind a ``[... N characters cut]`` line; the newest text stays readable.

    A ``head`` that leaves no room for any of ``body`` is returned alone, cut to ``limit``.
    """
    if len(head) + len(body) <= limit:
        return head + body
    cut = len(head) + len(body) - limit
    while True:  # the marker's length depends on the digits of the count it reports
        marker = f"[... {cut} characters cut]\n"
        needed = len(head) + len(marker) + len(body) - limit
        if needed <= cut:
            break
        cut = needed
    if cut >= len(body):  # no room for any of the body beside the head
        return head[:limit]
    return head + marker + body[cut:]


def draw_in_split(
    draw: Callable[[], Task],
    content: Callable[[Task], str],
    split: str,
    *,
    settings: str,
    max_attempts: int = 10_000,
) -> Task:
    """The first task from repeated ``draw()`` calls whose ``content`` hashes to ``split``.

    ``draw`` takes its randomness from the env's seeded generator, so the result is fixed by the seed. A split
    holds a fixed share of the content-hash space (``envs.seeds.CONTENT_BUCKETS``: 90/5/5), so a held-out
    task takes about 20 draws and a training task about 1.1. Raises ``RuntimeError`` naming ``settings``
    when ``max_attempts`` draws find none: the task space at those settings is too small to hold that split.
    """
    for _ in range(max_attempts):
        task = draw()
        if split_of_content(content(task)) == split:
            return task
    raise RuntimeError(
        f"no {split} task in {max_attempts} draws at {settings}: the task space at these settings is too "
        f"small to give every split its own tasks; use a larger setting"
    )


def check_int(name: str, value: Any, low: int, high: int | None = None) -> int:
    """``value`` as an ``int`` in ``[low, high]``; ``ValueError`` naming ``name`` and the range otherwise."""
    allowed = f">= {low}" if high is None else f"in [{low}, {high}]"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer {allowed}, got {value!r}")
    if value < low or (high is not None and value > high):
        raise ValueError(f"{name} must be an integer {allowed}, got {value}")
    return int(value)


def check_real(name: str, value: Any) -> float:
    """``value`` as a finite ``float``; ``ValueError`` naming ``name`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def check_bool(name: str, value: Any) -> bool:
    """``value`` as a ``bool``; ``ValueError`` naming ``name`` unless it is True or False."""
    if not isinstance(value, bool | np.bool_):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


class AnyText(spaces.Text):
    """``spaces.Text`` that contains any ``str`` up to ``max_length`` characters.

    Model output and task text (LaTeX, unicode in real datasets) are not limited to a charset; sampling still
    draws printable ASCII so ``check_env`` and random agents exercise the parser.
    """

    def __init__(self, max_length: int = MAX_TEXT_CHARS, *, min_length: int = 0, seed: int | None = None):
        super().__init__(max_length, min_length=min_length, charset=string.printable, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"AnyText({self.min_length}, {self.max_length})"


@dataclass
class Parsed:
    """What a parser made of one response.

    ``format_ok``: the response followed the strict format (for example ``<answer>...</answer>``).
    ``valid``: the content is a legal action (possibly recovered by the lenient fallback when the strict
    format failed; then ``format_ok`` is False and ``valid`` True).
    """

    format_ok: bool
    valid: bool
    action: Any = None
    error: str = ""
    # The call the action came from, for an env with tools (the step reports it as info["tool_call"]).
    tool_call: ToolCall | None = None


@dataclass
class Outcome:
    """The effect of one valid action."""

    reward: float
    observation: str
    terminated: bool = False
    success: bool = False
    effective: bool = True
    info: dict[str, Any] = field(default_factory=dict)


class MultiTurnEnv(gym.Env):
    """Base class of freshrl's multi-turn text and vision environments.

    Args:
        max_turns: H, the most assistant turns in an episode; the episode is truncated after it.
        invalid_output: what a response that cannot be used does: ``"noop"`` (state unchanged, the current
            state is shown again), ``"reprompt"`` (state unchanged, the observation explains the error and
            repeats the format), or ``"terminate"`` (the episode ends).
        invalid_penalty: reward of a turn whose response could not be used, under every policy.
        render_mode: ``"ansi"`` (text), or ``"rgb_array"`` for envs that can draw themselves.
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi"], "render_fps": 4}
    # Vision envs set (height, width, 3); the observation becomes Dict(text=AnyText, image=Box(uint8)).
    image_shape: tuple[int, int, int] | None = None
    # OpenAI function schemas of the tools the policy calls (envs.tool_schemas); empty: actions are text.
    tools: tuple[dict[str, Any], ...] = ()

    def __init__(
        self,
        *,
        max_turns: int,
        invalid_output: str = "reprompt",
        invalid_penalty: float = DEFAULT_INVALID_PENALTY,
        render_mode: str | None = None,
    ):
        self.max_turns = check_int("max_turns", max_turns, 1)
        if not isinstance(invalid_output, str) or invalid_output not in INVALID_OUTPUT_POLICIES:
            raise ValueError(
                f"invalid_output must be one of {INVALID_OUTPUT_POLICIES}, got {invalid_output!r}"
            )
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode {render_mode!r} is not supported; choose None or one of "
                f"{self.metadata['render_modes']}"
            )
        self.tools = check_tools(self.tools)
        self.invalid_output = invalid_output
        self.invalid_penalty = check_real("invalid_penalty", invalid_penalty)
        self.render_mode = render_mode
        self.action_space = AnyText()
        if self.image_shape is None:
            self.observation_space = AnyText()
        else:
            self.observation_space = spaces.Dict(
                {"text": AnyText(), "image": spaces.Box(0, 255, self.image_shape, dtype=np.uint8)}
            )
        self.turn = 0
        self._done = False

    # ----------------------------------------------------------------- hooks for subclasses
    def _new_task(self) -> str:
        raise NotImplementedError

    def _parse(self, response: str) -> Parsed:
        if self.tools:
            return self._parse_tool_call(response)
        raise NotImplementedError

    def _apply(self, action: Any) -> Outcome:
        raise NotImplementedError

    def _state_text(self) -> str:
        raise NotImplementedError

    def _task_info(self) -> dict[str, Any]:
        return {}

    def _render_image(self) -> np.ndarray:
        raise NotImplementedError(f"{type(self).__name__} has no image rendering")

    def format_reminder(self) -> str:
        """One line restating the expected answer format, used by the ``reprompt`` policy."""
        if self.tools:
            return (
                f"Call one tool ({', '.join(tool_names(self.tools))}) per turn as "
                f'{TOOL_CALL_OPEN}{{"name": ..., "arguments": {{...}}}}{TOOL_CALL_CLOSE}.'
            )
        return ""

    def _parse_tool_call(self, response: str) -> Parsed:
        """The one call of ``response`` to a declared tool with valid arguments, as the action.

        Strict format: one closed ``<tool_call>`` block with nothing but whitespace after it (text before it
        is allowed). Lenient: an unclosed block at the end. Invalid: no call, several calls, malformed JSON,
        an unknown tool, arguments its schema rejects; the error says which.
        """
        found = parse_tool_calls(response)
        if found.error:
            return Parsed(format_ok=False, valid=False, error=found.error)
        if len(found.calls) != 1:
            return Parsed(False, False, error=f"{len(found.calls)} tool calls; make one tool call per turn")
        call = found.calls[0]
        schema = tool_parameters(self.tools, call.name)
        if schema is None:
            names = ", ".join(tool_names(self.tools))
            return Parsed(False, False, error=f"no tool named {call.name[:60]!r}; the tools are {names}")
        error = argument_error(schema, call.arguments, f"{call.name}'s arguments")
        if error:
            return Parsed(False, False, error=error)
        return Parsed(format_ok=found.strict, valid=True, action=call, tool_call=call)

    # ----------------------------------------------------------------- gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.turn = 0
        self._done = False
        prompt = self._new_task()
        info = self._info(format_ok=True, valid=True, effective=False, **self._task_info())
        return self._observation(prompt), info

    def step(self, action: str):
        if self._done:
            raise RuntimeError("step() called after the episode ended; call reset() first")
        response = action if isinstance(action, str) else str(action)
        self.turn += 1
        try:
            parsed = self._parse(response)
        except Exception as exc:  # a parser bug must not crash a rollout; count it as a format error
            error = f"unparseable response ({type(exc).__name__})"
            parsed = Parsed(format_ok=False, valid=False, error=error)

        outcome = self._apply(parsed.action) if parsed.valid else self._invalid_outcome(parsed)
        truncated = not outcome.terminated and self.turn >= self.max_turns
        self._done = outcome.terminated or truncated
        info = self._info(
            format_ok=parsed.format_ok,
            valid=parsed.valid,
            effective=outcome.effective,
            success=outcome.success,
            **{**self._task_info(), **outcome.info},
        )
        if parsed.valid and parsed.tool_call is not None:
            # The observation answers this call: the rollout renders it as a tool message tied to the id
            # (deterministic, unlike vLLM's random ids, so a seed still fixes the trajectory).
            call = parsed.tool_call
            info["tool_call"] = {"id": f"call_{self.turn}", "name": call.name, "arguments": call.arguments}
        observation = self._observation(outcome.observation)
        return observation, float(outcome.reward), outcome.terminated, truncated, info

    def render(self):
        if self.render_mode == "rgb_array":
            return self._render_image()
        if self.render_mode == "ansi":
            return self._state_text()
        return None

    # ----------------------------------------------------------------- shared machinery
    def _invalid_outcome(self, parsed: Parsed) -> Outcome:
        if self.invalid_output == "terminate":
            message = f"Invalid response: {parsed.error or 'could not parse an action'}. The episode ends."
            return Outcome(self.invalid_penalty, message, terminated=True, effective=False)
        if self.invalid_output == "noop":
            return Outcome(self.invalid_penalty, self._state_text(), effective=False)
        reminder = self.format_reminder()
        message = f"Invalid response: {parsed.error or 'could not parse an action'}."
        if reminder:
            message += f" {reminder}"
        # The message says what went wrong and how to answer, so a long state gives way to it.
        observation = bounded_text(self._state_text(), head=f"{message}\n")
        return Outcome(self.invalid_penalty, observation, effective=False)

    def _observation(self, text: str):
        # Every observation passes here: an env's or a server's text over MAX_TEXT_CHARS is cut from its
        # start, so the observation space always contains it.
        text = bounded_text(text)
        if self.image_shape is None:
            return text
        return {"text": text, "image": self._render_image()}

    def _info(self, *, format_ok: bool, valid: bool, effective: bool, success: bool = False, **extra):
        return {
            "format_ok": bool(format_ok),
            "action_valid": bool(valid),
            "action_effective": bool(effective),
            "success": bool(success),
            "turn": self.turn,
            **extra,
        }
