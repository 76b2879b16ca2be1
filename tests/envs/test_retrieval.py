"""Retrieval: passages, corpus files, the BM25 index (build, save, load, recall on the synthetic world), and
the Search-R1-compatible HTTP server and client."""

from __future__ import annotations

import http.client
import json
import select
import socket
import subprocess
import sys
import threading
import urllib.request
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from envs.retrieval import Passage, RetrievalError, Retriever
from envs.retrieval.bm25 import BM25Retriever
from envs.retrieval.bm25 import main as build_index_cli
from envs.retrieval.corpus import read_corpus
from envs.retrieval.http_client import HTTPRetriever, endpoint
from envs.retrieval.server import RetrievalServer
from envs.search_data import make_world

CORPUS = [
    Passage('"Cat"\nThe cat sat on the mat in the kitchen.', id="0"),
    Passage('"Dog"\nA dog barked at the mailman all morning.', id="1"),
    Passage('"Bird"\nBirds fly high over the mat and the garden.', id="2"),
    Passage("A passage without a title about gardens.", id="3"),
]


@pytest.fixture(scope="module")
def bm25() -> BM25Retriever:
    return BM25Retriever.build(CORPUS)


@contextmanager
def serving(retriever, **kwargs):
    server = RetrievalServer(retriever, **kwargs)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


# --------------------------------------------------------------------------------------- passages and corpus


def test_passage_title_and_text():
    assert (CORPUS[0].title, CORPUS[0].text) == ("Cat", "The cat sat on the mat in the kitchen.")
    assert (CORPUS[3].title, CORPUS[3].text) == ("", "A passage without a title about gardens.")
    assert Passage.from_document({"id": 7, "title": "T", "text": "body"}) == Passage('"T"\nbody', id="7")
    assert Passage.from_document({"contents": "x"}, score=1.5) == Passage("x", id="", score=1.5)
    with pytest.raises(ValueError):
        Passage.from_document({"body": "x"})


