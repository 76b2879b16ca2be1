"""A client for an OpenAI-compatible chat-completions server (vLLM, SGLang, a hosted API), stdlib only.

``ChatEndpoint.complete`` POSTs ``{base}/v1/chat/completions`` with the served model's name, the messages,
the sampling settings (temperature, top_p, max_tokens, seed, stop; n = 1) and the tools, and returns the
first choice's text, tool calls, finish reason and token counts (``usage``). The API key goes in an
``Authorization: Bearer`` header and nowhere else: no error message or ``repr`` shows it.

Failures fall in three kinds, so a benchmark can tell a server's trouble from the model's:

- transient (a connection error, a timeout, HTTP 429 or 5xx, a reply that is not a completion): retried
  with exponential backoff and jitter (HTTP 429 and 503 after their ``Retry-After`` when they give one);
  once the retries are spent, :class:`EndpointUnavailable`;
- a conversation longer than the model's context (HTTP 400 saying so): :class:`ContextLengthExceeded`,
  the end of the episode, as the local rollout ends one at ``max_context_tokens``;
- any other HTTP 4xx (a wrong model name, a refused key, a malformed request): :class:`EndpointSetupError`,
  which no retry fixes; it lists the server's models (``GET /v1/models``) when it can.
"""

from __future__ import annotations

import http.client
import json
import random
import re
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

# Where the API key is read from by default, in order (OPENAI_API_KEY: what OpenAI's own clients read).
API_KEY_ENVS = ("FRESHRL_API_KEY", "OPENAI_API_KEY")
# Server error text shown in an exception is cut to this many characters.
ECHO_CHARS = 300
# A Retry-After longer than this is waited for only this long (a benchmark should not stall for hours).
MAX_RETRY_AFTER_S = 120.0
# How servers word a prompt that does not fit (vLLM: "This model's maximum context length is N tokens";
# OpenAI: code "context_length_exceeded"; SGLang: "... is longer than the model's context length").
CONTEXT_LENGTH = re.compile(r"context[ _]length|maximum context", re.IGNORECASE)


class EndpointSetupError(RuntimeError):
    """The server refused a request in a way no retry fixes (HTTP 4xx other than 429).

    ``status``: the HTTP status; ``detail``: the server's error text; ``served_models``: the model names
    ``GET /v1/models`` lists (empty when it could not be read)."""

    def __init__(self, status: int, detail: str, served_models: Sequence[str] = ()):
        self.status, self.detail, self.served_models = status, detail, tuple(served_models)
        listed = f"; the server serves: {', '.join(self.served_models)}" if self.served_models else ""
        super().__init__(f"HTTP {status}: {detail}{listed}")


class EndpointUnavailable(RuntimeError):
    """Every attempt of a request failed transiently. ``kind`` names the last failure: ``timeout``,
    ``connection``, ``HTTP 429``, ``HTTP 5xx`` (the status) or ``bad response``."""

    def __init__(self, kind: str, attempts: int, detail: str):
        self.kind, self.attempts, self.detail = kind, attempts, detail
        super().__init__(f"{kind} after {attempts} attempt(s): {detail}")


class ContextLengthExceeded(RuntimeError):
    """The server says the conversation (with ``max_tokens``) exceeds the model's context."""


@dataclass(frozen=True)
class Sampling:
    """The sampling settings of a request (n is always 1: each episode is its own conversation)."""

    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 256
    stop: tuple[str, ...] = ()
    seed: int | None = None


@dataclass(frozen=True)
class ChatReply:
    """The first choice of a completion: its text (None when it only calls tools), its tool calls as the
    server returns them (``{"id", "type", "function": {"name", "arguments": JSON text}}``), why it ended, and
    the token counts of ``usage`` (None when the server reports none)."""

    content: str | None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str = "stop"
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


def api_base(url: str) -> str:
    """The API root ``.../v1`` of a server URL given with or without ``/v1`` (a trailing slash is fine)."""
    parts = urllib.parse.urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"an endpoint is an http(s) URL such as http://127.0.0.1:8000, got {url!r}")
    path = parts.path.rstrip("/")
    path = path if path.endswith("/v1") else f"{path}/v1"
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def public_url(url: str) -> str:
    """``url`` without user:password, query or fragment: what a report may record of it."""
    parts = urllib.parse.urlsplit(url.strip())
    host = parts.netloc.rsplit("@", 1)[-1]
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))


