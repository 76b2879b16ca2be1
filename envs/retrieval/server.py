"""A Search-R1-compatible retrieval server over a saved BM25 index (stdlib ``http.server``, one thread per
request), so envs on other machines can search it through ``HTTPRetriever``::

    python -m envs.retrieval.server --index indexes/wiki-bm25 --port 8000

``POST /retrieve`` with ``{"queries": ["..."], "topk": 3, "return_scores": true}`` answers ``{"result":
[[{"document": {"id": ..., "contents": ...}, "score": ...}, ...], ...]}`` (bare documents without
``return_scores``). ``GET /health`` answers ``{"status": "ok", "passages": N}``. A malformed request gets a
4xx status and ``{"error": "..."}``: 400 bad JSON or fields, 404 unknown path, 405 wrong method, 411 no
Content-Length, 413 body too large.
"""

from __future__ import annotations

import argparse
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from envs.retrieval.base import Retriever
from envs.retrieval.bm25 import BM25Retriever

MAX_TOPK = 100
MAX_QUERIES = 1024
MAX_BODY_BYTES = 4 * 1024 * 1024
DEFAULT_TOPK = 3


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

    def do_POST(self) -> None:
        try:
            if self.path != "/retrieve":
                raise BadRequest(404, f"unknown path {self.path!r}; POST to /retrieve")
            queries, topk, return_scores = parse_request(self._body())
        except BadRequest as exc:
            self._reply(exc.status, {"error": str(exc)})
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
        if self.path == "/health":
            self._reply(200, {"status": "ok", "passages": self.server.passage_count})
        elif self.path == "/retrieve":
            self._reply(405, {"error": "use POST for /retrieve"}, allow="POST")
        else:
            self._reply(404, {"error": f"unknown path {self.path!r}"})

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
        return self.rfile.read(size)

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
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.verbose:
            super().log_message(format, *args)


class RetrievalServer(ThreadingHTTPServer):
    """A threading HTTP server answering ``/retrieve`` from ``retriever``; ``port=0`` picks a free port."""

    daemon_threads = True

    def __init__(
        self, retriever: Retriever, host: str = "127.0.0.1", port: int = 0, *, verbose: bool = False
    ):
        super().__init__((host, port), _Handler)
        self.retriever = retriever
        self.verbose = verbose
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
    args = parser.parse_args(argv)
    retriever = BM25Retriever.load(args.index, mmap=args.mmap, backend=args.backend)
    server = RetrievalServer(retriever, args.host, args.port, verbose=args.verbose)
    print(f"serving {len(retriever)} passages at {server.url}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
