"""The Search-R1 retrieval protocol: a real server on loopback, raw HTTP and RemoteRetriever."""

from __future__ import annotations

import http.client
import json
import logging
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from searchgym.retrieval import BM25Retriever, RemoteRetriever, RetrievalError, RetrievalServer, Retriever
from searchgym.retrieval.client import parse_contents


@pytest.fixture(scope="module")
def bm25(tiny_world):
    return BM25Retriever.from_world(tiny_world)


@pytest.fixture(scope="module")
def server(bm25):
    with RetrievalServer(bm25, port=0, max_queries=8, max_body_bytes=4096) as srv:
        yield srv


def post(srv, body, path="/retrieve", headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    conn.request("POST", path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
    resp = conn.getresponse()
    out = resp.status, json.loads(resp.read())
    conn.close()
    return out


def get(srv, path):
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    conn.request("GET", path)
    resp = conn.getresponse()
    out = resp.status, json.loads(resp.read())
    conn.close()
    return out


def test_protocol_with_scores_is_exact(server, bm25, tiny_world):
    status, body = post(server, {"queries": ["capital of Merovia", "zzz"], "topk": 2, "return_scores": True})
    assert status == 200
    hits = bm25.search("capital of Merovia", k=2)
    assert body == {
        "result": [
            [{"document": {"id": h.doc_id, "contents": f'"{h.title}"\n{h.text}'}, "score": h.score} for h in hits],
            [],
        ]
    }
    assert body["result"][0][0]["document"]["contents"] == '"Merovia"\n' + tiny_world.document("D2").text


def test_protocol_without_scores_returns_bare_documents(server, bm25):
    status, body = post(server, {"queries": ["Bob Varn"], "topk": 1, "return_scores": False})
    h = bm25.search("Bob Varn", k=1)[0]
    assert status == 200 and body == {"result": [[{"id": h.doc_id, "contents": f'"{h.title}"\n{h.text}'}]]}


def test_topk_defaults_to_three(server):
    status, body = post(server, {"queries": ["Merovia Tarsk Ostrel born"]})
    assert status == 200 and len(body["result"][0]) == 3


def test_health(server):
    assert get(server, "/health") == (200, {"status": "ok", "backend": "bm25", "num_docs": 7})


@pytest.mark.parametrize(
    "body, status, reason",
    [
        (b"{not json", 400, "not valid UTF-8 JSON"),
        (b"\xff\xfe", 400, "not valid UTF-8 JSON"),
        ([1, 2], 400, "must be a JSON object"),
        ({"topk": 3}, 400, 'missing field "queries"'),
        ({"queries": "capital"}, 400, '"queries" must be a list of strings'),
        ({"queries": ["ok", 3]}, 400, '"queries" must be a list of strings'),
        ({"queries": ["q"], "topk": 0}, 400, '"topk" must be between 1 and 100'),
        ({"queries": ["q"], "topk": 101}, 400, '"topk" must be between 1 and 100'),
        ({"queries": ["q"], "topk": "3"}, 400, '"topk" must be an integer'),
        ({"queries": ["q"], "topk": True}, 400, '"topk" must be an integer'),
        ({"queries": ["q"], "return_scores": "yes"}, 400, '"return_scores" must be true or false'),
        ({"queries": ["q"] * 9}, 400, "too many queries: 9 > 8"),
        ({"queries": ["q" * 5000]}, 413, "exceeds the 4096-byte limit"),
    ],
)
def test_bad_requests_get_4xx_with_reason(server, body, status, reason):
    got_status, got = post(server, body)
    assert got_status == status and reason in got["error"]


def test_long_query_is_rejected(bm25):
    with RetrievalServer(bm25, port=0, max_query_chars=10) as srv:
        status, body = post(srv, {"queries": ["x" * 11]})
    assert status == 400 and "limit is 10" in body["error"]


def test_wrong_paths_and_methods(server):
    assert post(server, {"queries": []}, path="/search")[0] == 404
    assert get(server, "/nope")[0] == 404
    assert get(server, "/retrieve")[0] == 405
    assert post(server, {}, path="/health")[0] == 405


def test_missing_content_length_is_411(server):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.putrequest("POST", "/retrieve")
    conn.endheaders()
    resp = conn.getresponse()
    assert resp.status == 411 and "Content-Length" in json.loads(resp.read())["error"]
    conn.close()


@pytest.mark.parametrize("length", ["abc", "-5"])
def test_bad_content_length_is_400_and_closes(server, length):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.putrequest("POST", "/retrieve")
    conn.putheader("Content-Length", length)
    conn.endheaders()
    resp = conn.getresponse()
    assert resp.status == 400 and json.loads(resp.read()) == {"error": f"bad Content-Length {length!r}"}
    assert resp.getheader("Connection") == "close"
    conn.close()


class Broken(Retriever):
    backend = "broken"

    def batch_search(self, queries, k=3):
        raise RuntimeError("disk on fire")


def test_retriever_failure_is_500_and_the_server_survives():
    with RetrievalServer(Broken(), port=0) as srv:
        status, body = post(srv, {"queries": ["q"]})
        assert status == 500 and "disk on fire" in body["error"]
        assert get(srv, "/health")[0] == 200


def test_remote_retriever_matches_local(server, bm25):
    remote = RemoteRetriever(server.url, timeout=10, batch_size=2)
    queries = ["capital of Merovia", "", "Bob Varn painter", "Tarsk", "weather"]
    assert remote.batch_search(queries, k=3) == bm25.batch_search(queries, k=3)
    assert remote.search("Dura Labs", k=1) == bm25.search("Dura Labs", k=1)
    assert remote.batch_search([], k=3) == []
    assert remote.health()["num_docs"] == 7


def test_remote_4xx_is_not_retried_and_names_the_reason(server):
    remote = RemoteRetriever(server.url, retries=3, backoff=5)  # a retry would take >= 5 s
    with pytest.raises(RetrievalError, match=r"rejected the request \(400\).*topk"):
        remote.search("Merovia", k=500)


def test_concurrent_clients(server, bm25):
    remote = RemoteRetriever(server.url, timeout=10)
    queries = ["capital of Merovia", "Bob Varn", "Tarsk city", "chemist", "Ostrel"] * 8
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda q: remote.search(q, k=2), queries))
    assert got == [bm25.search(q, k=2) for q in queries]


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_server_down_error_says_how_to_start_it():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(
        RetrievalError, match=r"cannot reach retrieval server at .* after 2 attempts; start it with `searchgym serve"
    ):
        RemoteRetriever(url, retries=1, backoff=0.01).search("Merovia")


