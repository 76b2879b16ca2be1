"""Any registered freshrl env served over OpenEnv's wire protocol (openenv-core 0.3.0), standard library only.

The protocol is the one ``envs/ecosystem/openenv_protocol.py`` speaks from the client's side (the openenv-core
files it follows are named there); this module is the server's side, so TRL, SkyRL, prime-rl or OpenEnv's own
``EnvClient`` can train on a freshrl env. Routes:

- ``GET /ws``: a WebSocket session with an env of its own (``gymnasium.make(env_id, **env_kwargs)``), made at
  connect and closed at disconnect. Messages ``{"type": "reset", "data": {...}}``, ``{"type": "step", "data":
  {"message": "<response>"}}``, ``{"type": "state"}`` and ``{"type": "close"}``; replies ``{"type":
  "observation", "data": <reply>}``, ``{"type": "state", "data": {...}}`` or ``{"type": "error", "data":
  {"message": ..., "code": <WSErrorCode>}}``.
- ``POST /reset``, ``POST /step`` (``{"action": {...}}``), ``GET /state``: one env shared by every HTTP
  request (OpenEnv before 0.2 kept one env; 0.3.0 makes one per request, which cannot play an episode), for
  a single client or a look by hand.
- ``GET /health``: ``{"status": "healthy", "sessions": n, "max_sessions": m}``, without the token.

A reply is ``{"observation": {"text", "image"?, "truncated", "info"}, "reward", "done"}``; the reset fields,
the image encoding and the limits are described in docs/serving_envs.md. The server pings every session and
ends one that does not answer (uvicorn's keepalive), so a client that vanished without closing frees its slot.
"""

from __future__ import annotations

import base64
import contextlib
import hmac
import io
import json
import math
import random
import select
import socket
import struct
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import gymnasium as gym
import numpy as np
from PIL import Image

from envs.base import MultiTurnEnv
from envs.ecosystem.websocket import (
    OP_BINARY,
    OP_CLOSE,
    OP_CONTINUATION,
    OP_PING,
    OP_PONG,
    OP_TEXT,
    WebSocketError,
    accept_key,
    encode_frame,
    read_frame,
)
from envs.seeds import SPLITS

RESET_FIELDS = ("seed", "split", "options", "episode_id")
TOKEN_ENV_VAR = "FRESHRL_SERVE_TOKEN"
DEFAULT_MAX_SESSIONS = 64
DEFAULT_MAX_MESSAGE_BYTES = 2**20
# uvicorn's WebSocket keepalive defaults (ws_ping_interval, ws_ping_timeout).
DEFAULT_PING_INTERVAL_S = 20.0
DEFAULT_PING_TIMEOUT_S = 20.0
# The most seconds a client may take to send the rest of a request or frame it has begun.
_PARTIAL_TIMEOUT_S = 30.0
# RFC 6455 section 7.4.1 close codes.
_CLOSE_NORMAL, _CLOSE_PROTOCOL, _CLOSE_UNSUPPORTED, _CLOSE_TOO_BIG, _CLOSE_ERROR, _CLOSE_TRY_LATER = (
    1000,
    1002,
    1003,
    1009,
    1011,
    1013,
)
_MAX_EPISODE_ID_CHARS = 255  # openenv-core's ResetRequest.episode_id


class RequestError(Exception):
    """A message the server answers with an error: ``code`` is one of OpenEnv's ``WSErrorCode`` names,
    ``status`` the HTTP status of the same error on the HTTP routes."""

    def __init__(self, code: str, message: str, *, status: int | None = None):
        super().__init__(message)
        self.code = code
        self.status = status or (422 if code == "VALIDATION_ERROR" else 500)