class ChatEndpoint:
    """A chat-completions client for one served model.

    Args:
        url: the server (``http://host:port`` or ``.../v1``).
        model: the served model's name (the request's ``model``).
        api_key: sent as ``Authorization: Bearer``; None sends no header (a local vLLM needs none).
        timeout: seconds a request may take (connecting and reading the reply).
        retries: attempts after the first for a transient failure.
        backoff: the first retry's delay in seconds; each further retry doubles it (up to ``max_backoff``),
            and the delay drawn is uniform in [d/2, d] (jitter, so clients that failed together do not
            retry together).
        sleep, rng: injectable for tests.
    """

    def __init__(
        self,
        url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 120.0,
        retries: int = 4,
        backoff: float = 1.0,
        max_backoff: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ):
        if retries < 0 or timeout <= 0:
            raise ValueError(f"retries must be >= 0 and timeout > 0, got {retries}, {timeout}")
        self.base = api_base(url)
        self.model = model
        self.timeout, self.retries = timeout, retries
        self.backoff, self.max_backoff = backoff, max_backoff
        self._api_key = api_key
        self._sleep = sleep
        self._rng = rng or random.Random()

    def __repr__(self) -> str:  # the key stays out
        return f"ChatEndpoint({self.base!r}, model={self.model!r})"

    def complete(
        self,
        messages: Sequence[dict[str, Any]],
        sampling: Sampling,
        tools: Sequence[dict[str, Any]] = (),
    ) -> ChatReply:
        """One completion of ``messages`` (retried as the class describes)."""
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": list(messages),
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "max_tokens": sampling.max_tokens,
            "n": 1,
        }
        if sampling.seed is not None:
            payload["seed"] = sampling.seed
        if sampling.stop:
            payload["stop"] = list(sampling.stop)
        if tools:
            payload["tools"] = list(tools)
        return self._with_retries(payload)

    def served_models(self) -> list[str]:
        """The model ids of ``GET /v1/models`` (one attempt; [] if it fails)."""
        try:
            status, body, _ = self._request("GET", "/models", None)
            data = json.loads(body) if status == 200 else {}
            listed = data.get("data", [])
            return [str(item["id"]) for item in listed if isinstance(item, dict) and "id" in item]
        except (OSError, ValueError, TypeError, AttributeError, http.client.HTTPException):
            return []

    def _with_retries(self, payload: dict[str, Any]) -> ChatReply:
        attempts = self.retries + 1
        for attempt in range(attempts):
            retry_after = None
            try:
                status, body, headers = self._request("POST", "/chat/completions", payload)
            except TimeoutError as error:
                kind, detail = "timeout", f"no reply within {self.timeout:g} s ({error})"
            except (OSError, http.client.HTTPException) as error:
                kind, detail = "connection", f"{type(error).__name__}: {error}"
            else:
                if 200 <= status < 300:
                    reply = parse_reply(body)
                    if reply is not None:
                        return reply
                    kind, detail = "bad response", f"not a chat completion: {body[:ECHO_CHARS]!r}"
                elif status == 429 or status >= 500:
                    kind, detail = f"HTTP {status}", error_text(body)
                    retry_after = parse_retry_after(headers.get("Retry-After"))
                elif status == 400 and CONTEXT_LENGTH.search(body):
                    raise ContextLengthExceeded(error_text(body))
                else:
                    raise EndpointSetupError(status, error_text(body), self.served_models())
            if attempt + 1 == attempts:
                raise EndpointUnavailable(kind, attempts, detail)
            delay = min(self.max_backoff, self.backoff * 2**attempt)
            delay = delay * (0.5 + 0.5 * self._rng.random())
            self._sleep(min(MAX_RETRY_AFTER_S, retry_after) if retry_after is not None else delay)
        raise AssertionError("unreachable")

    def _request(self, method: str, path: str, payload: dict[str, Any] | None) -> tuple[int, str, Any]:
        """(status, body text, headers) of one HTTP exchange; an HTTP error status is returned, not
        raised; connection failures and timeouts raise."""
        headers = {"Accept": "application/json"}
        data = None
        if payload is not None:
            data = json.dumps(payload).encode()
            headers["Content-Type"] = "application/json"
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        request = urllib.request.Request(self.base + path, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return response.status, response.read().decode("utf-8", "replace"), response.headers
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode("utf-8", "replace"), error.headers
        except urllib.error.URLError as error:
            # urllib wraps a connect timeout; a read timeout arrives bare (socket.timeout is TimeoutError).
            if isinstance(error.reason, TimeoutError | socket.timeout):
                raise TimeoutError(str(error.reason)) from None
            raise


def parse_reply(body: str) -> ChatReply | None:
    """The first choice of a chat-completion body; None if the body is not one."""
    try:
        data = json.loads(body)
        choice = data["choices"][0]
        message = choice["message"]
    except (ValueError, KeyError, IndexError, TypeError):
        return None
    if not isinstance(message, dict):
        return None
    usage = data.get("usage") or {}
    content = message.get("content")
    return ChatReply(
        content=content if isinstance(content, str) else None,
        tool_calls=[call for call in message.get("tool_calls") or [] if isinstance(call, dict)],
        finish_reason=str(choice.get("finish_reason") or "stop"),
        prompt_tokens=_count(usage.get("prompt_tokens")),
        completion_tokens=_count(usage.get("completion_tokens")),
    )


def error_text(body: str) -> str:
    """The message of an error body (OpenAI's ``{"error": {"message"}}``, FastAPI's ``{"detail"}``, or the
    text itself), cut to :data:`ECHO_CHARS`."""
    try:
        data = json.loads(body)
    except ValueError:
        return body.strip()[:ECHO_CHARS] or "(empty body)"
    if isinstance(data, dict):
        error = data.get("error", data)
        if isinstance(error, dict):
            error = error.get("message") or error.get("detail") or error
        return str(error)[:ECHO_CHARS]
    return str(data)[:ECHO_CHARS]


def parse_retry_after(value: str | None) -> float | None:
    """Seconds of a ``Retry-After`` header given in seconds (an HTTP date is not honoured: None)."""
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
