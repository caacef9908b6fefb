"""``searchgym eval`` resume keeps every good record and refuses what it cannot trust (issue 33, items 2, 6, 7).

* a corrupt line in the middle of ``eval.jsonl`` is refused naming file and line -- nothing after it is
  truncated away -- and a blank one is skipped; only a torn *last* line is dropped;
* a question on two lines is refused naming both;
* every setting that can change a record (seed, temperature, max new tokens, model, retriever, world, ...)
  is in the run's fingerprint: a rerun with another value is refused naming both values;
* the seeded ``random`` agent writes the same records at any ``--concurrency``.
"""

from __future__ import annotations

import json
import re

import pytest

from searchgym.agents import AgentSpec, make_agent
from searchgym.cli import main
from searchgym.core.jsonl import JsonlFormatError
from searchgym.evaluation import EvalConfig, evaluate
from searchgym.tasks import load_tasksets
from tests.hostile.conftest import EVAL_FIXTURES
from tests.support.construction_world import build_random_world
from tests.support.openai_server import OpenAIStubServer

TASKS = "tiny=" + str(EVAL_FIXTURES / "tiny_qa.jsonl")


def _run(tiny_world, out, **config):
    return evaluate(
        make_agent(AgentSpec("scripted"), world=tiny_world),
        load_tasksets(TASKS),
        world=tiny_world,
        config=EvalConfig(progress=False, concurrency=2, **config),
        output_dir=out,
    )


def _lines(path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_a_corrupt_middle_line_is_refused_and_nothing_is_truncated(tiny_world, saved_tiny, tmp_path, capsys):
    _run(tiny_world, tmp_path)
    records = tmp_path / "eval.jsonl"
    full = _lines(records)
    records.write_text(full[0] + "\n{not json\n" + "".join(x + "\n" for x in full[1:]))
    before = records.read_bytes()
    with pytest.raises(JsonlFormatError, match=r"eval\.jsonl: line 2 is not valid JSON .*; fix or delete that line"):
        _run(tiny_world, tmp_path)
    assert records.read_bytes() == before  # the five good records after the bad line are all still there
    # through the command line: one line naming file and line, exit 2
    args = ["eval", "--tasks", TASKS, "--world", str(saved_tiny), "--output-dir", str(tmp_path), "--no-progress"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "eval.jsonl: line 2" in err and "fix or delete that line" in err
    assert records.read_bytes() == before


def test_a_blank_middle_line_keeps_every_record_after_it(tiny_world, tmp_path):
    _run(tiny_world, tmp_path)
    records = tmp_path / "eval.jsonl"
    full = _lines(records)
    records.write_text("".join(x + "\n" for x in full[:2]) + "\n" + "".join(x + "\n" for x in full[2:]))
    res = _run(tiny_world, tmp_path)
    assert res.summary["timing"]["questions_this_run"] == 0  # nothing recomputed
    assert [x for x in _lines(records) if x] == full


def test_a_question_on_two_lines_is_refused(tiny_world, tmp_path):
    _run(tiny_world, tmp_path)
    records = tmp_path / "eval.jsonl"
    with open(records, "a", encoding="utf-8") as f:
        f.write(_lines(records)[0] + "\n")  # what two runs appending at once leave behind
    key = json.loads(_lines(records)[0])["key"]
    with pytest.raises(JsonlFormatError, match=rf"line 7: duplicate question key '{key}' \(first on line 1\)"):
        _run(tiny_world, tmp_path)


def test_every_setting_that_changes_a_record_is_in_the_fingerprint(saved_tiny, tmp_path, capsys):
    other_world = tmp_path / "other_world"
    build_random_world(40, seed=3).save(other_world)
    out = tmp_path / "run"
    with OpenAIStubServer(lambda messages, body: "<answer>Tarsk</answer>") as srv:
        base = ["eval", "--agent", "openai", "--endpoint", srv.url, "--model", "m1", "--tasks", TASKS]
        base += ["--world", str(saved_tiny), "--output-dir", str(out), "--no-progress"]
        assert main(base) == 0
        assert main(base + ["--concurrency", "3", "--timeout", "30"]) == 0  # these never change a record
        capsys.readouterr()
        changes = {
            "--seed": ("1", "seed: was 0, now 1"),
            "--temperature": ("0.7", "agent_settings.temperature: was 0.0, now 0.7"),
            "--max-new-tokens": ("64", "agent_settings.max_new_tokens: was 512, now 64"),
            "--model": ("m2", 'agent_settings.model: was "m1", now "m2"'),
            "--retriever": ("http://127.0.0.1:9/", 'retriever: was null, now "http://127.0.0.1:9/"'),
            "--world": (str(other_world), "world: was ["),
            "--top-k": ("5", "top_k: was 3, now 5"),
            "--layout": ("search-r1", 'layout: was "searchgym", now "search-r1"'),
        }
        for flag, (value, expected) in changes.items():
            assert main(base + [flag, value]) == 2, flag
            err = capsys.readouterr().err
            assert "holds an evaluation run with other settings" in err and expected in err, (flag, err)
        assert main(base + ["--trajectories"]) == 2
        assert "save_trajectories: was false, now true" in capsys.readouterr().err
        assert main(base) == 0  # the original settings still resume


def test_random_agent_records_do_not_depend_on_concurrency(tiny_world):
    def records(concurrency, seed=0):
        res = evaluate(
            make_agent(AgentSpec("random", seed=seed)),
            load_tasksets(TASKS),
            world=tiny_world,
            config=EvalConfig(progress=False, concurrency=concurrency, seed=seed, save_trajectories=True),
        )
        return res.records

    one = records(1)
    assert records(16) == one
    assert records(4) == one
    other = records(1, seed=1)
    assert [r["trajectory"] for r in other] != [r["trajectory"] for r in one]  # the seed still matters
    assert any(re.search(r"\w", s["text"]) for r in one for s in r["trajectory"]["segments"] if s["source"] == "agent")