class EnvSession:
    """One env and its episode, driven by the ``data`` of protocol messages; bad data raises RequestError."""

    def __init__(self, make: Callable[[], gym.Env], env_id: str, action_key: str):
        try:
            self.env = make()
        except Exception as exc:  # the env could be made at start-up; report what changed
            raise RequestError(
                "FACTORY_ERROR", f"making {env_id} failed: {type(exc).__name__}: {exc}"
            ) from exc
        self.env_id = env_id
        self.action_key = action_key
        self.episode_id: str | None = None
        self.seed: int | None = None
        self.split: str | None = None
        self.step_count = 0
        self.done: bool | None = None  # None until the first reset
        self._random = random.Random()

    def reset(self, data: Any) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise RequestError(
                "VALIDATION_ERROR", f"reset data must be a JSON object with any of {RESET_FIELDS}"
            )
        unknown = sorted(set(data) - set(RESET_FIELDS))
        if unknown:
            raise RequestError(
                "VALIDATION_ERROR", f"unknown reset fields {unknown}; the fields are {RESET_FIELDS}"
            )
        seed, split, options, episode_id = (data.get(name) for name in RESET_FIELDS)
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise RequestError("VALIDATION_ERROR", f"seed must be an integer >= 0 or null, got {seed!r}")
        if split is not None and split not in SPLITS:
            raise RequestError(
                "VALIDATION_ERROR", f"split must be one of {sorted(SPLITS)} or null, got {split!r}"
            )
        if options is not None and not isinstance(options, dict):
            raise RequestError("VALIDATION_ERROR", f"options must be a JSON object or null, got {options!r}")
        if episode_id is not None and (
            not isinstance(episode_id, str) or len(episode_id) > _MAX_EPISODE_ID_CHARS
        ):
            raise RequestError("VALIDATION_ERROR", "episode_id must be a string of at most 255 characters")
        env_seed = seed
        if split is not None:  # seed k is the split's k-th task; no seed: a task of the split at random
            tasks = SPLITS[split]
            index = self._random.randrange(len(tasks)) if seed is None else seed
            if index >= len(tasks):
                raise RequestError(
                    "VALIDATION_ERROR", f"split {split!r} holds {len(tasks)} tasks; seed must be below that"
                )
            env_seed = tasks[index]
        try:
            observation, info = self.env.reset(seed=env_seed, options=options)
        except Exception as exc:  # a seed outside freshrl's ranges, options the env refuses
            raise RequestError("EXECUTION_ERROR", f"reset failed: {type(exc).__name__}: {exc}") from None
        self.episode_id, self.seed, self.split = episode_id, env_seed, split
        self.step_count, self.done = 0, False
        return _reply(observation, info, reward=None, done=False, truncated=False)

    def step(self, action: Any) -> dict[str, Any]:
        key = self.action_key
        if self.done is None:
            raise RequestError("EXECUTION_ERROR", "step before reset: send a reset first", status=409)
        if self.done:
            raise RequestError(
                "EXECUTION_ERROR", "the episode has ended (done was true): send a reset", status=409
            )
        if not isinstance(action, dict) or not isinstance(action.get(key), str):
            raise RequestError("VALIDATION_ERROR", f'the action must be {{"{key}": "<response text>"}}')
        extra = sorted(set(action) - {key, "metadata"})
        if extra:
            raise RequestError("VALIDATION_ERROR", f"extra action fields not permitted: {extra}")
        try:
            observation, reward, terminated, truncated, info = self.env.step(action[key])
        except Exception as exc:  # an env bug: the model's text never makes a freshrl env raise
            raise RequestError("EXECUTION_ERROR", f"step failed: {type(exc).__name__}: {exc}") from None
        self.step_count += 1
        self.done = bool(terminated or truncated)
        return _reply(observation, info, reward=float(reward), done=self.done, truncated=bool(truncated))

    def state(self) -> dict[str, Any]:
        """OpenEnv's ``State`` (``episode_id``, ``step_count``) and what names the task."""
        return {
            "episode_id": self.episode_id,
            "step_count": self.step_count,
            "env_id": self.env_id,
            "seed": self.seed,
            "split": self.split,
            "done": self.done,
        }

    def close(self) -> None:
        with contextlib.suppress(Exception):  # a failing close must not keep the slot
            self.env.close()


def encode_png(image: np.ndarray) -> str:
    """An RGB ``uint8`` array as a base64 PNG (standard alphabet, padded): the ``image`` field."""
    buffer = io.BytesIO()
    Image.fromarray(np.asarray(image, dtype=np.uint8)).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def json_safe(value: Any) -> Any:
    """``value`` with numpy scalars and arrays as JSON numbers and lists, non-finite floats as null and
    anything else JSON cannot hold as its ``str``."""
    if isinstance(value, dict):
        return {str(key): json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(item) for item in value]
    if isinstance(value, np.ndarray | np.generic):
        return json_safe(value.tolist())
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, bool | int | str):
        return value
    return str(value)


def _reply(observation: Any, info: dict[str, Any], *, reward: float | None, done: bool, truncated: bool):
    fields: dict[str, Any] = {}
    if isinstance(observation, dict):
        fields["text"] = observation["text"]
        fields["image"] = encode_png(observation["image"])
    else:
        fields["text"] = observation
    fields["truncated"] = truncated
    fields["info"] = json_safe(info)
    return {"observation": fields, "reward": reward, "done": done}


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # a burst of connects (a group, the load test) must not overflow the backlog

    def handle_error(self, request, client_address) -> None:
        if not isinstance(sys.exc_info()[1], OSError):  # a client that left mid-request is expected
            super().handle_error(request, client_address)


