"""BM25 retrieval: ranking, exactness against bm25s, batching, persistence and failure paths."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from searchgym.retrieval import (
    BM25Retriever,
    Hit,
    IndexFormatError,
    RankBM25Retriever,
    format_hits,
    load_index,
    make_retriever,
)
from searchgym.retrieval.analyzer import Analyzer
from searchgym.retrieval.storage import hash_files


@pytest.fixture(scope="module")
def bm25(tiny_world):
    return BM25Retriever.from_world(tiny_world)


def titles(hits):
    return [h.title for h in hits]


def test_capital_query_ranks_merovia_and_ostrel_first(bm25):
    hits = bm25.search("capital of Merovia", k=3)
    assert set(titles(hits[:2])) == {"Merovia", "Ostrel"}
    assert all(isinstance(h, Hit) for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_hits_carry_the_world_documents(bm25, tiny_world):
    hit = bm25.search("Dura Labs company", k=1)[0]
    doc = tiny_world.document(hit.doc_id)
    assert (hit.doc_id, hit.title, hit.text) == ("D5", doc.title, doc.text)
    assert format_hits([hit]) == f'Doc 1 (Title: "Dura Labs") {doc.text}'


def test_titles_are_indexed_only_when_asked(tiny_world):
    # "weather" appears only in the title of D99
    assert titles(BM25Retriever.from_world(tiny_world).search("weather")) == ["Weather"]
    assert BM25Retriever.from_world(tiny_world, index_titles=False).search("weather") == []


@pytest.mark.parametrize("query", ["", "   \n\t", "the of is", "zzyzx qwv", "!!! ???"])
def test_queries_without_known_terms_return_nothing(bm25, query):
    assert bm25.search(query) == []


def test_k_larger_than_corpus_returns_every_match(bm25, tiny_world):
    hits = bm25.search("Merovia", k=1000)
    expected = {
        d
        for d, t, x in zip(tiny_world.doc_ids, tiny_world.doc_titles, tiny_world.doc_texts)
        if "merovia" in (t + " " + x).lower()
    }
    assert {h.doc_id for h in hits} == expected


def test_stemming_matches_word_forms(bm25):
    assert titles(bm25.search("painting painters", k=1)) == titles(bm25.search("painter", k=1)) != []


def test_scores_equal_bm25s_retrieve(bm25):
    for q in ["capital of Merovia", "Bob Varn painter born born", "city located headquarters"]:
        docs, scores = bm25._model.retrieve([bm25.query_terms(q)], k=3, show_progress=False)
        hits = bm25.search(q, k=3)
        matched = scores[0] > 0  # bm25s pads with zero-score documents; we return matches only
        assert [h.doc_id for h in hits] == [bm25.doc_ids[i] for i in docs[0][matched]]
        np.testing.assert_allclose([h.score for h in hits], scores[0][matched], rtol=1e-6)


def test_batch_equals_single(bm25):
    queries = ["capital of Merovia", "", "Tarsk", "born painter", "the", "Alice chemist Tarsk"]
    assert bm25.batch_search(queries, k=4) == [bm25.search(q, k=4) for q in queries]
    assert bm25.batch_search([], k=3) == []


def test_threaded_batches_match_inline(tiny_world):
    queries = [f"{w} born" for w in ("Alice", "Bob", "Tarsk", "Ostrel", "Merovia", "capital", "")] * 5
    inline = BM25Retriever.from_world(tiny_world).batch_search(queries, k=3)
    threaded = BM25Retriever.from_world(tiny_world, threads=3)
    assert len(threaded._chunks([threaded.query_terms(q) for q in queries])) >= 3
    assert threaded.batch_search(queries, k=3) == inline


def test_ties_break_by_document_order():
    r = BM25Retriever(["a", "b", "c"], ["x", "x", "x"], ["same words", "same words", "other"], index_titles=False)
    assert [h.doc_id for h in r.search("same", k=2)] == ["a", "b"]


@pytest.mark.parametrize("bad_k", [0, -1, 2.5, True])
def test_bad_k_is_rejected(bm25, bad_k):
    with pytest.raises(ValueError, match="k must be a positive integer"):
        bm25.search("Merovia", k=bad_k)


def test_batch_search_rejects_a_bare_string(bm25):
    with pytest.raises(TypeError, match="use search"):
        bm25.batch_search("Merovia")
    with pytest.raises(TypeError, match="query 1 is int"):
        bm25.batch_search(["Merovia", 3])


def test_constructor_errors():
    with pytest.raises(ValueError, match="same length"):
        BM25Retriever(["a"], ["t", "u"], ["x"])
    with pytest.raises(ValueError, match="empty corpus"):
        BM25Retriever([], [], [])
    with pytest.raises(ValueError, match="unsupported BM25 method"):
        BM25Retriever(["a"], ["t"], ["text"], method="bm25+")
    with pytest.raises(ValueError, match="no indexable words"):
        BM25Retriever(["a"], [""], ["the of a"], index_titles=False)
    with pytest.raises(ValueError, match="unknown stemmer"):
        BM25Retriever(["a"], ["t"], ["text"], stemmer="klingon")


def test_save_load_round_trip(bm25, tmp_path):
    bm25.save(tmp_path / "idx")
    manifest = json.loads((tmp_path / "idx" / "manifest.json").read_text())
    assert manifest["backend"] == "bm25" and manifest["num_docs"] == bm25.num_docs
    queries = ["capital of Merovia", "Bob Varn", "weather", "", "born in Tarsk"]
    for loaded in (
        BM25Retriever.load(tmp_path / "idx"),
        BM25Retriever.load(tmp_path / "idx", mmap=True),
        load_index(tmp_path / "idx"),
    ):
        assert loaded.batch_search(queries, k=5) == bm25.batch_search(queries, k=5)
        assert loaded.params() == bm25.params()


def test_same_corpus_gives_identical_index_files(tiny_world, tmp_path):
    BM25Retriever.from_world(tiny_world).save(tmp_path / "a")
    BM25Retriever.from_world(tiny_world).save(tmp_path / "b")
    for name in ("manifest.json", "docs.jsonl", "bm25s/vocab.index.json", "bm25s/data.csc.index.npy"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


@pytest.fixture()
def saved(bm25, tmp_path):
    d = tmp_path / "idx"
    bm25.save(d)
    return d


def test_missing_directory_or_manifest(tmp_path, saved):
    with pytest.raises(IndexFormatError, match="no such directory.*searchgym index build"):
        BM25Retriever.load(tmp_path / "nope")
    (saved / "manifest.json").unlink()
    with pytest.raises(IndexFormatError, match="manifest.json is missing.*searchgym index build"):
        BM25Retriever.load(saved)


def test_modified_documents_fail_the_checksum(saved):
    docs = saved / "docs.jsonl"
    docs.write_text(docs.read_text().replace("Merovia", "Narnia"))
    with pytest.raises(IndexFormatError, match="checksum.*searchgym index build"):
        BM25Retriever.load(saved)


def _rehash(d):
    """Record the current bm25s files' checksums in the manifest, as if the corrupt arrays had been
    written by a faulty save: the structural checks, not the checksum, must catch them."""
    m = d / "manifest.json"
    manifest = json.loads(m.read_text())
    manifest["files_sha256"] = hash_files(d, manifest["files_sha256"])
    m.write_text(json.dumps(manifest))


def test_corrupt_bm25s_arrays(saved):
    f = saved / "bm25s" / "data.csc.index.npy"
    f.write_bytes(f.read_bytes()[:20])
    with pytest.raises(IndexFormatError, match="data.csc.index.npy does not match the checksum.*searchgym index build"):
        BM25Retriever.load(saved)
    _rehash(saved)
    with pytest.raises(IndexFormatError, match="bm25s arrays are unreadable.*searchgym index build"):
        BM25Retriever.load(saved)


def test_mismatching_bm25s_params(saved):
    p = saved / "bm25s" / "params.index.json"
    params = json.loads(p.read_text())
    params["num_docs"] = 99
    p.write_text(json.dumps(params))
    _rehash(saved)
    with pytest.raises(IndexFormatError, match="covers 99 documents"):
        BM25Retriever.load(saved)


def test_manifest_records_the_bm25s_file_checksums(saved):
    listed = json.loads((saved / "manifest.json").read_text())["files_sha256"]
    assert sorted(listed) == sorted(f"bm25s/{p.name}" for p in (saved / "bm25s").iterdir())
    assert listed == hash_files(saved, listed)


def _rewrite(d, name, change):
    """Replace bm25s array ``name`` by ``change(array)`` (and re-record the checksums)."""
    f = d / "bm25s" / f"{name}.csc.index.npy"
    np.save(f, change(np.load(f)))
    _rehash(d)


def _flip_byte(d):
    f = d / "bm25s" / "indices.csc.index.npy"
    raw = bytearray(f.read_bytes())
    raw[-1] ^= 0x55
    f.write_bytes(bytes(raw))


CORRUPTIONS = {
    "indices_negative": (
        lambda d: _rewrite(d, "indices", lambda a: np.where(np.arange(len(a)) == 3, -7, a)),
        "'indices' holds document ids outside",
    ),
    "indptr_decreasing": (
        lambda d: _rewrite(d, "indptr", lambda a: np.where(np.arange(len(a)) == 2, a[-1], a)),
        "'indptr' must rise from 0",
    ),
    "indptr_not_from_zero": (lambda d: _rewrite(d, "indptr", lambda a: a + 1), "'indptr' must rise from 0"),
    "data_nan": (
        lambda d: _rewrite(d, "data", lambda a: np.where(np.arange(len(a)) == 0, np.nan, a).astype(a.dtype)),
        "NaN or infinite",
    ),
    "data_inf": (lambda d: _rewrite(d, "data", lambda a: np.full_like(a, np.inf)), "NaN or infinite"),
    "indices_float": (
        lambda d: _rewrite(d, "indices", lambda a: a.astype(np.float64)),
        "'indices' must be a 1-d integer",
    ),
    "data_2d": (lambda d: _rewrite(d, "data", lambda a: a.reshape(1, -1)), "'data' must be a 1-d float"),
    "indices_short": (lambda d: _rewrite(d, "indices", lambda a: a[:-1]), "inconsistent lengths"),
    "vocab_out_of_range": (
        lambda d: (
            (d / "bm25s" / "vocab.index.json").write_text(
                json.dumps({t: i + 1 for t, i in json.loads((d / "bm25s" / "vocab.index.json").read_text()).items()})
            ),
            _rehash(d),
        ),
        "vocabulary does not map one to one",
    ),
    "flipped_byte": (_flip_byte, "indices.csc.index.npy does not match the checksum"),
}


@pytest.mark.parametrize("mmap", [False, True])
@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_corrupt_index_arrays_raise_index_format_error(saved, corruption, mmap):
    corrupt, message = CORRUPTIONS[corruption]
    corrupt(saved)
    with pytest.raises(IndexFormatError, match=f"{message}.*searchgym index build"):
        BM25Retriever.load(saved, mmap=mmap)


def test_out_of_range_document_ids_raise_instead_of_crashing(saved):
    """An ``indices`` entry past the corpus used to SIGSEGV the process at the first search; run in a
    child process so a regression fails this test instead of killing the test run."""
    _rewrite(saved, "indices", lambda a: np.where(np.arange(len(a)) == len(a) // 2, 10**6, a).astype(a.dtype))
    code = (
        "import sys\n"
        "from searchgym.retrieval import BM25Retriever, IndexFormatError\n"
        "try:\n"
        f"    r = BM25Retriever.load({str(saved)!r})\n"
        "except IndexFormatError as exc:\n"
        "    print(exc); sys.exit(3)\n"
        "print(r.batch_search(['capital of Merovia', 'Bob Varn Tarsk Ostrel weather'] * 50, k=5))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert proc.returncode == 3, (proc.returncode, proc.stderr[-2000:])
    assert "'indices' holds document ids outside [0, " in proc.stdout and "searchgym index build" in proc.stdout


def test_index_without_checksums_loads_with_a_warning_and_is_still_checked(saved, caplog):
    m = saved / "manifest.json"
    manifest = json.loads(m.read_text())
    del manifest["files_sha256"]  # as written before checksums existed
    m.write_text(json.dumps(manifest))
    with caplog.at_level("WARNING", logger="searchgym.retrieval.storage"):
        assert BM25Retriever.load(saved).search("capital of Merovia")
    assert "no file checksums" in caplog.text
    f = saved / "bm25s" / "data.csc.index.npy"
    np.save(f, np.full_like(np.load(f), np.nan))
    with pytest.raises(IndexFormatError, match="NaN or infinite"):
        BM25Retriever.load(saved)


def test_wrong_backend_and_garbage_manifest(saved):
    m = saved / "manifest.json"
    manifest = json.loads(m.read_text())
    m.write_text(json.dumps({**manifest, "backend": "dense"}))
    with pytest.raises(IndexFormatError, match="holds a 'dense' index"):
        BM25Retriever.load(saved)
    m.write_text("{not json")
    with pytest.raises(IndexFormatError, match="unreadable"):
        BM25Retriever.load(saved)
    m.write_text(json.dumps({**manifest, "version": 99}))
    with pytest.raises(IndexFormatError, match="version 99"):
        load_index(saved)


def test_rank_bm25_agrees_on_top1(tiny_world, bm25):
    rank = RankBM25Retriever.from_world(tiny_world)
    for q in ["capital of Merovia", "Bob Varn painter", "Dura Labs", "chemist", "rains hills", "Tarsk city"]:
        assert rank.search(q, k=1)[0].doc_id == bm25.search(q, k=1)[0].doc_id, q
    assert rank.search("the of") == [] and rank.search("") == []
    assert len(rank.search("Merovia", k=100)) == len(bm25.search("Merovia", k=100))


def test_rank_bm25_save_load(tiny_world, tmp_path):
    rank = RankBM25Retriever.from_world(tiny_world, k1=1.2)
    rank.save(tmp_path / "r")
    for loaded in (RankBM25Retriever.load(tmp_path / "r"), load_index(tmp_path / "r")):
        assert isinstance(loaded, RankBM25Retriever) and loaded.params() == rank.params()
        assert loaded.batch_search(["capital of Merovia", "painter"], k=3) == rank.batch_search(
            ["capital of Merovia", "painter"], k=3
        )
    with pytest.raises(IndexFormatError, match="holds a 'rank-bm25' index, not 'bm25'"):
        BM25Retriever.load(tmp_path / "r")


def test_rank_bm25_handles_empty_documents():
    r = RankBM25Retriever(["a", "b"], ["", ""], ["", "words here"], index_titles=False)
    assert [h.doc_id for h in r.search("words")] == ["b"]


def test_analyzer_is_deterministic_and_stems():
    a = Analyzer()
    assert a.terms("The Painters were PAINTING") == ["painter", "were", "paint"]
    ids, vocab = a.corpus_ids(["bee and cats x", "cat bee"])
    assert vocab == {"bee": 0, "cat": 1} and ids == [[0, 1], [1, 0]]  # "and" is a stopword, "x" too short
    assert Analyzer(stopwords=None, stemmer=None).terms("The cats") == ["the", "cats"]


def test_default_world_finds_entity_articles(default_world):
    r = BM25Retriever.from_world(default_world)
    ents = list(default_world.entities())[:: max(1, default_world.num_entities // 20)]
    found = 0
    for e in ents:
        docs = {d.id for d in default_world.documents_of(e.id)}
        if docs and docs & {h.doc_id for h in r.search(e.title, k=3)}:
            found += 1
    assert found >= 0.8 * len(ents)


def test_make_retriever_caches_per_world_and_settings(tiny_world):
    a = make_retriever(tiny_world)
    assert make_retriever(tiny_world, "bm25") is a
    assert make_retriever(tiny_world, "bm25", k1=1.2) is not a
    assert make_retriever(tiny_world, cache=False) is not a
    assert isinstance(make_retriever(tiny_world, "rank-bm25"), RankBM25Retriever)
    with pytest.raises(ValueError, match="unknown retrieval backend 'elastic'"):
        make_retriever(tiny_world, "elastic")
    with pytest.raises(ValueError, match="needs url="):
        make_retriever(backend="remote")
    with pytest.raises(ValueError, match="needs a world"):
        make_retriever(None, "bm25")


def test_passage_retriever_moved_to_the_factory():
    """passages.py only splits text; the retriever over passages is the factory's."""
    import searchgym.retrieval.passages as passages

    with pytest.raises(AttributeError, match="from searchgym.retrieval import passage_retriever"):
        passages.passage_retriever
