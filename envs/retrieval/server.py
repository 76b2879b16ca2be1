"""A Search-R1-compatible retrieval server over a saved BM25 index (stdlib ``http.server``, one thread per
request), so envs on other machines can search it through ``HTTPRetriever``::

    python -m envs.retrieval.server --index indexes/wiki-bm25 --port 8000

``POST /retrieve`` with ``{"queries": ["..."], "topk": 3, "return_scores": true}`` answers ``{"result":
[[{"document": {"id": ..., "contents": ...}, "score": ...}, ...], ...]}`` (bare documents without
``return_scores``). ``GET /health`` answers ``{"status": "ok", "passages": N}``. A query string is ignored
(``/retrieve?x=1`` is ``/retrieve``). A malformed request gets a 4xx status and ``{"error": "..."}``: 400 bad
JSON (nested too deeply included) or fields, or a body shorter than its Content-Length; 404 unknown path;
405 wrong method (PUT, DELETE, HEAD, PATCH, OPTIONS, or GET/POST on the other path; HEAD gets the headers
only); 408 a body that does not arrive within ``request_timeout_s``; 411 no Content-Length; 413 body too
large. The timeout also bounds each read of the request line and headers, so a client that stops sending
cannot hold a thread.
"""

from __future__ import annotations

import argparse
import json
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from envs.retrieval.base import Retriever
from envs.retrieval.bm25 import BM25Retriever

MAX_TOPK = 100
MAX_QUERIES = 1024
MAX_BODY_BYTES = 4 * 1024 * 1024
DEFAULT_TOPK = 3
# Time a client gets to send its request body, and for each read of its request line and headers. A body of
# at most MAX_BODY_BYTES arrives in a few seconds even at 1 MB/s; a client that stalls longer is dropped.
DEFAULT_REQUEST_TIMEOUT_S = 30.0
# The method each path answers; any other method on it is a 405.
ROUTES = {"/retrieve": "POST", "/health": "GET"}