class EnvServer:
    """``env_id`` served on ``host:port`` (0: a free port) until :meth:`stop`.

    Args:
        env_id: a registered id, or ``module:ns/Name-v0`` to import ``module`` first.
        env_kwargs: keyword arguments of every ``gymnasium.make``.
        token: when set, every request but ``/health`` must send ``Authorization: Bearer <token>`` (or
            ``?token=`` in the URL); others get HTTP 401.
        max_sessions: WebSocket sessions held at once; one more is answered ``CAPACITY_REACHED``.
        ping_interval_s, ping_timeout_s: ping an idle session this often; end it when no pong comes in time.
        max_message_bytes: a longer message or request body is refused and ends the session.
        action_key: the action field holding the response text.

    Raises ``ValueError`` naming the problem when the env cannot be made, is not a text env or fails its
    first reset.
    """

    def __init__(
        self,
        env_id: str,
        *,
        env_kwargs: dict[str, Any] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        ping_interval_s: float = DEFAULT_PING_INTERVAL_S,
        ping_timeout_s: float = DEFAULT_PING_TIMEOUT_S,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        action_key: str = "message",
    ):
        if isinstance(max_sessions, bool) or not isinstance(max_sessions, int) or max_sessions < 1:
            raise ValueError(f"max_sessions must be an integer >= 1, got {max_sessions!r}")
        for name, value in (("ping_interval_s", ping_interval_s), ("ping_timeout_s", ping_timeout_s)):
            if not isinstance(value, int | float) or not value > 0:
                raise ValueError(f"{name} must be a number of seconds > 0, got {value!r}")
        if token is not None and (not isinstance(token, str) or not token):
            raise ValueError("token must be a non-empty string or None")
        self.env_id = env_id
        self.env_kwargs = dict(env_kwargs or {})
        self.token = token
        self.max_sessions = max_sessions
        self.ping_interval_s = float(ping_interval_s)
        self.ping_timeout_s = float(ping_timeout_s)
        self.max_message_bytes = max_message_bytes
        self.action_key = action_key
        self._check_env()
        self._lock = threading.Lock()
        self._sessions = 0
        self._connections: set[socket.socket] = set()
        self._http_session: EnvSession | None = None
        self._http_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.httpd = _HTTPServer((host, port), _handler(self))
        self.host, self.port = self.httpd.server_address[:2]

    def _check_env(self) -> None:
        try:
            env = self.make()
        except Exception as exc:
            raise ValueError(
                f"cannot make {self.env_id!r} with {self.env_kwargs}: {type(exc).__name__}: {exc}. Give a "
                f"registered id (freshrl/..., or module:ns/Name-v0) and the env's keyword arguments"
            ) from exc
        try:
            if not isinstance(env.unwrapped, MultiTurnEnv):
                raise ValueError(
                    f"{self.env_id} is a {type(env.unwrapped).__name__}; the server plays text envs, those "
                    f"deriving from envs.base.MultiTurnEnv"
                )
            self._first_reset(env)
        finally:
            env.close()

    def _first_reset(self, env: gym.Env) -> None:
        """The first reset pays one-time compilation (Sokoban's numba searches take seconds on a fresh
        clone); paying it before serving keeps it out of the first client's reply timeout."""
        try:
            env.reset(seed=0)
        except Exception as exc:
            raise ValueError(
                f"{self.env_id} with {self.env_kwargs} fails its first reset: {type(exc).__name__}: {exc}. "
                f"Fix the env's keyword arguments"
            ) from exc

    def make(self) -> gym.Env:
        return gym.make(self.env_id, **self.env_kwargs)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def sessions(self) -> int:
        """WebSocket sessions held now."""
        with self._lock:
            return self._sessions

    def serve_forever(self) -> None:
        self.httpd.serve_forever(poll_interval=0.05)  # stop() waits for the next poll

    def start(self) -> EnvServer:
        """Serve from a daemon thread; returns self."""
        self._thread = threading.Thread(target=self.serve_forever, name="openenv-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop accepting, cut every open connection (its session ends and frees its env)."""
        self.httpd.shutdown()
        self.httpd.server_close()
        with self._lock:
            for connection in self._connections:
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._http_session is not None:
            self._http_session.close()

    def __enter__(self) -> EnvServer:
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()

    # ------------------------------------------------------------------------------------ for the handler
    def authorized(self, headers: Any, query: str) -> bool:
        if self.token is None:
            return True
        sent = headers.get("Authorization", "")
        bearer = sent[7:] if sent[:7].lower() == "bearer " else ""
        in_query = urllib.parse.parse_qs(query).get("token", [""])[0]
        expected = self.token.encode()
        return any(hmac.compare_digest(given.encode(), expected) for given in (bearer, in_query) if given)

    def take_slot(self) -> bool:
        with self._lock:
            if self._sessions >= self.max_sessions:
                return False
            self._sessions += 1
            return True

    def free_slot(self) -> None:
        with self._lock:
            self._sessions -= 1

    def track(self, connection: socket.socket, *, add: bool) -> None:
        with self._lock:
            (self._connections.add if add else self._connections.discard)(connection)

    def http_session(self) -> EnvSession:
        if self._http_session is None:
            self._http_session = EnvSession(self.make, self.env_id, self.action_key)
        return self._http_session

    def message_reply(self, session: EnvSession, raw: bytes) -> dict[str, Any] | None:
        """The reply to one WebSocket text message; None for ``close``."""
        try:
            message = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            return _error("INVALID_JSON", f"Invalid JSON: {exc}")
        kind = message.get("type") if isinstance(message, dict) else None
        if kind == "close":
            return None
        try:
            if kind == "reset":
                return {"type": "observation", "data": session.reset(message.get("data", {}))}
            if kind == "step":
                return {"type": "observation", "data": session.step(message.get("data"))}
            if kind == "state":
                return {"type": "state", "data": session.state()}
        except RequestError as exc:
            return _error(exc.code, str(exc))
        return _error(
            "UNKNOWN_TYPE",
            f"Unknown message type: {kind!r}; send a JSON object whose type is reset, step, state or close",
        )


def _error(code: str, message: str) -> dict[str, Any]:
    return {"type": "error", "data": {"message": message, "code": code}}


def _handler(server: EnvServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive for HTTP clients; a WebSocket upgrade answers in 1.1
        rbufsize = 0  # unbuffered: the WebSocket frames after the handshake are read from the socket itself
        timeout = _PARTIAL_TIMEOUT_S

        def log_message(self, format: str, *args: Any) -> None:  # one line per request is noise under load
            return None

        def setup(self) -> None:
            super().setup()
            server.track(self.connection, add=True)

        def finish(self) -> None:
            server.track(self.connection, add=False)
            with contextlib.suppress(OSError):
                super().finish()

        # -------------------------------------------------------------------------------- HTTP
        def do_GET(self) -> None:
            path, _, query = self.path.partition("?")
            if path == "/health":
                return self._send(
                    200,
                    {"status": "healthy", "sessions": server.sessions, "max_sessions": server.max_sessions},
                )
            if not self._authorized(query):
                return None
            if path == "/ws":
                return self._websocket()
            if path == "/state":
                with server._http_lock:
                    return self._send(200, server.http_session().state())
            return self._send(
                404, {"detail": f"no route {path}; the routes are /ws, /reset, /step, /state, /health"}
            )

        def do_POST(self) -> None:
            path, _, query = self.path.partition("?")
            if not self._authorized(query):
                return None
            if path not in ("/reset", "/step"):
                return self._send(404, {"detail": f"no route POST {path}; POST /reset or /step"})
            length = self.headers.get("Content-Length", "0")
            if not length.isdigit() or int(length) > server.max_message_bytes:
                self.close_connection = True
                return self._send(
                    413,
                    {
                        "detail": f"the body must have a Content-Length of at most "
                        f"{server.max_message_bytes} bytes (--max-message-bytes)"
                    },
                )
            try:
                request = json.loads(self._read_body(int(length)) or b"{}")
            except (UnicodeDecodeError, ValueError, RecursionError) as exc:
                return self._send(422, {"detail": f"the body is not JSON: {exc}"})
            if not isinstance(request, dict):
                return self._send(422, {"detail": "the body must be a JSON object"})
            with server._http_lock:
                try:
                    session = server.http_session()
                    if path == "/reset":
                        return self._send(200, session.reset(request))
                    return self._send(200, session.step(request.get("action")))
                except RequestError as exc:
                    return self._send(exc.status, {"detail": str(exc), "code": exc.code})

        def _authorized(self, query: str) -> bool:
            if server.authorized(self.headers, query):
                return True
            self._send(
                401,
                {
                    "detail": "missing or wrong token: send the header 'Authorization: Bearer <token>' with "
                    f"the token the server was started with (--token or ${TOKEN_ENV_VAR})"
                },
            )
            return False

        def _read_body(self, length: int) -> bytes:
            chunks, left = [], length
            while left:
                chunk = self.rfile.read(left)
                if not chunk:
                    raise ConnectionError("the client closed the connection mid-request")
                chunks.append(chunk)
                left -= len(chunk)
            return b"".join(chunks)

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        # -------------------------------------------------------------------------------- WebSocket
        def _websocket(self) -> None:
            key = self.headers.get("Sec-WebSocket-Key")
            if self.headers.get("Upgrade", "").lower() != "websocket" or not key:
                return self._send(400, {"detail": "GET /ws needs a WebSocket upgrade (RFC 6455)"})
            if self.headers.get("Sec-WebSocket-Version") != "13":
                return self._send(426, {"detail": "WebSocket version 13 (RFC 6455) is required"})
            self.send_response(101, "Switching Protocols")
            self.send_header("Upgrade", "websocket")
            self.send_header("Connection", "Upgrade")
            self.send_header("Sec-WebSocket-Accept", accept_key(key))
            self.end_headers()
            self.close_connection = True
            if not server.take_slot():
                message = (
                    f"the server holds its {server.max_sessions} sessions (--max-sessions); close one, or "
                    f"start the server with a larger --max-sessions"
                )
                self._ws_send(_error("CAPACITY_REACHED", message))
                return self._ws_close(_CLOSE_TRY_LATER, "capacity reached")
            try:
                try:
                    session = EnvSession(server.make, server.env_id, server.action_key)
                except RequestError as exc:
                    self._ws_send(_error(exc.code, str(exc)))
                    return self._ws_close(_CLOSE_ERROR, "the env could not be made")
                try:
                    self._ws_session(session)
                finally:
                    session.close()
            except (OSError, WebSocketError):
                pass  # the client went away or broke the protocol: its session ends here
            finally:
                server.free_slot()

        def _ws_session(self, session: EnvSession) -> None:
            self._buffer = bytearray()
            parts: list[bytes] = []
            size = 0
            pong_due: float | None = None
            while True:
                wait = server.ping_interval_s if pong_due is None else max(0.0, pong_due - time.monotonic())
                if not self._ws_readable(wait):
                    if pong_due is not None:
                        return self._ws_close(_CLOSE_ERROR, "keepalive ping timeout")
                    self.connection.sendall(encode_frame(OP_PING, b"freshrl", mask=False))
                    pong_due = time.monotonic() + server.ping_timeout_s
                    continue
                try:
                    final, opcode, payload = read_frame(self._ws_read, server.max_message_bytes - size)
                except WebSocketError as exc:  # too long: the rest cannot be skipped without reading it
                    self._ws_send(
                        _error(
                            "SESSION_ERROR",
                            f"{exc}; the session ends (start the server with a larger --max-message-bytes)",
                        )
                    )
                    return self._ws_close(_CLOSE_TOO_BIG, "message too big")
                if opcode == OP_PING:
                    self.connection.sendall(encode_frame(OP_PONG, payload, mask=False))
                elif opcode == OP_PONG:
                    pong_due = None
                elif opcode == OP_CLOSE:
                    return self._ws_close(_CLOSE_NORMAL, "")
                elif opcode == OP_BINARY or (opcode == OP_CONTINUATION and not parts):
                    self._ws_send(
                        _error("INVALID_JSON", "send JSON in text frames (binary frames are not read)")
                    )
                    return self._ws_close(_CLOSE_UNSUPPORTED, "text frames only")
                elif opcode in (OP_TEXT, OP_CONTINUATION):
                    if opcode == OP_TEXT and parts:
                        return self._ws_close(_CLOSE_PROTOCOL, "a fragmented message broke the frame order")
                    parts.append(payload)
                    size += len(payload)
                    if final:
                        reply = server.message_reply(session, b"".join(parts))
                        parts, size = [], 0
                        if reply is None:
                            return self._ws_close(_CLOSE_NORMAL, "")
                        self._ws_send(reply)

        def _ws_readable(self, wait: float) -> bool:
            if self._buffer:
                return True
            return bool(select.select([self.connection], [], [], wait)[0])

        def _ws_read(self, count: int) -> bytes:
            while len(self._buffer) < count:
                data = self.connection.recv(65_536)
                if not data:
                    raise ConnectionError("the client closed the connection")
                self._buffer += data
            data = bytes(self._buffer[:count])
            del self._buffer[:count]
            return data

        def _ws_send(self, message: dict[str, Any]) -> None:
            self.connection.sendall(encode_frame(OP_TEXT, json.dumps(message).encode(), mask=False))

        def _ws_close(self, code: int, reason: str) -> None:
            with contextlib.suppress(OSError):
                self.connection.sendall(
                    encode_frame(OP_CLOSE, struct.pack("!H", code) + reason.encode(), mask=False)
                )

    return Handler