class Flaky:
    """A real HTTP server that fails the first ``failures`` requests with 500, then answers ``reply``."""

    def __init__(self, failures: int, reply: dict, status: int = 200):
        self.calls = 0
        flaky = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                return None

            def do_POST(self):  # noqa: N802
                self.rfile.read(int(self.headers["Content-Length"]))
                flaky.calls += 1
                code, payload = (500, {"error": "overloaded"}) if flaky.calls <= failures else (status, reply)
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self):
        self.thread.start()
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


SEARCH_R1_DOCS = {"result": [[{"id": "7", "contents": '"Tarsk"\nTarsk is a city.\nSecond line.'}]]}


def test_retries_recover_from_5xx():
    with Flaky(2, SEARCH_R1_DOCS) as url:
        hits = RemoteRetriever(url, retries=2, backoff=0.01).search("q")
    assert [(h.doc_id, h.title, h.text, h.score) for h in hits] == [
        ("7", "Tarsk", "Tarsk is a city.\nSecond line.", 0.0)
    ]


def test_retries_give_up_with_the_server_message():
    flaky = Flaky(5, SEARCH_R1_DOCS)
    with flaky as url:
        with pytest.raises(RetrievalError, match="failed after 2 attempts: server error 500: overloaded"):
            RemoteRetriever(url, retries=1, backoff=0.01).search("q")
    assert flaky.calls == 2


