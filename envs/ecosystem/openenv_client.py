"""Any OpenEnv env server (openenv-core 0.3.0, meta-pytorch/OpenEnv) played as a multi-turn text env.

The wire protocol and the files it follows are in ``envs/ecosystem/openenv_protocol.py``.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from typing import Any

from envs.base import (
    DEFAULT_INVALID_PENALTY,
    MAX_TEXT_CHARS,
    MultiTurnEnv,
    Outcome,
    Parsed,
    check_real,
)
from envs.ecosystem.openenv_protocol import TRANSPORTS, ActionRejected, OpenEnvError, Reply, open_session

DEFAULT_REMINDER = "Reply with a non-empty message."
_ERROR_CHARS = 500


class OpenEnvUnavailable(ConnectionError):
    """``reset()`` got no usable first observation from the OpenEnv server (a setup problem)."""


def render_observation(observation: dict[str, Any]) -> str:
    """The default text of an OpenEnv observation: one ``name: value`` line per field, in the server's order;
    strings as they are, other values as compact JSON (``{}`` renders as the empty string)."""
    return "\n".join(f"{name}: {_value_text(value)}" for name, value in observation.items())


class OpenEnvClientEnv(MultiTurnEnv):
    """An OpenEnv env server, reached at ``base_url``, as a multi-turn text env.

    ## Description
    Each ``reset()`` resets the server's env and each ``step()`` sends one action built from the model's
    response. Over the default ``websocket`` transport the client holds one session on the server's
    ``/ws`` endpoint (its own env there, as OpenEnv's ``EnvClient`` does), opened at the first reset and
    reused; over ``http`` it posts to ``/reset`` and ``/step``, which in openenv-core 0.3.0 make a fresh env
    per request (``envs/ecosystem/openenv_protocol.py``), so use it only with servers that keep one env.

    ## Action Space
    The response as text. By default it becomes ``{action_key: response}`` (OpenEnv's echo env takes
    ``{"message": ...}``); an empty or blank response goes to the ``invalid_output`` policy. With
    ``build_action``, ``build_action(response)`` returns the action dict instead; raising there (say, on a
    response without the expected format) sends the response to the ``invalid_output`` policy with the
    exception's message. An action the server refuses as not fitting its schema (HTTP 422, WebSocket
    ``VALIDATION_ERROR``) does too: the server's env did not step.

    ## Observation Space
    Text: the observation's fields rendered by :func:`render_observation` (``name: value`` lines), only the
    field ``observation_key`` when given, or ``observation_text(observation_dict)`` when given. Cut to
    65,536 characters (a reprompt keeps its message and cuts the oldest text, ``envs.base.bounded_text``).

    ## Starting State
    The server's: ``reset(seed=s)`` sends ``{"seed": s, **reset_kwargs}``, so the task is fixed by the seed
    exactly as far as the server honours seeds; splitting tasks by content is the server's business too.

    ## Rewards
    The server's reward of each step (``null`` counts as 0). ``success`` is a step that ends the episode
    (``done``) with a reward of at least ``success_reward``. An invalid response earns ``invalid_penalty``.

    ## Episode End
    Terminated when the server says ``done``; truncated after ``max_turns`` turns. A server that fails
    during a step (unreachable, an error status or error message, no reply within ``timeout_s``, a reply
    that is not the protocol's JSON) terminates the episode with reward 0 and an observation describing the
    failure; ``info["server_error"]`` holds it ("" otherwise), so a trainer can leave such episodes out.
    ``step()`` never raises on model output or server failures.

    ``reset()`` raises :class:`OpenEnvUnavailable` (a ``ConnectionError``) naming the URL and the fix when
    the server cannot give a first observation: a wrong URL or a stopped server is a setup error, not an
    episode to train on. A later ``reset()`` opens a new session. Between steps the session is kept alive
    however long the policy takes (the connection answers the server's pings in the background).

    ## Arguments
    ``base_url`` (``http(s)://`` or ``ws(s)://`` host and port); ``transport`` (``"websocket"`` or
    ``"http"``); ``action_key`` or ``build_action``; ``observation_key`` or ``observation_text``;
    ``reset_kwargs`` (extra JSON fields of the reset request); ``timeout_s`` (per message); ``token`` (sent
    as ``Authorization: Bearer <token>``, for a server started with ``--token``); ``max_turns``;
    ``success_reward``; ``reminder`` (the format line the ``reprompt`` policy restates); ``invalid_output``;
    ``invalid_penalty``. Callables must be picklable (module-level functions) for Ray's remote env runners.

    ## Version History
    * v0: initial version.
    """

    def __init__(
        self,
        base_url: str,
        *,
        transport: str = "websocket",
        action_key: str = "message",
        build_action: Callable[[str], dict[str, Any]] | None = None,
        observation_key: str | None = None,
        observation_text: Callable[[dict[str, Any]], str] | None = None,
        reset_kwargs: dict[str, Any] | None = None,
        timeout_s: float = 30.0,
        token: str | None = None,
        max_turns: int = 16,
        success_reward: float = 1.0,
        reminder: str = DEFAULT_REMINDER,
        invalid_output: str = "reprompt",
        invalid_penalty: float = DEFAULT_INVALID_PENALTY,
        render_mode: str | None = None,
    ):
        super().__init__(
            max_turns=max_turns,
            invalid_output=invalid_output,
            invalid_penalty=invalid_penalty,
            render_mode=render_mode,
        )
        if transport not in TRANSPORTS:
            raise ValueError(f"transport must be one of {TRANSPORTS}, got {transport!r}")
        for name, value in (("action_key", action_key), ("reminder", reminder)):
            if not isinstance(value, str) or (name == "action_key" and not value):
                raise ValueError(f"{name} must be a non-empty string, got {value!r}")
        if observation_key is not None and (not isinstance(observation_key, str) or not observation_key):
            raise ValueError(f"observation_key must be None or a field name, got {observation_key!r}")
        for name, value in (("build_action", build_action), ("observation_text", observation_text)):
            if value is not None and not callable(value):
                raise TypeError(f"{name} must be None or a function, got {type(value).__name__}")
        if observation_key is not None and observation_text is not None:
            raise ValueError("give observation_key or observation_text, not both")
        self.timeout_s = check_real("timeout_s", timeout_s)
        if self.timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0 seconds, got {timeout_s!r}")
        self.reset_kwargs = _checked_reset_kwargs(reset_kwargs)
        self.base_url = base_url
        self.transport = transport
        self.action_key = action_key
        self.build_action = build_action
        self.observation_key = observation_key
        self.observation_text = observation_text
        self.success_reward = check_real("success_reward", success_reward)
        self.reminder = reminder
        if token is not None and (not isinstance(token, str) or not token or not token.isprintable()):
            raise ValueError("token must be None or a non-empty printable string (the server's --token)")
        self.token = token
        # checks base_url
        self._session = open_session(transport, base_url, timeout_s=self.timeout_s, token=token)
        self._text = ""
        self._server_error = ""
        self._warned_of_render = False
        self._seed: int | None = None

    # ----------------------------------------------------------------- gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self._seed = seed
        return super().reset(seed=seed, options=options)

    def close(self) -> None:
        self._session.close()
        super().close()

    # ----------------------------------------------------------------- MultiTurnEnv hooks
    def _new_task(self) -> str:
        self._server_error = ""
        data = dict(self.reset_kwargs)
        if self._seed is not None:
            data["seed"] = int(self._seed)
        try:
            reply = self._session.reset(data)
        except OpenEnvError as exc:
            self._session.close()
            raise OpenEnvUnavailable(
                f"the OpenEnv server at {self.base_url} gave no first observation ({exc}). Start the server "
                f"(for example `uvicorn server.app:app --port 8000` in the env's directory), or pass the "
                f"base_url it listens on; transport={self.transport!r}"
            ) from None
        if reply.done:
            raise OpenEnvUnavailable(
                f"the OpenEnv server at {self.base_url} ended the episode at reset (done=true): check "
                f"reset_kwargs {self.reset_kwargs} and the server's log"
            )
        if self.observation_key is not None and self.observation_key not in reply.observation:
            raise ValueError(
                f"observation_key {self.observation_key!r} is not a field of the server's observation; "
                f"its fields are {sorted(reply.observation)}"
            )
        self._text = self._render(reply.observation)
        return self._text

    def format_reminder(self) -> str:
        return self.reminder

    def _parse(self, response: str) -> Parsed:
        """Build the action and send it: the server's verdict decides validity, so the step happens here.

        The action of a valid response is the server's :class:`Reply`, or the :class:`OpenEnvError` of a
        failed step (``_apply`` ends the episode with it).
        """
        if self.build_action is None:
            if not response.strip():
                return Parsed(format_ok=False, valid=False, error="the response is empty")
            action: Any = {self.action_key: response}
        else:
            try:
                action = self.build_action(response)
            except Exception as exc:  # the user's builder refusing a response is an invalid response
                return Parsed(format_ok=False, valid=False, error=_bounded(f"{type(exc).__name__}: {exc}"))
            if not isinstance(action, dict):
                error = f"build_action returned a {type(action).__name__}, not an action dict"
                return Parsed(format_ok=False, valid=False, error=error)
        try:
            return Parsed(format_ok=True, valid=True, action=self._session.step(action))
        except ActionRejected as exc:
            return Parsed(format_ok=True, valid=False, error=_bounded(str(exc)))
        except OpenEnvError as exc:
            self._session.close()  # the next reset opens a fresh session
            return Parsed(format_ok=True, valid=True, action=exc)

    def _apply(self, action: Reply | OpenEnvError) -> Outcome:
        if isinstance(action, OpenEnvError):
            self._server_error = _bounded(str(action))
            self._text = f"The environment server failed: {self._server_error}. The episode ends."
            return Outcome(0.0, self._text, terminated=True, effective=False)
        reward = 0.0 if action.reward is None else action.reward
        self._text = self._render(action.observation)
        success = action.done and reward >= self.success_reward
        return Outcome(reward, self._text, terminated=action.done, success=success)

    def _state_text(self) -> str:
        return self._text

    def _task_info(self) -> dict[str, Any]:
        return {"server_error": self._server_error}

    # ----------------------------------------------------------------- helpers
    def _render(self, observation: dict[str, Any]) -> str:
        if self.observation_text is None:
            if self.observation_key is not None and self.observation_key in observation:
                return _bounded(_value_text(observation[self.observation_key]), MAX_TEXT_CHARS)
            return _bounded(render_observation(observation), MAX_TEXT_CHARS)
        try:
            text = self.observation_text(observation)
            if not isinstance(text, str):
                raise TypeError(f"returned a {type(text).__name__}, not a str")
        except Exception as exc:  # a bug in the user's renderer must not end rollouts; say so once
            if not self._warned_of_render:
                self._warned_of_render = True
                warnings.warn(
                    f"OpenEnvClientEnv: observation_text failed ({type(exc).__name__}: {exc}); showing the "
                    "observation's fields instead",
                    stacklevel=4,
                )
            text = render_observation(observation)
        return _bounded(text, MAX_TEXT_CHARS)


def _checked_reset_kwargs(reset_kwargs: dict[str, Any] | None) -> dict[str, Any]:
    if reset_kwargs is None:
        return {}
    if not isinstance(reset_kwargs, dict) or not all(isinstance(k, str) for k in reset_kwargs):
        raise ValueError(f"reset_kwargs must be a dict with string keys, got {reset_kwargs!r}")
    if "seed" in reset_kwargs:
        raise ValueError("reset_kwargs must not hold 'seed'; pass the seed to reset(seed=...)")
    try:
        json.dumps(reset_kwargs, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"reset_kwargs must be JSON: {exc}") from None
    return dict(reset_kwargs)


def _value_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):  # decoded JSON always dumps; a user's dict may not
        return repr(value)


def _bounded(text: str, limit: int = _ERROR_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
