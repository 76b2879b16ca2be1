"""A guess-the-number env served with OpenEnv's routes and JSON shapes (openenv-core 0.3.0, as described in
envs/ecosystem/openenv_protocol.py), on the standard library's http.server, with faults to inject.

``POST /reset`` and ``POST /step`` play one env kept across requests (as OpenEnv servers before 0.2 did);
``GET /ws`` upgrades to a WebSocket session with an env of its own, as 0.3.0's ``/ws`` does. The action is
``{"message": str}`` (plus OpenEnv's optional ``metadata``); anything else is refused as OpenEnv's pydantic
validation refuses it (HTTP 422, WebSocket ``VALIDATION_ERROR``).
"""

from __future__ import annotations

import contextlib
import json
import random
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from envs.ecosystem.websocket import OP_CLOSE, OP_PING, OP_PONG, OP_TEXT, accept_key, encode_frame, read_frame

# What ``fault`` makes the server do with the next reset or step: answer HTTP 500 / a WebSocket
# EXECUTION_ERROR, answer text that is not JSON, answer JSON of the wrong shape, or never answer in time.
FAULTS = ("error", "garbage", "bad_shape", "hang")
HANG_SECONDS = 10.0


class GuessNumber:
    """Guess a number from 1 to 100 chosen by the reset seed; "Higher." / "Lower." after each guess."""

    def __init__(self) -> None:
        self.secret = 0
        self.guesses = 0

    def reset(self, seed: int | None) -> dict[str, Any]:
        self.secret = random.Random(seed).randint(1, 100)
        self.guesses = 0
        text = f"Game {seed}: guess my number from 1 to 100."
        return {"observation": {"message": text, "guesses": 0}, "reward": 0.0, "done": False}

    def step(self, action: dict[str, Any]) -> dict[str, Any]:
        self.guesses += 1
        guess = action["message"].strip()
        if not guess.isascii() or not guess.isdigit():
            feedback, reward, done = "Say a number.", 0.0, False
        elif int(guess) == self.secret:
            feedback, reward, done = "Correct!", 1.0, True
        else:
            feedback, reward, done = ("Higher." if int(guess) < self.secret else "Lower."), 0.0, False
        return {"observation": {"message": feedback, "guesses": self.guesses}, "reward": reward, "done": done}


def validation_error(action: Any) -> str | None:
    """Why ``action`` does not fit the action schema ``{"message": str, "metadata"?: dict}``, or None."""
    if not isinstance(action, dict):
        return "the action must be an object"
    extra = sorted(set(action) - {"message", "metadata"})
    if extra:
        return f"extra fields not permitted: {extra}"
    if not isinstance(action.get("message"), str):
        return "message: a string is required"
    return None


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # a client that timed out and left is expected
            super().handle_error(request, client_address)


class FakeOpenEnvServer:
    """The server on 127.0.0.1 at an ephemeral port, served from a thread until :meth:`stop`."""

    def __init__(self, *, max_sessions: int = 64):
        self.max_sessions = max_sessions
        self.fault: str | None = None
        self.http_env = GuessNumber()
        self.sessions = 0
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.connections: set[socket.socket] = set()
        self.httpd = _QuietServer(("127.0.0.1", 0), _handler(self))
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    def take_fault(self) -> str | None:
        with self.lock:
            fault, self.fault = self.fault, None
        return fault

    def stop(self) -> None:
        """Stop serving and cut every open connection (a server that dies mid-episode)."""
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        with self.lock:
            for connection in self.connections:
                with contextlib.suppress(OSError):  # already closed by its client
                    connection.shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout=10)