@pytest.mark.parametrize(
    "reply",
    [
        {"nope": 1},
        {"result": [[1]]},
        {"result": [[{"document": {"id": "1"}}]]},
        {"result": [[{"document": {"contents": "x"}, "score": "high"}]]},
        {"result": []},
    ],
)
def test_malformed_responses_are_reported(reply):
    with Flaky(0, reply) as url:
        with pytest.raises(RetrievalError, match="malformed server response"):
            RemoteRetriever(url, retries=0).search("q")


def test_parse_contents_and_bad_urls():
    assert parse_contents('"Title"\nbody\nmore') == ("Title", "body\nmore")
    assert parse_contents("no title line") == ("no title line", "")
    with pytest.raises(ValueError, match="http://"):
        RemoteRetriever("localhost:8000")
    with pytest.raises(TypeError, match="searchgym Retriever"):
        RetrievalServer(object(), port=0)


def test_port_in_use_is_a_clear_error(server, bm25):
    with pytest.raises(RuntimeError, match="pick another --port"):
        RetrievalServer(bm25, port=server.port).start()


def test_client_reconnects_after_the_server_restarts(bm25):
    first = RetrievalServer(bm25, port=0).start()
    port = first.port
    remote = RemoteRetriever(first.url, retries=0)
    expected = bm25.search("Merovia")
    assert remote.search("Merovia") == expected
    old_conn = remote._local.conn
    first.stop()  # also ends the kept-alive connection
    with RetrievalServer(bm25, port=port):
        assert remote.search("Merovia") == expected
    assert remote._local.conn is not old_conn  # reconnected transparently, despite retries=0
    remote.close()


# ------------------------------------------------------------------ many rollouts, rude clients
def test_empty_queries_answer_an_empty_result(server):
    assert post(server, {"queries": []}) == (200, {"result": []})


def test_64_new_connection_clients_are_all_served(bm25):
    """Search-R1's client opens a connection per request. With Python's default listen backlog (5) a
    burst of 64 drops connection attempts, which the client's kernel retries only after 1 s: a 0.9 s
    connect timeout turns every drop into an error. Bounded: 64 clients x 5 requests, then it stops."""
    from benchmarks.http_load import new_connection_load

    queries = ["capital of Merovia", "Bob Varn", "Tarsk city", "chemist", "Ostrel", "born in Tarsk", "weather"]
    with RetrievalServer(bm25, port=0) as srv:
        result = new_connection_load(
            "127.0.0.1", srv.port, queries, clients=64, requests_per_client=5, connect_timeout=0.9
        )
    assert result.errors == []
    assert len(result.latencies_ms) == 64 * 5
    for answers in result.answers.values():
        for q, hits in answers:
            assert [h["id"] for h in hits] == [h.doc_id for h in bm25.search(q, k=3)]


def _wait_for(predicate, timeout=10.0):
    import time

    end = time.monotonic() + timeout
    while not predicate() and time.monotonic() < end:
        time.sleep(0.02)
    return predicate()


