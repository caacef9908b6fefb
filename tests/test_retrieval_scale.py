"""Retrieval at scale: several server processes on one port, and a client over several replicas
(round robin, failover, per-replica error counts). Real servers on loopback."""

from __future__ import annotations

import os
import signal
import time

import pytest

from searchgym.cli import main as cli_main
from searchgym.envs.resources import resolve_retriever
from searchgym.retrieval import BM25Retriever, RemoteRetriever, RetrievalServer
from searchgym.retrieval.client import RequestRejected, RetrievalError
from searchgym.retrieval.multiproc import MultiProcessRetrievalServer
from searchgym.retrieval.replicas import ReplicatedRetriever, split_urls
from tests.support.trickle_server import TrickleServer

QUERIES = ["capital of Kosor", "Draezendgard population", "born in Stothol", "University of Stothol founded"]


@pytest.fixture(scope="module")
def bm25(default_world):
    return BM25Retriever.from_world(default_world)


def ids(results):
    return [[(h.doc_id, round(h.score, 4)) for h in hits] for hits in results]


def test_multiprocess_server_answers_like_the_retriever(bm25):
    with MultiProcessRetrievalServer(bm25, port=0, processes=2) as srv:
        assert len(srv.pids()) == 2 and os.getpid() not in srv.pids()
        remote = RemoteRetriever(srv.url)
        assert ids(remote.batch_search(QUERIES, 3)) == ids(bm25.batch_search(QUERIES, 3))
        assert remote.health()["num_docs"] == bm25.num_docs


def test_multiprocess_server_restarts_a_killed_worker(bm25):
    with MultiProcessRetrievalServer(bm25, port=0, processes=2) as srv:
        victim = srv.pids()[0]
        os.kill(victim, signal.SIGKILL)
        deadline = time.time() + 10
        while srv.check() == 0 and time.time() < deadline:
            time.sleep(0.05)
        assert srv.restarts == 1 and victim not in srv.pids() and len(srv.pids()) == 2
        for _ in range(8):  # fresh connections land on either worker, both answer
            r = RemoteRetriever(srv.url)
            assert ids(r.batch_search(QUERIES[:1], 3)) == ids(bm25.batch_search(QUERIES[:1], 3))
            r.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie (exited, not yet reaped) is gone too
        return f.read().split(")")[-1].split()[0] != "Z"


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc")
def test_workers_exit_when_the_supervisor_is_killed():
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from searchgym.retrieval import BM25Retriever\n"
        "from searchgym.retrieval.multiproc import MultiProcessRetrievalServer\n"
        "from searchgym.world.synthetic import default_world\n"
        "srv = MultiProcessRetrievalServer(BM25Retriever.from_world(default_world()), port=0, processes=2).start()\n"
        "print(*srv.pids(), flush=True)\n"
        "sys.stdin.read()\n"
    )
    sup = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    workers = [int(x) for x in sup.stdout.readline().split()]
    assert len(workers) == 2
    sup.kill()
    sup.wait()
    deadline = time.time() + 10
    while any(_alive(w) for w in workers) and time.time() < deadline:
        time.sleep(0.1)
    assert not any(_alive(w) for w in workers)


def test_serve_rejects_zero_processes(capsys):
    assert cli_main(["serve", "--synthetic", "--workers", "0", "--port", "0"]) == 2
    assert "--workers must be >= 1" in capsys.readouterr().err


def test_replicas_share_the_load_and_agree(bm25):
    with RetrievalServer(bm25, port=0) as a, RetrievalServer(bm25, port=0) as b:
        rep = ReplicatedRetriever([a.url, b.url])
        for q in QUERIES:
            assert ids(rep.batch_search([q], 3)) == ids(bm25.batch_search([q], 3))
        assert rep.report() == {a.url: {"served": 2, "errors": 0}, b.url: {"served": 2, "errors": 0}}


def test_dead_replica_fails_over_and_is_counted(bm25):
    with RetrievalServer(bm25, port=0) as live:
        dead = RetrievalServer(bm25, port=0).start()
        dead_url = dead.url
        dead.stop()  # nothing listens there any more
        rep = resolve_retriever(None, f"{dead_url},{live.url}")
        assert isinstance(rep, ReplicatedRetriever)
        for q in QUERIES:
            assert ids(rep.batch_search([q], 3)) == ids(bm25.batch_search([q], 3))
        assert rep.report()[dead_url] == {"served": 0, "errors": 2}
        assert rep.report()[live.url]["served"] == 4


def test_replica_that_times_out_is_retried_on_another(bm25):
    with TrickleServer(stage="status", interval=0.5) as slow, RetrievalServer(bm25, port=0) as live:
        rep = ReplicatedRetriever([slow.url, live.url], timeout=1.0)
        t = time.perf_counter()
        assert ids(rep.batch_search(QUERIES[:1], 3)) == ids(bm25.batch_search(QUERIES[:1], 3))
        assert time.perf_counter() - t < 10
        assert rep.report()[slow.url] == {"served": 0, "errors": 1}


def test_all_replicas_down_names_each(bm25):
    urls = []
    for _ in range(2):
        s = RetrievalServer(bm25, port=0).start()
        urls.append(s.url)
        s.stop()
    rep = ReplicatedRetriever(urls, timeout=2.0)
    with pytest.raises(RetrievalError, match="all 2 retrieval replicas failed") as err:
        rep.batch_search(["x"], 3)
    assert all(u in str(err.value) for u in urls)


def test_a_rejected_request_is_not_sent_to_other_replicas(bm25):
    with RetrievalServer(bm25, port=0, max_topk=2, default_topk=2) as a, RetrievalServer(bm25, port=0) as b:
        rep = ReplicatedRetriever([a.url, b.url])
        with pytest.raises(RequestRejected, match="topk"):
            rep.batch_search(["x"], 3)
        assert rep.report()[b.url]["served"] == 0 and rep.report()[a.url]["errors"] == 0


def test_bad_url_lists():
    with pytest.raises(ValueError, match="no retrieval server URL"):
        split_urls(" , ")
    with pytest.raises(ValueError, match="listed twice"):
        split_urls("http://a:1,http://a:1")
    with pytest.raises(ValueError, match="must start with http"):
        ReplicatedRetriever("http://a:1,ftp://b")