def test_read_corpus(tmp_path):
    path = tmp_path / "wiki-18.jsonl"
    rows = [
        {"id": "12", "contents": '"Paris"\nParis is the capital of France.'},
        {"title": "Rome", "text": "Rome is the capital of Italy."},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    passages = list(read_corpus(path))
    assert [p.id for p in passages] == ["12", "1"]
    assert [p.title for p in passages] == ["Paris", "Rome"]
    assert passages[1].text == "Rome is the capital of Italy."


# --------------------------------------------------------------------------------------- BM25


def test_bm25_is_a_retriever_and_ranks_by_score(bm25):
    assert isinstance(bm25, Retriever) and len(bm25) == 4
    (ranked,) = bm25.search(["cat on the mat"], 3)
    assert [p.id for p in ranked] == ["0", "2"]  # the dog passage shares no term and is left out
    assert ranked[0].score > ranked[1].score > 0


def test_bm25_edge_queries(bm25):
    results = bm25.search(["", "the of and", "zzzz", "garden gardens", "mat"], 10)
    assert results[:3] == [[], [], []]
    assert {p.id for p in results[3]} == {"2", "3"}
    assert len(results[4]) == 2  # topk above the corpus size is fine
    assert bm25.search([], 3) == []
    with pytest.raises(ValueError):
        bm25.search(["cat"], 0)


@pytest.mark.parametrize("mmap", [False, True])
def test_bm25_save_and_load(tmp_path, bm25, mmap):
    bm25.save(tmp_path / "index")
    loaded = BM25Retriever.load(tmp_path / "index", mmap=mmap)
    queries = ["cat mat", "dog mailman", "gardens", "birds garden"]
    assert loaded.search(queries, 3) == bm25.search(queries, 3)
    with pytest.raises(FileNotFoundError):
        BM25Retriever.load(tmp_path / "missing")


def test_build_cli(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("\n".join(json.dumps(p.document()) for p in CORPUS) + "\n")
    build_index_cli(["--corpus", str(corpus), "--out", str(tmp_path / "index")])
    assert BM25Retriever.load(tmp_path / "index").search(["dog"], 1)[0][0].id == "1"


def test_recall_on_the_synthetic_world():
    """How often BM25 puts the gold passage in the top k, with the question itself as the query and with
    the oracle's query (both hops of two-hop questions)."""
    world = make_world(0)
    retriever = BM25Retriever.build(world.passages)
    questions = [q for split in world.questions.values() for q in split]
    first_hop = [(q.question, q.gold_passage_ids[0]) for q in questions]
    oracle = [
        (query, gold)
        for q in questions
        for query, gold in zip(q.oracle_queries, q.gold_passage_ids, strict=True)
    ]

    def recall(pairs, k):
        ranked = retriever.search([query for query, _ in pairs], k)
        return sum(gold in [p.id for p in top] for (_, gold), top in zip(pairs, ranked, strict=True)) / len(
            pairs
        )

    rates = {
        "question top-1": recall(first_hop, 1),
        "question top-3": recall(first_hop, 3),
        "oracle top-1": recall(oracle, 1),
        "oracle top-3": recall(oracle, 3),
    }
    print(f"\nBM25 recall over {len(questions)} synthetic questions ({len(oracle)} oracle searches):", rates)
    assert rates["question top-3"] >= 0.95
    assert rates["oracle top-1"] >= 0.95
    assert rates["oracle top-3"] >= 0.99
    # Distractors make the first hit wrong for a share of questions asked as written.
    assert rates["question top-1"] < rates["oracle top-1"]


# --------------------------------------------------------------------------------------- HTTP


def test_endpoint():
    assert endpoint("http://127.0.0.1:8000") == "http://127.0.0.1:8000/retrieve"
    assert endpoint("http://h:1/") == "http://h:1/retrieve"
    assert endpoint("http://h:1/api/retrieve") == "http://h:1/api/retrieve"
    with pytest.raises(ValueError):
        endpoint("127.0.0.1:8000")


def test_server_and_client_round_trip(bm25):
    with serving(bm25) as server:
        client = HTTPRetriever(server.url)
        assert isinstance(client, Retriever)
        queries = ["cat mat", "dog", "the", "garden birds"]
        assert client.search(queries, 2) == bm25.search(queries, 2)
        assert client.search([], 3) == []
        with urllib.request.urlopen(server.url.replace("/retrieve", "/health")) as response:
            assert json.loads(response.read()) == {"status": "ok", "passages": 4}


def test_server_speaks_search_r1_protocol(bm25):
    with serving(bm25) as server:
        for return_scores in (True, False):
            body = json.dumps({"queries": ["dog"], "topk": 1, "return_scores": return_scores}).encode()
            request = urllib.request.Request(
                server.url, data=body, headers={"Content-Type": "application/json"}
            )
            with urllib.request.urlopen(request) as response:
                result = json.loads(response.read())["result"]
            document = {"id": "1", "contents": CORPUS[1].contents}
            if return_scores:
                assert result[0][0]["document"] == document and result[0][0]["score"] > 0
            else:
                assert result == [[document]]


def _raw_post(url: str, body: bytes | None, *, method: str = "POST", length: str | None = "auto"):
    parts = urllib.request.urlparse(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    connection.putrequest(method, parts.path)
    if length == "auto" and body is not None:
        connection.putheader("Content-Length", str(len(body)))
    elif length not in (None, "auto"):
        connection.putheader("Content-Length", length)
    connection.endheaders()
    if body:
        connection.send(body)
    response = connection.getresponse()
    status, payload = response.status, json.loads(response.read())
    connection.close()
    return status, payload


BAD_REQUESTS = [
    ("not json", b"{queries:", "auto", 400),
    ("not an object", b"[1, 2]", "auto", 400),
    ("no queries", b'{"topk": 3}', "auto", 400),
    ("queries not strings", b'{"queries": [1, 2]}', "auto", 400),
    ("queries a string", b'{"queries": "cat"}', "auto", 400),
    ("topk zero", b'{"queries": ["cat"], "topk": 0}', "auto", 400),
    ("topk huge", b'{"queries": ["cat"], "topk": 100000}', "auto", 400),
    ("topk a string", b'{"queries": ["cat"], "topk": "3"}', "auto", 400),
    ("topk a bool", b'{"queries": ["cat"], "topk": true}', "auto", 400),
    ("return_scores a string", b'{"queries": ["cat"], "return_scores": "yes"}', "auto", 400),
    ("bad utf-8", b'{"queries": ["\xff\xfe"]}', "auto", 400),
    ("no content length", None, None, 411),
    ("bad content length", b"", "abc", 400),
    ("body too large", b"", str(10**9), 413),
    ("nested too deeply", b"[" * 200_000 + b"]" * 200_000, "auto", 400),
    ("queries nested too deeply", b'{"queries": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "auto", 400),
]


@pytest.mark.parametrize(("name", "body", "length", "status"), BAD_REQUESTS, ids=[r[0] for r in BAD_REQUESTS])
def test_bad_requests_get_4xx_with_a_json_message(bm25, name, body, length, status):
    with serving(bm25) as server:
        got, payload = _raw_post(server.url, body, length=length)
        assert got == status and isinstance(payload["error"], str) and payload["error"]


def test_wrong_path_and_method(bm25):
    with serving(bm25) as server:
        base = server.url.removesuffix("/retrieve")
        assert _raw_post(base + "/search", b'{"queries": []}')[0] == 404
        assert _raw_post(server.url, None, method="GET", length=None)[0] == 405
        assert _raw_post(base + "/nothing", None, method="GET", length=None)[0] == 404


@pytest.mark.parametrize("method", ["PUT", "DELETE", "PATCH", "OPTIONS"])
def test_other_methods_get_the_json_405(bm25, method):
    with serving(bm25) as server:
        base = server.url.removesuffix("/retrieve")
        status, payload = _raw_post(server.url, b'{"queries": ["cat"]}', method=method)
        assert status == 405 and method in payload["error"] and "POST" in payload["error"]
        assert _raw_post(base + "/health", None, method=method, length=None)[0] == 405
        assert _raw_post(base + "/nothing", None, method=method, length=None)[0] == 404


def test_head_gets_the_405_headers_without_a_body(bm25):
    with serving(bm25) as server:
        parts = urllib.request.urlparse(server.url)
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
        connection.request("HEAD", "/retrieve")
        response = connection.getresponse()
        assert response.status == 405 and response.getheader("Allow") == "POST"
        assert response.getheader("Content-Type") == "application/json" and response.read() == b""
        connection.close()


def test_a_path_is_the_same_with_a_query_string(bm25):
    with serving(bm25) as server:
        base = server.url.removesuffix("/retrieve")
        status, payload = _raw_post(server.url + "?x=1&y=2", b'{"queries": ["dog"], "topk": 1}')
        assert status == 200 and payload["result"][0][0]["id"] == "1"
        assert _raw_post(base + "/health?verbose=1", None, method="GET", length=None) == (
            200,
            {"status": "ok", "passages": 4},
        )
        assert _raw_post(base + "/health?x=1", b"{}", method="POST")[0] == 405


def _exchange(url: str, head: bytes, body_parts: list[bytes], *, pause_s: float = 0.0) -> tuple[int, dict]:
    """Send a request's head, then its body in parts (pausing between them), and read the reply.

    Sending stops as soon as a reply is readable, so that no byte reaches a server that has already closed
    (its kernel would answer with a reset and the reply could be lost).
    """
    parts = urllib.request.urlparse(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:  # hang guard
        sock.sendall(head)
        for part in body_parts:
            if select.select([sock], [], [], pause_s)[0]:
                break
            sock.sendall(part)
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    head_text, _, body = reply.partition(b"\r\n\r\n")
    return int(head_text.split()[1]), json.loads(body)


def _post_head(length: int) -> bytes:
    return f"POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n\r\n".encode()


def test_a_client_that_stalls_mid_body_is_dropped(bm25):
    """Fewer bytes than the Content-Length, then silence: the request times out, it holds no thread."""
    with serving(bm25, request_timeout_s=0.3) as server:
        status, payload = _exchange(server.url, _post_head(100), [b'{"queries": '])
        assert status == 408 and "0.3 s" in payload["error"]
        assert HTTPRetriever(server.url).search(["dog"], 1)[0][0].id == "1"  # and the server still serves


def test_the_body_deadline_is_total_not_per_read(bm25):
    """A client trickling one byte at a time, each well within the timeout, is still dropped at the deadline
    (a bound per read alone would wait for all 400 bytes and then answer 400 for the bad JSON)."""
    with serving(bm25, request_timeout_s=0.3) as server:
        status, _ = _exchange(server.url, _post_head(400), [b"x"] * 400, pause_s=0.01)
        assert status == 408


def test_a_client_that_closes_mid_body_gets_400(bm25):
    with serving(bm25) as server:
        parts = urllib.request.urlparse(server.url)
        with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
            sock.sendall(_post_head(100) + b'{"queries": ')
            sock.shutdown(socket.SHUT_WR)
            reply = b""
            while chunk := sock.recv(65536):
                reply += chunk
        head, _, body = reply.partition(b"\r\n\r\n")
        assert int(head.split()[1]) == 400 and "ended after 12 of 100 bytes" in json.loads(body)["error"]


def test_the_request_timeout_must_be_positive(bm25):
    for bad in (0, -1.0, float("inf"), "30", None, True):
        with pytest.raises(ValueError, match="request_timeout_s"):
            RetrievalServer(bm25, request_timeout_s=bad)


def test_client_reports_4xx_without_retrying(bm25):
    with serving(bm25) as server:
        client = HTTPRetriever(server.url, retries=3, backoff_s=30.0)  # a retry would take 30 s
        with pytest.raises(RetrievalError, match="HTTP 400"):
            client.search(["cat"], 0)


class FailingRetriever:
    def search(self, queries: list[str], topk: int) -> list[list[Passage]]:
        raise OSError("disk gone")


def test_retriever_failure_is_a_500_and_the_server_keeps_serving():
    with serving(FailingRetriever()) as server:
        status, payload = _raw_post(server.url, b'{"queries": ["cat"]}')
        assert status == 500 and "disk gone" in payload["error"]
        client = HTTPRetriever(server.url, retries=1, backoff_s=0.01)
        with pytest.raises(RetrievalError, match="HTTP 500.*2 attempts"):
            client.search(["cat"], 1)


def test_client_retries_then_fails_when_nothing_listens():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = HTTPRetriever(f"http://127.0.0.1:{port}", retries=2, backoff_s=0.01, timeout_s=2)
    with pytest.raises(RetrievalError, match="3 attempts"):
        client.search(["cat"], 1)


class _FixedReplyHandler(BaseHTTPRequestHandler):
    reply: bytes = b""

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.reply)))
        self.end_headers()
        self.wfile.write(self.reply)

    def log_message(self, format, *args):
        pass


@contextmanager
def fixed_reply(reply: dict | str):
    body = (reply if isinstance(reply, str) else json.dumps(reply)).encode()
    handler = type("Handler", (_FixedReplyHandler,), {"reply": body})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_client_reads_bare_documents_as_search_r1_servers_send_without_scores():
    reply = {"result": [[{"id": "9", "contents": '"E5"\nDense retrieval.'}, {"title": "T", "text": "t"}]]}
    with fixed_reply(reply) as url:
        (ranked,) = HTTPRetriever(url).search(["dense"], 2)
    assert ranked == [Passage('"E5"\nDense retrieval.', id="9"), Passage('"T"\nt')]


@pytest.mark.parametrize(
    "reply",
    [
        {"result": []},
        {"results": [[]]},
        {"result": [["not a document"]]},
        {"result": [[{"x": 1}]]},
        "not json",
    ],
)
def test_client_rejects_malformed_replies(reply):
    with fixed_reply(reply) as url, pytest.raises(RetrievalError):
        HTTPRetriever(url, retries=0).search(["q"], 1)


def test_server_command_line(tmp_path, bm25):
    bm25.save(tmp_path / "index")
    root = Path(__file__).resolve().parents[2]
    process = subprocess.Popen(
        [sys.executable, "-m", "envs.retrieval.server", "--index", str(tmp_path / "index"), "--port", "0"],
        cwd=root,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        banner = process.stdout.readline()
        assert banner.startswith("serving 4 passages at http://127.0.0.1:")
        url = banner.split()[-1]
        assert HTTPRetriever(url).search(["dog"], 1)[0][0].id == "1"
    finally:
        process.terminate()
        process.wait(timeout=10)