def test_client_disconnecting_mid_body_logs_one_debug_line_and_no_traceback(bm25, caplog, capfd):
    with caplog.at_level("DEBUG", logger="searchgym.retrieval"), RetrievalServer(bm25, port=0) as srv:
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        s.sendall(
            b"POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000\r\n\r\n" + b'{"queries": ["Mero'
        )
        s.close()  # gone mid-body
        assert _wait_for(lambda: any("mid-body" in r.getMessage() for r in caplog.records))
        assert post(srv, {"queries": ["Merovia"]})[0] == 200  # the server carries on
    lines = [r for r in caplog.records if "disconnected" in r.getMessage() or "went away" in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelname == "DEBUG" and "after 18 of 1000 body bytes" in lines[0].getMessage()
    assert "Traceback" not in capfd.readouterr().err


def test_client_resetting_before_the_answer_leaves_no_traceback(bm25, caplog, capfd):
    import struct

    body = json.dumps({"queries": ["capital of Merovia"] * 8}).encode()
    with caplog.at_level("DEBUG", logger="searchgym.retrieval.server"), RetrievalServer(bm25, port=0) as srv:
        for _ in range(20):
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with RST
            s.sendall(b"POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            s.close()
        assert post(srv, {"queries": ["Merovia"]})[0] == 200
    assert "Traceback" not in capfd.readouterr().err
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_oversized_body_is_drained_so_the_client_sees_the_413(bm25):
    big = json.dumps({"queries": ["x" * 1000] * 8000}).encode()  # 8 MB, far beyond the socket buffers
    with RetrievalServer(bm25, port=0, max_body_bytes=4096) as srv:
        # http.client (as RemoteRetriever) sends the whole body before reading: unread, it breaks the pipe
        status, body = post(srv, big)
        assert status == 413 and "exceeds the 4096-byte limit" in body["error"]
        requests = pytest.importorskip("requests")
        resp = requests.post(srv.url + "/retrieve", data=big, headers={"Content-Type": "application/json"}, timeout=30)
        assert resp.status_code == 413 and "exceeds the 4096-byte limit" in resp.json()["error"]
        assert post(srv, {"queries": ["Merovia"]})[0] == 200


def test_body_beyond_the_discard_bound_is_refused_unread_and_the_server_survives(bm25):
    requests = pytest.importorskip("requests")
    big = b"x" * (8 * 1024 * 1024)
    with RetrievalServer(bm25, port=0, max_body_bytes=4096, max_discard_bytes=1024) as srv:
        try:  # the connection is closed unread: the client sees the 413 or a broken pipe (documented)
            assert requests.post(srv.url + "/retrieve", data=big, timeout=30).status_code == 413
        except requests.ConnectionError:
            pass
        assert post(srv, {"queries": ["Merovia"]})[0] == 200


def test_server_sizes_backlog_and_workers_and_checks_them(bm25):
    srv = RetrievalServer(bm25, port=0)
    httpd = srv.bind()
    assert httpd.request_queue_size == srv.backlog == 1024 and srv.workers == 256
    srv.stop()
    with pytest.raises(ValueError, match="backlog >= 1"):
        RetrievalServer(bm25, port=0, backlog=0)


class Gate(Retriever):
    """A retriever whose first call blocks until released, and which fails on the query "boom"."""

    backend = "gate"

    def __init__(self):
        self.entered, self.release, self.calls = threading.Event(), threading.Event(), []

    def batch_search(self, queries, k=3):
        self.calls.append(list(queries))
        if len(self.calls) == 1:
            self.entered.set()
            self.release.wait(10)
        if "boom" in queries:
            raise RuntimeError("boom")
        from searchgym.retrieval.base import Hit

        return [[Hit(q, q, q, float(k))] for q in queries]


def test_coalescer_merges_waiting_requests_and_isolates_a_failing_one():
    from searchgym.retrieval.coalesce import SearchCoalescer

    gate = Gate()
    co = SearchCoalescer(gate)
    with ThreadPoolExecutor(6) as pool:
        first = pool.submit(co.batch_search, ["a"], 3)
        assert gate.entered.wait(10)
        later = []
        for qs, k in [(["b", "c"], 3), (["d"], 3), (["boom"], 3), (["e"], 5)]:
            later.append(pool.submit(co.batch_search, qs, k))
            while len(co._pending) < len(later):  # queued behind the running search, in this order
                threading.Event().wait(0.01)
        gate.release.set()
        assert [h[0].doc_id for h in first.result()] == ["a"]
        assert [[h.doc_id for h in hs] for hs in later[0].result()] == [["b"], ["c"]]
        assert later[1].result()[0][0].doc_id == "d"
        with pytest.raises(RuntimeError, match="boom"):
            later[2].result()
        assert later[3].result()[0][0].score == 5.0
    # one call for "a", one merged k=3 batch (fails on boom), its three requests alone, one k=5 batch
    assert gate.calls[1] == ["b", "c", "d", "boom"] and ["e"] in gate.calls and len(gate.calls) == 6
    assert co.batch_search([], 3) == []
