"""Baselines on outside data: ``searchgym eval --agent scripted`` answers FlashRAG / Search-R1 questions
(no KG path, no world) from the text it retrieved, scored on a file in Search-R1's ``test.parquet``
layout; ``--agent openai`` scores records through a real OpenAI-compatible server process on loopback
(:mod:`searchgym.llm.openai_server` serving the tiny model through the transformers backend), whose
request and reply shapes the official ``openai`` client accepts."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from searchgym.cli import main

FIX = Path(__file__).parent / "fixtures" / "eval"
SEARCH_R1_PROMPT = (
    "Answer the given question. You must conduct reasoning inside <think> and </think> first every time you get "
    "new information. After reasoning, if you find you lack some knowledge, you can call a search engine by "
    "<search> query </search> and it will return the top searched results between <information> and "
    "</information>. You can search as many times as your want. If you find no further external knowledge "
    "needed, you can directly provide the answer inside <answer> and </answer>, without detailed illustrations. "
    "For example, <answer> Beijing </answer>. Question: {q}\n"
)


@pytest.fixture(scope="module")
def retrieval_server(tiny_world):
    from searchgym.retrieval.bm25 import BM25Retriever
    from searchgym.retrieval.server import RetrievalServer

    with RetrievalServer(BM25Retriever.from_world(tiny_world), port=0) as srv:
        yield srv


def _search_r1_parquet(path: Path) -> None:
    """The tiny QA questions in Search-R1's test.parquet layout (lower-cased questions, as its NQ rows are)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [json.loads(line) for line in (FIX / "tiny_qa.jsonl").read_text().splitlines() if line.strip()]
    questions = [r["question"][0].lower() + r["question"][1:] for r in rows]
    table = pa.table(
        {
            "id": [f"test_{i}" for i in range(len(rows))],
            "question": questions,
            "golden_answers": [r["golden_answers"] for r in rows],
            "data_source": ["nq" if i % 2 == 0 else "hotpotqa" for i in range(len(rows))],
            "prompt": [[{"content": SEARCH_R1_PROMPT.format(q=q), "role": "user"}] for q in questions],
            "ability": ["fact-reasoning"] * len(rows),
            "reward_model": [{"ground_truth": {"target": r["golden_answers"]}, "style": "rule"} for r in rows],
            "extra_info": [{"index": i, "split": "test"} for i in range(len(rows))],
        }
    )
    pq.write_table(table, path)


def test_scripted_baseline_reads_answers_without_a_world(retrieval_server, tmp_path, capsys):
    pytest.importorskip("pyarrow")
    data = tmp_path / "test.parquet"
    _search_r1_parquet(data)
    out = tmp_path / "run"
    rc = main(
        [
            "eval",
            "--agent",
            "scripted",
            "--tasks",
            str(data),
            "--retriever",
            retrieval_server.url,
            "--output-dir",
            str(out),
        ]
        + ["--no-progress", "--concurrency", "1"]
    )
    assert rc == 0, capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["datasets"]) == {"nq", "hotpotqa"}
    for name, d in summary["datasets"].items():
        assert d["n"] == 3 and d["em"]["mean"] > 0, (name, d)
    records = [json.loads(x) for x in (out / "eval.jsonl").read_text().splitlines()]
    assert len(records) == 6 and all(r["searches"] == 1 for r in records)
    assert sum(r["em"] for r in records) >= 4  # read from the retrieved passages: no KG path, no world


@pytest.fixture(scope="module")
def served_tiny():
    """``python -m searchgym.llm.openai_server --model tiny --port 0``: a real server process."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "searchgym.llm.openai_server", "--model", "tiny", "--port", "0"]
        + ["--max-new-tokens", "24", "--threads", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    lines: queue.Queue = queue.Queue()
    stdout = proc.stdout
    assert stdout is not None
    threading.Thread(target=lambda: lines.put(stdout.readline()), daemon=True).start()
    try:
        first = lines.get(timeout=300)
    except queue.Empty:
        first = ""
    try:
        assert first.startswith("serving tiny at http://127.0.0.1:"), (first, proc.poll())
        yield first.split(" at ", 1)[1].strip()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_official_client_talks_to_the_server(served_tiny):
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=served_tiny, api_key="unused", max_retries=0, timeout=120)
    assert [m.id for m in client.models.list()] == ["tiny"]
    messages = [{"role": "user", "content": "Where was Alice Varn born?"}]
    chat = client.chat.completions.create(model="tiny", messages=messages, max_tokens=8, temperature=0, seed=3)
    choice = chat.choices[0]
    assert isinstance(choice.message.content, str) and choice.message.role == "assistant"
    assert choice.finish_reason in ("stop", "length") and 0 < chat.usage.completion_tokens <= 8
    assert chat.usage.total_tokens == chat.usage.prompt_tokens + chat.usage.completion_tokens
    again = client.chat.completions.create(model="tiny", messages=messages, max_tokens=8, temperature=0, seed=3)
    assert again.choices[0].message.content == choice.message.content  # greedy: the same text
    stopped = client.chat.completions.create(
        model="tiny", messages=messages, max_completion_tokens=24, temperature=1.0, seed=5, stop=["e"]
    )
    assert "e" not in stopped.choices[0].message.content  # cut at the first stop string, which is dropped
    text = client.completions.create(model="tiny", prompt="Alice Varn was born in", max_tokens=5, temperature=0)
    assert isinstance(text.choices[0].text, str) and text.usage.completion_tokens <= 5
    with pytest.raises(openai.BadRequestError, match="only n=1"):
        client.chat.completions.create(model="tiny", messages=messages, n=2)


def test_eval_agent_openai_scores_records_through_the_server(served_tiny, retrieval_server, tmp_path, capsys):
    out = tmp_path / "run"
    rc = main(
        ["eval", "--agent", "openai", "--endpoint", served_tiny, "--model", "tiny", "--retriever", retrieval_server.url]
        + ["--tasks", "tiny=" + str(FIX / "tiny_qa.jsonl"), "--max-new-tokens", "16", "--max-turns", "2"]
        + ["--output-dir", str(out), "--no-progress", "--concurrency", "2"]
    )
    assert rc == 0, capsys.readouterr().err
    records = [json.loads(x) for x in (out / "eval.jsonl").read_text().splitlines()]
    assert len(records) == 6 and {r["key"] for r in records} == {f"tiny/q{i}" for i in range(1, 7)}
    assert all(r["turns"] == 2 and r["tokens"] > 0 for r in records), records[0]  # the model wrote every turn
    summary = json.loads((out / "summary.json").read_text())
    assert summary["datasets"]["tiny"]["n"] == 6
    assert "openai:tiny@" in json.dumps(summary)
