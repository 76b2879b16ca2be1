"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1 for the endpoint tests (stdlib only).

``OpenAIStub(answer)`` serves ``POST /v1/chat/completions`` and ``GET /v1/models`` in a thread. ``answer``
gets the request body and its headers and returns ``(status, body dict, extra headers)``; the stub records
every request (``requests``: path, headers, body) so a test can read what was sent.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = Callable[[dict[str, Any], dict[str, str]], tuple[int, dict[str, Any], dict[str, str]]]


def completion(
    content: str | None, tool_calls: list[dict[str, Any]] | None = None, completion_tokens: int = 5
) -> dict[str, Any]:
    """A chat-completion body of one choice."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "cmpl-stub",
        "object": "chat.completion",
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}
        ],
        "usage": {
            "prompt_tokens": 20,
            "completion_tokens": completion_tokens,
            "total_tokens": 20 + completion_tokens,
        },
    }


class OpenAIStub:
    def __init__(self, answer: Answer, models: tuple[str, ...] = ("stub-model",)):
        self.answer = answer
        self.models = models
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()  # guards requests: the handler threads append to it
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep the test output clean
                pass

            def _send(self, status: int, body: dict[str, Any], headers: dict[str, str]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                with stub.lock:
                    stub.requests.append({"path": self.path, "headers": dict(self.headers), "body": None})
                listed = [{"id": name, "object": "model"} for name in stub.models]
                self._send(200, {"object": "list", "data": listed}, {})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with stub.lock:
                    stub.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                self._send(*stub.answer(body, dict(self.headers)))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)

    def __enter__(self) -> OpenAIStub:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def completions(self) -> list[dict[str, Any]]:
        """The chat-completion request bodies, in arrival order."""
        return [r["body"] for r in self.requests if r["path"].endswith("/chat/completions")]
