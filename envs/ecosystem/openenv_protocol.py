"""The wire protocol of OpenEnv env servers (openenv-core 0.3.0), spoken with the standard library only.

Followed from openenv-core 0.3.0's ``openenv/core/env_server/http_server.py`` (``register_routes``: the
``/reset``, ``/step``, ``/state``, ``/health`` routes and the ``/ws`` endpoint), ``env_server/types.py``
(``ResetRequest``, ``StepRequest``, ``ResetResponse``, ``StepResponse``, the ``WS*`` messages and
``WSErrorCode``), ``env_server/serialization.py`` (``serialize_observation``) and ``core/env_client.py`` and
``generic_client.py`` (the client's side of the session), meta-pytorch/OpenEnv on GitHub.

Every reply to a reset or a step is ``{"observation": {...}, "reward": float | null, "done": bool}``: the
observation's own fields, without its ``reward``, ``done`` and ``metadata`` (``serialize_observation``
leaves these out of ``observation``; ``metadata`` is not sent at all).

A connection's background thread answers the server's keepalive pings between requests
(``envs/ecosystem/websocket.py``), so a session survives a policy that thinks longer than the server's ping
timeout. ``envs/ecosystem/openenv_server.py`` is the server's side of the same protocol.

Two transports:

- ``websocket`` (what OpenEnv's own ``EnvClient`` speaks): one session per connection to ``/ws``, with its
  own env on the server. Messages ``{"type": "reset", "data": {"seed": ...}}``, ``{"type": "step", "data":
  <action>}`` and ``{"type": "close"}``; replies ``{"type": "observation", "data": <reply>}`` or ``{"type":
  "error", "data": {"message": ..., "code": ...}}``, ``code`` one of ``WSErrorCode`` (``VALIDATION_ERROR``
  for an action that does not fit the action schema, ``CAPACITY_REACHED`` when the server already holds
  ``max_concurrent_envs`` sessions, ``EXECUTION_ERROR`` when the env raised).
- ``http``: ``POST /reset`` with ``{"seed": ...}`` and ``POST /step`` with ``{"action": <action>}``, each
  answered with a reply (422 for an action that does not fit the schema). In 0.3.0 each such request makes
  a new env on the server and closes it afterwards, so a step does not continue the episode of the reset:
  this transport suits servers that keep one env across requests (OpenEnv before 0.2 did).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import math
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Protocol

from envs.ecosystem.websocket import WebSocketConnection, WebSocketError

TRANSPORTS = ("websocket", "http")
MAX_REPLY_BYTES = 16 * 2**20
_ERROR_CHARS = 300


class OpenEnvError(RuntimeError):
    """The server could not be reached, failed, timed out or answered something that is not a reply."""


class ActionRejected(OpenEnvError):
    """The server refused an action that does not fit its action schema (the env did not step)."""


@dataclass(frozen=True)
class Reply:
    """A server's answer to a reset or a step."""

    observation: dict[str, Any]
    reward: float | None
    done: bool


class Session(Protocol):
    def reset(self, data: dict[str, Any]) -> Reply: ...

    def step(self, action: dict[str, Any]) -> Reply: ...

    def close(self) -> None: ...


def server_urls(base_url: str) -> tuple[str, str]:
    """``(http(s) base, ws(s) base)`` of a server named by either form, without a trailing slash."""
    if not isinstance(base_url, str):
        raise TypeError(f"base_url must be a string such as 'http://127.0.0.1:8000', got {base_url!r}")
    url = base_url.rstrip("/")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https", "ws", "wss") or not parts.hostname:
        raise ValueError(
            f"base_url must be an http(s):// or ws(s):// URL of an OpenEnv server, such as "
            f"'http://127.0.0.1:8000'; got {base_url!r}"
        )
    secure = parts.scheme in ("https", "wss")
    rest = url.split("://", 1)[1]
    return f"{'https' if secure else 'http'}://{rest}", f"{'wss' if secure else 'ws'}://{rest}"


def parse_reply(payload: Any) -> Reply:
    """The :class:`Reply` in a decoded JSON payload; :class:`OpenEnvError` when it has not the shape."""
    if not isinstance(payload, dict):
        raise OpenEnvError(f"expected a JSON object, got {_short(payload)}")
    observation = payload.get("observation", {})
    reward = payload.get("reward")
    done = payload.get("done", False)
    if not isinstance(observation, dict):
        raise OpenEnvError(f"'observation' is not a JSON object: {_short(observation)}")
    if reward is not None and (
        not isinstance(reward, int | float) or isinstance(reward, bool) or not math.isfinite(reward)
    ):
        raise OpenEnvError(f"'reward' is not a finite number or null: {_short(reward)}")
    if not isinstance(done, bool):
        raise OpenEnvError(f"'done' is not true or false: {_short(done)}")
    return Reply(observation, None if reward is None else float(reward), done)


