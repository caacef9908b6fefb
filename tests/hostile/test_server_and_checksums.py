"""Slow clients, deep JSON and damaged world files (issue 33, items 5, 8 and 16).

Server cases use a real :class:`RetrievalServer` on loopback and real sockets: hundreds of clients that
send a request head one byte at a time (more clients than the server has worker threads) while a normal
client searches; JSON nested 100,000 deep. World cases damage real saved files in place. No timing
assertions: a deadline only bounds how long a test may wait for an answer.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest

from searchgym.cli import main
from searchgym.core import checksums
from searchgym.retrieval import BM25Retriever, RetrievalServer
from searchgym.world import WorldFormatError, load_world, save_world

SLOW_HEAD = b"POST /retrieve HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nX-Slow: "


@pytest.fixture(scope="module")
def bm25(tiny_world):
    return BM25Retriever.from_world(tiny_world)


def search(port: int, query: str, timeout: float = 30.0) -> tuple[int, dict]:
    """One normal ``/retrieve`` request on a fresh connection (``timeout`` bounds each socket wait)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        body = json.dumps({"queries": [query], "topk": 2}).encode()
        conn.request("POST", "/retrieve", body=body, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


class Trickle:
    """``n`` loopback connections, each sending one more byte of a never-ending request head every
    ``interval`` seconds from one background thread; a connection the server closes is reopened.
    Bounded: it stops by itself after ``limit_s`` seconds, or at :meth:`stop`."""

    def __init__(self, port: int, n: int, interval: float = 0.2, limit_s: float = 90.0) -> None:
        self.port, self.n, self.interval, self.limit_s = port, n, interval, limit_s
        self.socks: list[socket.socket] = []
        self.reopened = 0
        self.rounds = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _open(self) -> socket.socket:
        s = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        s.setblocking(False)
        return s

    def __enter__(self) -> "Trickle":
        self.socks = [self._open() for _ in range(self.n)]
        self._thread.start()
        return self

    def _run(self) -> None:
        end = time.monotonic() + self.limit_s
        sent = 0
        while not self._stop.is_set() and time.monotonic() < end:
            byte = SLOW_HEAD[sent : sent + 1] or b"a"
            for i, s in enumerate(self.socks):
                try:
                    s.send(byte)
                except BlockingIOError:
                    continue
                except OSError:  # the server cut it: keep the pressure up with a new one
                    s.close()
                    self.socks[i] = self._open()
                    self.reopened += 1
            sent += 1
            self.rounds += 1
            self._stop.wait(self.interval)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def __exit__(self, *exc) -> None:
        self.stop()
        for s in self.socks:
            s.close()


def read_answer(s: socket.socket, timeout: float = 30.0) -> bytes:
    """What the server sent on ``s`` before closing it."""
    s.setblocking(True)
    s.settimeout(timeout)
    out = b""
    try:
        while chunk := s.recv(4096):
            out += chunk
    except ConnectionResetError:
        pass  # closed with unread bytes: what arrived before the reset is kept
    return out


# ---------------------------------------------------------------- item 5: slow clients
@pytest.mark.parametrize("poller", ["auto", "selectors"])
def test_300_slow_clients_do_not_starve_a_normal_search(bm25, poller):
    """300 connections trickling a request head (more than the 256 worker threads) while one normal
    client searches: it is answered while they still trickle, and the slow ones are cut with 408
    once their (short) request deadline passes."""
    with RetrievalServer(bm25, port=0, request_timeout=1.0, poller=poller) as srv:
        with Trickle(srv.port, 300) as slow:
            while slow.rounds < 3:  # every slow connection is open and has sent bytes
                time.sleep(0.05)
            status, body = search(srv.port, "capital of Merovia")
            assert slow.running  # answered during the attack, not after it
            assert status == 200
            assert [d["id"] for d in body["result"][0]] == [h.doc_id for h in bm25.search("capital of Merovia", k=2)]
            slow.stop()
            victim = slow.socks[0]
            assert read_answer(victim).startswith(b"HTTP/1.1 408 ")
        assert srv._httpd is not None and srv._httpd.stats["timed_out"] >= 1


def test_at_the_connection_limit_the_slowest_request_makes_room(bm25):
    """With room for 50 connections and 100 slow ones (whose deadline is far off), a normal client
    still gets in: the connection whose unfinished request is the oldest is closed with 503."""
    with RetrievalServer(bm25, port=0, request_timeout=60.0, max_connections=50) as srv:
        oldest = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        oldest.sendall(SLOW_HEAD)
        with Trickle(srv.port, 100, interval=0.5) as slow:
            while slow.rounds < 2:
                time.sleep(0.05)
            status, body = search(srv.port, "Bob Varn painter")
            assert status == 200 and len(body["result"][0]) == 2
            assert slow.running
        assert srv._httpd is not None
        assert srv._httpd.stats["evicted"] >= 50 and srv._httpd.open_connections <= 50
        answer = read_answer(oldest)
        oldest.close()
    assert answer.startswith(b"HTTP/1.1 503 ") and b"limit of 50 connections" in answer


def test_an_endless_head_gets_431_and_a_body_that_never_comes_gets_408(bm25):
    with RetrievalServer(bm25, port=0, request_timeout=1.0, max_head_bytes=2048) as srv:
        big = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        big.sendall(SLOW_HEAD + b"a" * 4096)
        assert read_answer(big).startswith(b"HTTP/1.1 431 ")
        short = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        short.sendall(b"POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        answer = read_answer(short)
        assert answer.startswith(b"HTTP/1.1 408 ") and b"within 1 s" in answer
        assert search(srv.port, "Tarsk")[0] == 200
        big.close()
        short.close()


def test_pipelined_requests_and_expect_100_continue_are_framed_right(bm25):
    """Requests sent back to back in one write are answered in order; a client that waits for
    ``100 Continue`` (curl does for bodies over 1 KiB) gets it and then its answer."""
    one = json.dumps({"queries": ["Merovia"], "topk": 1}).encode()
    two = json.dumps({"queries": ["Bob Varn"], "topk": 1}).encode()
    req = b"POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
    with RetrievalServer(bm25, port=0) as srv:
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
        s.sendall(req % (len(one), one) + req % (len(two), two) + b"GET /health HTTP/1.1\r\nConnection: close\r\n\r\n")
        answers = read_answer(s).split(b"HTTP/1.1 ")[1:]
        assert [a[:3] for a in answers] == [b"200", b"200", b"200"]
        first, second = (json.loads(a.split(b"\r\n\r\n", 1)[1]) for a in answers[:2])
        assert first["result"][0][0]["id"] == bm25.search("Merovia", k=1)[0].doc_id
        assert second["result"][0][0]["id"] == bm25.search("Bob Varn", k=1)[0].doc_id
        s.close()

        c = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
        c.sendall(b"POST /retrieve HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nConnection: close\r\n")
        c.sendall(b"Content-Length: %d\r\n\r\n" % len(one))
        assert c.recv(64) == b"HTTP/1.1 100 Continue\r\n\r\n"
        c.sendall(one)
        assert read_answer(c).startswith(b"HTTP/1.1 200 ")
        c.close()


# ---------------------------------------------------------------- item 16: deep JSON
@pytest.mark.parametrize(
    "body, reasons",
    [
        (b'{"queries": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", ["nested too deeply"]),
        # Python >= 3.11 refuses to convert a 5000-digit integer; 3.10 converts it, and topk is out of range
        (b'{"queries": ["Merovia"], "topk": ' + b"9" * 5000 + b"}", ["not valid UTF-8 JSON", '"topk" must be']),
    ],
    ids=["nested-100k", "5000-digit-integer"],
)
def test_hostile_json_is_a_400_without_a_traceback(bm25, caplog, capfd, body, reasons):
    with caplog.at_level(logging.DEBUG, logger="searchgym"), RetrievalServer(bm25, port=0) as srv:
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
        conn.request("POST", "/retrieve", body=body, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        status, answer = resp.status, json.loads(resp.read())
        conn.close()
        assert search(srv.port, "Merovia")[0] == 200  # and the server carries on
    assert status == 400 and any(reason in answer["error"] for reason in reasons)
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.WARNING]
    assert "Traceback" not in capfd.readouterr().err


# ------------------------------------------------------------- item 8: world checksums
@pytest.fixture()
def world_dir(saved_tiny, tmp_path):
    """A private copy of the saved tiny world, to damage."""
    return Path(shutil.copytree(saved_tiny, tmp_path / "world"))


def overwrite_in_place(path: Path, old: bytes, new: bytes) -> None:
    """Overwrite the first ``old`` in ``path`` with ``new`` (same length): same size, same inode."""
    data = path.read_bytes()
    at = data.index(old)
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(new)


@pytest.fixture()
def hashes(monkeypatch):
    """The names of the files hashed (a spy on the real streaming hash)."""
    seen: list[str] = []
    real = checksums.sha256_file

    def spy(path):
        seen.append(Path(path).name)
        return real(path)

    monkeypatch.setattr(checksums, "sha256_file", spy)
    return seen


def test_four_bytes_overwritten_in_place_are_caught_with_the_rebuild_command(world_dir, capsys):
    """The issue's case: 4 bytes of doc_texts.utf8 overwritten in place (size unchanged) used to give
    "Republic of ZZZZerand" silently; now the load fails in one line naming the file and the rebuild."""
    load_world(world_dir)  # verified and cached once
    overwrite_in_place(world_dir / "doc_texts.utf8", b"Merovia", b"ZZZZvia")
    with pytest.raises(WorldFormatError) as err:
        load_world(world_dir)
    message = str(err.value)
    assert "doc_texts.utf8 does not match its SHA-256 in manifest.json" in message
    assert f"searchgym world build --output-dir {world_dir} --force" in message and "\n" not in message
    assert main(["world", "stats", str(world_dir)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "doc_texts.utf8 does not match" in lines[0] and "searchgym world build" in lines[0]


def test_damage_that_keeps_size_and_mtime_is_still_caught(world_dir):
    """Setting the mtime back after the overwrite does not fool the cache: the ctime moved."""
    load_world(world_dir)
    p = world_dir / "entity_titles.utf8"
    before = p.stat()
    overwrite_in_place(p, b"Merovia", b"Merovib")
    os.utime(p, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert p.stat().st_size == before.st_size and p.stat().st_mtime_ns == before.st_mtime_ns
    with pytest.raises(WorldFormatError, match="entity_titles.utf8 does not match its SHA-256"):
        load_world(world_dir)


def test_checksums_are_verified_once_per_file_version(tiny_world, tmp_path, hashes):
    d = tmp_path / "w"
    save_world(tiny_world, d)
    hashes.clear()
    load_world(d)
    assert hashes == []  # save_world recorded what it wrote
    p = d / "doc_titles.utf8"
    p.write_bytes(p.read_bytes())  # rewritten with the same bytes: hashed again, and passes
    load_world(d)
    assert hashes == ["doc_titles.utf8"]
    hashes.clear()
    load_world(d)
    assert hashes == []
    (d / checksums.CACHE_NAME).write_text("{not json")  # a damaged cache only costs a full check
    load_world(d)
    assert sorted(hashes) == sorted(json.loads((d / "manifest.json").read_text())["files"])


def test_a_world_saved_before_checksums_loads_and_is_guarded_from_then_on(world_dir, caplog):
    mf = world_dir / "manifest.json"
    manifest = json.loads(mf.read_text())
    del manifest["files_sha256"]
    mf.write_text(json.dumps(manifest))
    (world_dir / checksums.CACHE_NAME).unlink()
    with caplog.at_level(logging.INFO, logger="searchgym.world"):
        assert load_world(world_dir).num_documents > 0
    assert any("older searchgym without checksums" in r.getMessage() for r in caplog.records)
    overwrite_in_place(world_dir / "doc_texts.utf8", b"Merovia", b"ZZZZvia")
    with pytest.raises(WorldFormatError, match="doc_texts.utf8 changed since this world was first loaded"):
        load_world(world_dir)


def test_a_malformed_checksum_table_is_refused(world_dir):
    mf = world_dir / "manifest.json"
    manifest = json.loads(mf.read_text())
    del manifest["files_sha256"]["triples.npy"]
    mf.write_text(json.dumps(manifest))
    with pytest.raises(WorldFormatError, match="malformed 'files_sha256'.*searchgym world build"):
        load_world(world_dir)
