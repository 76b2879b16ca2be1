"""A client for a Search-R1-compatible retrieval server (``POST /retrieve``).

Request: ``{"queries": [...], "topk": k, "return_scores": true}``. Reply: ``{"result": [[{"document":
{"id": ..., "contents": ...}, "score": ...}, ...], ...]}``, one list per query; servers asked without scores
return bare documents, which this client also reads. Search-R1's e5 + Wikipedia server and
``envs.retrieval.server`` both speak it.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from envs.retrieval.base import Passage, RetrievalError


def endpoint(url: str) -> str:
    """``url`` with the path ``/retrieve`` when it names only a server (``http://host:port``)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"not an http(s) URL: {url!r}")
    if parts.path in ("", "/"):
        parts = parts._replace(path="/retrieve")
    return urllib.parse.urlunsplit(parts)


class HTTPRetriever:
    """Search through a remote retriever.

    Args:
        url: the server (``http://127.0.0.1:8000``) or its endpoint (``.../retrieve``).
        timeout_s: per request.
        retries: further attempts after a connection failure or a 5xx reply, with doubling waits from
            ``backoff_s``; a 4xx reply (a bad request) is not retried.
    """

    def __init__(self, url: str, *, timeout_s: float = 30.0, retries: int = 2, backoff_s: float = 0.5):
        self.url = endpoint(url)
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s

    def search(self, queries: list[str], topk: int) -> list[list[Passage]]:
        """Up to ``topk`` passages per query, as the server ranks them. Raises :class:`RetrievalError`."""
        queries = [str(q) for q in queries]
        if not queries:
            return []
        reply = self._post({"queries": queries, "topk": int(topk), "return_scores": True})
        result = reply.get("result") if isinstance(reply, dict) else None
        if not isinstance(result, list) or len(result) != len(queries):
            expected = f"'result' with {len(queries)} lists"
            raise RetrievalError(f"{self.url}: expected {expected}, got {reply!r:.300}")
        return [[_passage(item) for item in ranked] for ranked in result]

    def _post(self, payload: dict[str, Any]) -> Any:
        body = json.dumps(payload).encode()
        request = urllib.request.Request(
            self.url, data=body, headers={"Content-Type": "application/json"}, method="POST"
        )
        failure = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                    return json.loads(response.read())
            except urllib.error.HTTPError as exc:  # before URLError, its base class
                failure = f"HTTP {exc.code}: {exc.read().decode(errors='replace')[:300]}"
                if exc.code < 500:
                    raise RetrievalError(f"{self.url}: {failure}") from exc
            except (urllib.error.URLError, OSError, json.JSONDecodeError) as exc:
                failure = str(exc)
        raise RetrievalError(f"{self.url}: {failure} (after {self.retries + 1} attempts)")


def _passage(item: Any) -> Passage:
    if not isinstance(item, dict):
        raise RetrievalError(f"expected a document object, got {item!r:.200}")
    document, score = (item["document"], item.get("score")) if "document" in item else (item, None)
    try:
        return Passage.from_document(document, score=None if score is None else float(score))
    except (ValueError, TypeError) as exc:
        raise RetrievalError(str(exc)) from exc