class BadRequest(Exception):
    """A request the server refuses, with its HTTP status."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def parse_request(body: bytes) -> tuple[list[str], int, bool]:
    """``(queries, topk, return_scores)`` of a ``/retrieve`` body; raises :class:`BadRequest` (400)."""
    try:
        payload = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BadRequest(400, f"body is not valid JSON: {exc}") from exc
    except RecursionError as exc:  # the decoder recurses once per nesting level
        raise BadRequest(400, "body is nested too deeply to be a /retrieve request") from exc
    if not isinstance(payload, dict):
        raise BadRequest(400, "body must be a JSON object")
    queries = payload.get("queries")
    if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
        raise BadRequest(400, "'queries' must be a list of strings")
    if len(queries) > MAX_QUERIES:
        raise BadRequest(400, f"at most {MAX_QUERIES} queries per request, got {len(queries)}")
    topk = payload.get("topk", DEFAULT_TOPK)
    if isinstance(topk, bool) or not isinstance(topk, int) or not 1 <= topk <= MAX_TOPK:
        raise BadRequest(400, f"'topk' must be an integer in [1, {MAX_TOPK}]")
    return_scores = payload.get("return_scores", False)
    if not isinstance(return_scores, bool):
        raise BadRequest(400, "'return_scores' must be true or false")
    return queries, topk, return_scores


class _Handler(BaseHTTPRequestHandler):
    server: RetrievalServer

    def setup(self) -> None:
        self.timeout = self.server.request_timeout_s  # applied to the socket by StreamRequestHandler.setup
        super().setup()

    def do_POST(self) -> None:
        try:
            self._route("POST")
            queries, topk, return_scores = parse_request(self._body())
        except BadRequest as exc:
            self._refuse(exc)
            return
        try:
            ranked = self.server.retriever.search(queries, topk)
        except Exception as exc:  # the retriever failed, not the request: report it and keep serving
            self._reply(500, {"error": f"retrieval failed: {type(exc).__name__}: {exc}"})
            return
        if return_scores:
            result = [[{"document": p.document(), "score": p.score} for p in passages] for passages in ranked]
        else:
            result = [[p.document() for p in passages] for passages in ranked]
        self._reply(200, {"result": result})

    def do_GET(self) -> None:
        try:
            self._route("GET")
        except BadRequest as exc:
            self._refuse(exc)
            return
        self._reply(200, {"status": "ok", "passages": self.server.passage_count})

    def _refuse(self, exc: BadRequest) -> None:
        allow = ROUTES.get(self._path()) if exc.status == 405 else None
        self._reply(exc.status, {"error": str(exc)}, allow=allow)

    def _wrong_method(self) -> None:
        path = self._path()
        if path in ROUTES:
            error = f"{self.command} is not allowed on {path}; use {ROUTES[path]}"
            self._reply(405, {"error": error}, allow=ROUTES[path])
        else:
            self._reply(404, {"error": f"unknown path {path!r}; POST to /retrieve"})

    do_PUT = do_DELETE = do_HEAD = do_PATCH = do_OPTIONS = _wrong_method

    def _path(self) -> str:
        return urllib.parse.urlsplit(self.path).path

    def _route(self, method: str) -> None:
        path = self._path()
        if path not in ROUTES:
            raise BadRequest(404, f"unknown path {path!r}; POST to /retrieve")
        if ROUTES[path] != method:
            raise BadRequest(405, f"{method} is not allowed on {path}; use {ROUTES[path]}")

    def _body(self) -> bytes:
        length = self.headers.get("Content-Length")
        if length is None:
            raise BadRequest(411, "Content-Length is required")
        try:
            size = int(length)
        except ValueError as exc:
            raise BadRequest(400, f"bad Content-Length {length!r}") from exc
        if size < 0:
            raise BadRequest(400, f"bad Content-Length {length!r}")
        if size > MAX_BODY_BYTES:
            raise BadRequest(413, f"body over {MAX_BODY_BYTES} bytes")
        return self._read_exactly(size)

    def _read_exactly(self, size: int) -> bytes:
        """``size`` body bytes, all within ``request_timeout_s`` (a deadline, not a bound per read)."""
        deadline = time.monotonic() + self.server.request_timeout_s
        chunks, received = [], 0
        while received < size:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BadRequest(408, f"body not received within {self.server.request_timeout_s} s")
            self.connection.settimeout(remaining)
            try:
                chunk = self.rfile.read1(size - received)
            except TimeoutError as exc:
                raise BadRequest(408, f"body not received within {self.server.request_timeout_s} s") from exc
            if not chunk:
                raise BadRequest(400, f"body ended after {received} of {size} bytes (Content-Length)")
            chunks.append(chunk)
            received += len(chunk)
        return b"".join(chunks)

    def _reply(self, status: int, payload: dict[str, Any], *, allow: str | None = None) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if allow:
            self.send_header("Allow", allow)
        if status >= 400:  # the request body may be unread; do not try to reuse the connection
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if self.command != "HEAD":  # a reply to HEAD has the headers of the reply, not its body
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.verbose:
            super().log_message(format, *args)


class RetrievalServer(ThreadingHTTPServer):
    """A threading HTTP server answering ``/retrieve`` from ``retriever``; ``port=0`` picks a free port.

    ``request_timeout_s`` bounds how long a client may take to send its body, and each read of its request
    line and headers.
    """

    daemon_threads = True

    def __init__(
        self,
        retriever: Retriever,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        verbose: bool = False,
        request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
    ):
        if isinstance(request_timeout_s, bool) or not isinstance(request_timeout_s, int | float):
            raise ValueError(f"request_timeout_s must be a number of seconds > 0, got {request_timeout_s!r}")
        if not 0 < request_timeout_s < float("inf"):
            raise ValueError(f"request_timeout_s must be a number of seconds > 0, got {request_timeout_s!r}")
        super().__init__((host, port), _Handler)
        self.retriever = retriever
        self.verbose = verbose
        self.request_timeout_s = float(request_timeout_s)
        self.passage_count = len(retriever) if hasattr(retriever, "__len__") else None

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/retrieve"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve a BM25 index over Search-R1's /retrieve protocol.")
    parser.add_argument("--index", required=True, help="directory written by BM25Retriever.save")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--mmap", action="store_true", help="memory-map the index instead of loading it")
    parser.add_argument("--backend", default="numpy", choices=("numpy", "numba"))
    parser.add_argument("--verbose", action="store_true", help="log every request")
    parser.add_argument(
        "--request-timeout-s",
        type=float,
        default=DEFAULT_REQUEST_TIMEOUT_S,
        help="seconds a client gets to send its body (and for each read of its headers)",
    )
    args = parser.parse_args(argv)
    retriever = BM25Retriever.load(args.index, mmap=args.mmap, backend=args.backend)
    server = RetrievalServer(
        retriever, args.host, args.port, verbose=args.verbose, request_timeout_s=args.request_timeout_s
    )
    print(f"serving {len(retriever)} passages at {server.url}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