def _handler(server: FakeOpenEnvServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # a WebSocket upgrade answers in HTTP/1.1 (RFC 6455 section 4.2.2)

        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            return None

        def setup(self) -> None:
            super().setup()
            with server.lock:
                server.connections.add(self.connection)

        def finish(self) -> None:
            with server.lock:
                server.connections.discard(self.connection)
            super().finish()

        # ---------------------------------------------------------------- HTTP routes
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            try:
                request = json.loads(body) if body else {}
            except ValueError:
                return self._send(422, {"detail": "body is not JSON"})
            if self.path == "/reset":
                return self._answer(lambda: server.http_env.reset(request.get("seed")))
            if self.path == "/step":
                error = validation_error(request.get("action"))
                if error is not None:
                    return self._send(422, {"detail": [{"loc": ["body", "action"], "msg": error}]})
                return self._answer(lambda: server.http_env.step(request["action"]))
            return self._send(404, {"detail": "Not Found"})

        def _answer(self, play) -> None:
            fault = server.take_fault()
            if fault == "hang":
                server.stopping.wait(HANG_SECONDS)
            if fault == "error":
                return self._send(500, {"detail": "Internal Server Error"})
            if fault == "garbage":
                return self._send_bytes(200, b"<html>502 Bad Gateway</html>")
            reply = play()
            return self._send(200, {**reply, "reward": "lots"} if fault == "bad_shape" else reply)

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            self._send_bytes(status, json.dumps(payload).encode())

        def _send_bytes(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        # ---------------------------------------------------------------- WebSocket session
        def do_GET(self) -> None:
            if self.path != "/ws" or self.headers.get("Upgrade", "").lower() != "websocket":
                return self._send(404, {"detail": "Not Found"})
            self.send_response(101, "Switching Protocols")
            self.send_header("Upgrade", "websocket")
            self.send_header("Connection", "Upgrade")
            self.send_header("Sec-WebSocket-Accept", accept_key(self.headers["Sec-WebSocket-Key"]))
            self.end_headers()
            self.close_connection = True
            with server.lock:
                full = server.sessions >= server.max_sessions
                server.sessions += not full
            if full:
                message = f"Server at capacity ({server.max_sessions}/{server.max_sessions} sessions)"
                return self._ws_send(
                    {"type": "error", "data": {"message": message, "code": "CAPACITY_REACHED"}}
                )
            try:
                self._ws_session(GuessNumber())
            except (ConnectionError, OSError):
                pass  # the client went away
            finally:
                with server.lock:
                    server.sessions -= 1

        def _ws_session(self, env: GuessNumber) -> None:
            while True:
                final, opcode, payload = read_frame(self._read_exact, 2**24)
                if opcode == OP_CLOSE:
                    self.wfile.write(encode_frame(OP_CLOSE, payload[:2], mask=False))
                    return
                if opcode == OP_PING:
                    self.wfile.write(encode_frame(OP_PONG, payload, mask=False))
                    continue
                if opcode != OP_TEXT or not final:
                    continue  # the client under test sends whole text frames only
                try:
                    message = json.loads(payload.decode("utf-8", "surrogatepass"))
                except ValueError as exc:
                    self._ws_send(
                        {"type": "error", "data": {"message": f"Invalid JSON: {exc}", "code": "INVALID_JSON"}}
                    )
                    continue
                if message.get("type") == "close":
                    return
                self._ws_reply(env, message)

        def _ws_reply(self, env: GuessNumber, message: dict[str, Any]) -> None:
            kind, data = message.get("type"), message.get("data", {})
            if kind == "step" and validation_error(data) is not None:
                error = {
                    "message": "Invalid message",
                    "code": "VALIDATION_ERROR",
                    "errors": [validation_error(data)],
                }
                return self._ws_send({"type": "error", "data": error})
            if kind not in ("reset", "step"):
                error = {"message": f"Unknown message type: {kind}", "code": "UNKNOWN_TYPE"}
                return self._ws_send({"type": "error", "data": error})
            fault = server.take_fault()
            if fault == "hang":
                server.stopping.wait(HANG_SECONDS)
            if fault == "error":
                error = {"message": "env.step raised ValueError", "code": "EXECUTION_ERROR"}
                return self._ws_send({"type": "error", "data": error})
            if fault == "garbage":
                self.wfile.write(encode_frame(OP_TEXT, b"Traceback (most recent call last):", mask=False))
                return None
            reply = env.reset(data.get("seed")) if kind == "reset" else env.step(data)
            if fault == "bad_shape":
                reply = {**reply, "done": "maybe"}
            return self._ws_send({"type": "observation", "data": reply})

        def _ws_send(self, message: dict[str, Any]) -> None:
            self.wfile.write(encode_frame(OP_TEXT, json.dumps(message).encode(), mask=False))

        def _read_exact(self, count: int) -> bytes:
            data = self.rfile.read(count)
            if len(data) < count:
                raise ConnectionError("the client closed the connection")
            return data

    return Handler