class WebSocketSession:
    """One session on the server's ``/ws`` endpoint: its own env, kept across reset and step."""

    def __init__(self, ws_base: str, *, timeout_s: float, headers: dict[str, str] | None = None):
        self.url = f"{ws_base}/ws"
        self.timeout_s = timeout_s
        self.headers = dict(headers or {})
        self._connection: WebSocketConnection | None = None

    def reset(self, data: dict[str, Any]) -> Reply:
        return self._request({"type": "reset", "data": data}, stepping=False)

    def step(self, action: dict[str, Any]) -> Reply:
        return self._request({"type": "step", "data": action}, stepping=True)

    def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(WebSocketError):  # the server may be gone already
                connection.send_text(json.dumps({"type": "close"}))
            connection.close()

    def _request(self, message: dict[str, Any], *, stepping: bool) -> Reply:
        try:
            body = json.dumps(message, allow_nan=False)
        except (TypeError, ValueError, RecursionError) as exc:
            raise ActionRejected(f"the action is not JSON: {exc}") from None
        try:
            if self._connection is None:
                self._connection = WebSocketConnection(
                    self.url,
                    timeout_s=self.timeout_s,
                    max_message_bytes=MAX_REPLY_BYTES,
                    headers=self.headers,
                )
            self._connection.send_text(body)
            raw = self._connection.receive_text()
        except (WebSocketError, ValueError) as exc:
            self.close()  # a late reply would answer the next request: start afresh
            raise OpenEnvError(f"{self.url}: {exc}") from None
        try:
            answer = json.loads(raw)
        except (ValueError, RecursionError):
            raise OpenEnvError(f"{self.url}: the reply is not JSON: {_short(raw)}") from None
        if not isinstance(answer, dict):
            raise OpenEnvError(f"{self.url}: expected a message object, got {_short(answer)}")
        data = answer.get("data")
        if answer.get("type") == "error":
            details = data if isinstance(data, dict) else {"message": data}
            code = details.get("code")
            # A VALIDATION_ERROR's "message" is only "Invalid message"; its pydantic "errors" say what.
            text = _short(" ".join(json.dumps(details.get(k)) for k in ("message", "errors") if k in details))
            if stepping and code == "VALIDATION_ERROR":
                raise ActionRejected(f"the server rejected the action: {text}")
            self.close()  # CAPACITY_REACHED, FACTORY_ERROR and SESSION_ERROR end the session on the server
            raise OpenEnvError(f"{self.url}: the server answered error {code}: {text}")
        if answer.get("type") != "observation":
            raise OpenEnvError(f"{self.url}: expected a message of type 'observation', got {_short(answer)}")
        try:
            return parse_reply(data)
        except OpenEnvError as exc:
            raise OpenEnvError(f"{self.url}: {exc}") from None


class HTTPSession:
    """``POST /reset`` and ``POST /step``, one request each (see the module docstring on what that keeps)."""

    def __init__(self, http_base: str, *, timeout_s: float, headers: dict[str, str] | None = None):
        self.base = http_base
        self.timeout_s = timeout_s
        self.headers = dict(headers or {})

    def reset(self, data: dict[str, Any]) -> Reply:
        return self._post("/reset", data, stepping=False)

    def step(self, action: dict[str, Any]) -> Reply:
        return self._post("/step", {"action": action}, stepping=True)

    def close(self) -> None:
        return None  # nothing is held between requests

    def _post(self, route: str, payload: dict[str, Any], *, stepping: bool) -> Reply:
        url = self.base + route
        try:
            body = json.dumps(payload, allow_nan=False).encode()
        except (TypeError, ValueError, RecursionError) as exc:
            raise ActionRejected(f"the action is not JSON: {exc}") from None
        request = urllib.request.Request(
            url, data=body, headers={"Content-Type": "application/json", **self.headers}, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                raw = response.read(MAX_REPLY_BYTES + 1)
        except urllib.error.HTTPError as exc:  # before URLError, its base class
            try:
                detail = _short(exc.read(_ERROR_CHARS).decode("utf-8", "replace"))
            except (OSError, http.client.HTTPException):
                detail = "(no body)"
            if stepping and exc.code == 422:
                raise ActionRejected(f"the server rejected the action: {detail}") from None
            raise OpenEnvError(f"{url}: HTTP {exc.code}: {detail}") from None
        except (OSError, http.client.HTTPException, ValueError) as exc:  # URLError is an OSError
            raise OpenEnvError(f"{url}: {getattr(exc, 'reason', exc)}") from None
        if len(raw) > MAX_REPLY_BYTES:
            raise OpenEnvError(f"{url}: the reply exceeds {MAX_REPLY_BYTES} bytes")
        try:
            return parse_reply(json.loads(raw))
        except (ValueError, RecursionError):
            raise OpenEnvError(f"{url}: the reply is not JSON: {_short(raw)}") from None
        except OpenEnvError as exc:
            raise OpenEnvError(f"{url}: {exc}") from None


def open_session(transport: str, base_url: str, *, timeout_s: float, token: str | None = None) -> Session:
    """A session of ``transport`` (one of :data:`TRANSPORTS`) on the server at ``base_url``; a ``token`` is
    sent as ``Authorization: Bearer <token>`` (``python -m envs.serve --token``)."""
    http_base, ws_base = server_urls(base_url)
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    if transport == "websocket":
        return WebSocketSession(ws_base, timeout_s=timeout_s, headers=headers)
    if transport == "http":
        return HTTPSession(http_base, timeout_s=timeout_s, headers=headers)
    raise ValueError(f"transport must be one of {TRANSPORTS}, got {transport!r}")


def _short(value: Any) -> str:
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= _ERROR_CHARS else text[: _ERROR_CHARS - 3] + "..."
