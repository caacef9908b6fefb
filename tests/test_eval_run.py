"""``searchgym eval`` end to end: a real loopback OpenAI-compatible server (the tests' own), the real
retrieval server, the Search-R1 layout, resume after a kill, an endpoint going down, the LLM judge,
--compare and the CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from searchgym.agents import AgentSpec, make_agent
from searchgym.evaluation import EvalConfig, EvalInterrupted, evaluate
from searchgym.tasks import load_tasksets
from tests.support.openai_server import OpenAIStubServer

FIX = Path(__file__).parent / "fixtures" / "eval"
ROOT = Path(__file__).resolve().parents[1]

# question -> (what the stub model searches for, what it answers); q5 is answered wrongly and q6 verbosely
PLAN = {
    "Where was Alice Varn born?": ("Alice Varn", "Tarsk"),
    "What is the capital of Merovia?": ("Merovia capital", "Ostrel"),
    "In which country is Tarsk located?": ("Tarsk", "the Republic of Merovia"),
    "In which country was Alice Varn born?": ("Alice Varn", "Merovia"),
    "Where was Bob Varn born?": ("Bob Varn", "Tarsk"),
    "When was the country of Tarsk founded?": ("Merovia founded", "in 1204"),
}


def _question(messages) -> str:
    return messages[0]["content"].rsplit("Question:", 1)[1].strip()


def stub_model(messages, body) -> str:
    """A scripted 'model' behind the OpenAI protocol: search first, answer once it has read."""
    search, answer = PLAN[_question(messages)]
    if len(messages) == 1:
        return f"<think>I need to look up {search}.</think>\n<search>{search}</search>"
    return f"<think>The documents say {answer}.</think>\n<answer>{answer}</answer>"


@pytest.fixture(scope="module")
def retrieval_server(tiny_world):
    from searchgym.retrieval.bm25 import BM25Retriever
    from searchgym.retrieval.server import RetrievalServer

    with RetrievalServer(BM25Retriever.from_world(tiny_world), port=0) as srv:
        yield srv


@pytest.fixture(scope="module")
def saved_tiny(tiny_world, tmp_path_factory):
    from searchgym.world import save_world

    path = tmp_path_factory.mktemp("world") / "tiny"
    save_world(tiny_world, path)
    return path


def _tasks():
    return load_tasksets("tiny=" + str(FIX / "tiny_qa.jsonl"))


def test_openai_endpoint_with_real_retrieval_server(tiny_world, retrieval_server, tmp_path):
    with OpenAIStubServer(stub_model) as srv:
        agent = make_agent(AgentSpec("openai", endpoint=srv.url, model="stub", concurrency=4))
        res = evaluate(
            agent,
            _tasks(),
            retriever=retrieval_server.url,
            world=tiny_world,
            config=EvalConfig(concurrency=4, progress=False),
            output_dir=tmp_path,
        )
        agent.close()
    by_id = {r["id"]: r for r in res.records}
    assert by_id["q1"]["em"] == 1.0 and by_id["q1"]["searches"] == 1 and by_id["q1"]["turns"] == 2
    assert by_id["q3"]["em"] == 1.0  # "the Republic of Merovia" is a gold alias
    assert by_id["q5"]["em"] == by_id["q5"]["cover_em"] == 0.0
    assert by_id["q6"]["em"] == 0.0 and by_id["q6"]["cover_em"] == 1.0 and by_id["q6"]["f1"] == pytest.approx(2 / 3)
    d = res.summary["datasets"]["tiny"]
    assert d["n"] == 6 and d["em"]["mean"] == pytest.approx(4 / 6) and d["em"]["lo"] <= 4 / 6 <= d["em"]["hi"]
    assert set(d["by_hops"]) == {"1", "2"} and d["invalid_format"] == 0.0
    assert len(srv.requests) == 12  # 6 questions x (search turn + answer turn)
    for name in ("records", "summary", "table", "plot"):
        assert res.files[name].is_file()
    assert "| tiny | 6 | 66.7 ±" in res.files["table"].read_text()
    lines = res.files["records"].read_text().splitlines()
    assert len(lines) == 6 and {json.loads(x)["key"] for x in lines} == {f"tiny/q{i}" for i in range(1, 7)}


def test_search_r1_layout_is_byte_exact(tiny_world, retrieval_server):
    with OpenAIStubServer(stub_model) as srv:
        agent = make_agent(AgentSpec("openai", endpoint=srv.url, concurrency=1))
        tasks = load_tasksets("tiny=" + str(FIX / "tiny_qa.jsonl"), limit=1, seed=0)
        evaluate(
            agent,
            tasks,
            retriever=retrieval_server.url,
            world=tiny_world,
            config=EvalConfig(layout="search-r1", concurrency=1, progress=False),
        )
        agent.close()
    from searchgym.tasks.tasksets import search_r1_prompt

    second = srv.requests[1]["messages"]
    # Search-R1's own prompt, byte for byte ("as many times as your want" included)
    assert second[0]["content"] == search_r1_prompt(_question(second))
    assert "as many times as your want." in second[0]["content"]
    text = second[1]["content"]
    search, _ = PLAN[_question(second)]
    head = f'<think>I need to look up {search}.</think>\n<search>{search}</search>\n\n<information>Doc 1(Title: "'
    assert text.startswith(head) and text.endswith("</information>\n\n"), text
    assert '\nDoc 2(Title: "' in text and "Doc 1 (Title" not in text


def test_eval_seed_seeds_every_episode(tiny_world, monkeypatch):
    """``EvalConfig.seed`` (``searchgym eval --seed``) reaches the envs: each question's episode is reset with
    a seed made from it and the question, so another seed draws anew and the same seed repeats."""
    import gymnasium as gym

    from searchgym.core.rng_state import stable_seed
    from searchgym.evaluation import runner
    from searchgym.tasks.tasksets import task_key

    seen: dict[str, int] = {}

    class Recording(gym.Wrapper):
        def reset(self, *, seed=None, options=None):
            seen[task_key(options["task"])] = seed
            return super().reset(seed=seed, options=options)

    made = runner.solver_envs
    monkeypatch.setattr(runner, "solver_envs", lambda *a, **k: [Recording(e) for e in made(*a, **k)])
    tasks = _tasks()
    for seed in (0, 7):
        seen.clear()
        agent = make_agent(AgentSpec("scripted"), world=tiny_world)
        evaluate(agent, tasks, world=tiny_world, config=EvalConfig(seed=seed, progress=False, concurrency=2))
        assert seen and seen == {task_key(t): stable_seed(seed, task_key(t)) for ts in tasks for t in ts.tasks}


def test_trajectories_on_request_and_tokens(tiny_world):
    tasks = _tasks()
    res = evaluate(
        make_agent(AgentSpec("scripted"), world=tiny_world),
        tasks,
        world=tiny_world,
        config=EvalConfig(save_trajectories=True, progress=False, concurrency=2),
    )
    rec = res.records[0]
    assert rec["trajectory"]["task"]["question"] == rec["question"] and rec["tokens"] > 0
    assert rec["trajectory"]["segments"][0]["source"] == "prompt"


def test_endpoint_down_keeps_partial_results(tiny_world, tmp_path):
    answered = []

    def reply(messages, body):
        text = stub_model(messages, body)
        if "<answer>" in text:
            answered.append(1)
            if len(answered) == 3:  # the server goes away after answering three questions
                threading.Thread(target=lambda: (srv._server.shutdown(), srv._server.server_close())).start()
        return text

    srv = OpenAIStubServer(reply).__enter__()
    agent = make_agent(AgentSpec("openai", endpoint=srv.url, concurrency=1, timeout=2, retries=1))
    with pytest.raises(EvalInterrupted, match=r"after 3 questions.*cannot reach.*rerun the same command to resume"):
        evaluate(
            agent, _tasks(), world=tiny_world, config=EvalConfig(concurrency=1, progress=False), output_dir=tmp_path
        )
    agent.close()
    assert len((tmp_path / "eval.jsonl").read_text().splitlines()) == 3


def test_llm_judge_fails_closed_and_counts_errors(tiny_world):
    from searchgym.llm.openai_client import OpenAICompatibleGenerator
    from searchgym.scoring.judge import LLMJudge

    def judge_reply(messages, body):
        return "Correct" if "1204" in messages[0]["content"] else "I am not sure."

    with OpenAIStubServer(stub_model) as model_srv, OpenAIStubServer(judge_reply) as judge_srv:
        agent = make_agent(AgentSpec("openai", endpoint=model_srv.url, concurrency=3))
        judge = LLMJudge(OpenAICompatibleGenerator(judge_srv.url))
        res = evaluate(
            agent,
            _tasks(),
            world=tiny_world,
            judge=judge,
            config=EvalConfig(metrics=("em", "llm_judge"), concurrency=3, progress=False),
        )
        agent.close()
    by_id = {r["id"]: r for r in res.records}
    assert by_id["q1"]["llm_judge"] == 1.0 and by_id["q1"]["llm_judge_error"] is None  # EM first, no call
    assert by_id["q6"]["llm_judge"] == 1.0  # judged Correct
    assert by_id["q5"]["llm_judge"] == 0.0 and "unparseable" in by_id["q5"]["llm_judge_error"]
    assert res.summary["datasets"]["tiny"]["llm_judge_errors"] == 1
    assert len(judge_srv.requests) == 2


def test_resume_after_kill(retrieval_server, saved_tiny, tmp_path):
    """Kill a CLI run mid-way; the rerun finishes without redoing or duplicating finished questions."""
    asked: list[str] = []

    def slow_model(messages, body):
        asked.append(_question(messages))
        return stub_model(messages, body)

    out = tmp_path / "run"
    with OpenAIStubServer(slow_model, delay=0.25) as srv:
        cmd = [
            sys.executable,
            "-m",
            "searchgym.cli",
            "eval",
            "--agent",
            "openai",
            "--endpoint",
            srv.url,
            "--tasks",
            "tiny=" + str(FIX / "tiny_qa.jsonl"),
            "--world",
            str(saved_tiny),
            "--retriever",
            retrieval_server.url,
            "--concurrency",
            "1",
            "--output-dir",
            str(out),
            "--no-progress",
        ]
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        records = out / "eval.jsonl"
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None:
            if records.is_file() and len(records.read_text().splitlines()) >= 2:
                break
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        before = [json.loads(x)["question"] for x in records.read_text().splitlines()]
        assert 2 <= len(before) < 6
        asked.clear()
        res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stderr
    keys = [json.loads(x)["key"] for x in records.read_text().splitlines()]
    assert sorted(keys) == [f"tiny/q{i}" for i in range(1, 7)]  # all six, none twice
    assert not set(before) & set(asked)  # finished questions not asked again
    assert "| tiny | 6 |" in res.stdout


def test_compare_two_runs(tiny_world, tmp_path):
    from searchgym.evaluation import compare_runs

    tasks = _tasks()
    evaluate(
        make_agent(AgentSpec("random")),
        tasks,
        world=tiny_world,
        output_dir=tmp_path / "a",
        config=EvalConfig(progress=False),
    )
    with OpenAIStubServer(stub_model) as srv:
        agent = make_agent(AgentSpec("openai", endpoint=srv.url))
        evaluate(agent, _tasks(), world=tiny_world, output_dir=tmp_path / "b", config=EvalConfig(progress=False))
        agent.close()
    table, nums = compare_runs(tmp_path / "a" / "summary.json", tmp_path / "b" / "summary.json")
    assert nums["tiny"]["em"]["b"] == pytest.approx(4 / 6) and nums["tiny"]["em"]["a"] == 0.0
    d = nums["tiny"]["em"]["diff"]
    assert d["mean"] == pytest.approx(4 / 6) and d["lo"] > 0  # the gain is clear of zero
    assert "Δ EM" in table and "tiny · 2 hops" in table


def test_cli_scripted_and_bad_input(saved_tiny, tmp_path, capsys):
    from searchgym.cli import main

    out = tmp_path / "cli"
    rc = main(
        [
            "eval",
            "--agent",
            "scripted",
            "--tasks",
            "tiny=" + str(FIX / "tiny_qa.jsonl"),
            "--world",
            str(saved_tiny),
            "--output-dir",
            str(out),
            "--no-progress",
        ]
    )
    assert rc == 0
    printed = capsys.readouterr().out
    assert "| tiny | 6 |" in printed and "questions/s" in printed
    assert (out / "accuracy.png").stat().st_size > 1000
    assert main(["eval", "--compare", str(out / "summary.json"), str(out / "summary.json")]) == 0
    assert "+0.0 [+0.0, +0.0]" in capsys.readouterr().out
    assert main(["eval", "--agent", "gpt5", "--output-dir", str(tmp_path / "x")]) == 2
    assert "scripted, random, transformers, vllm, openai" in capsys.readouterr().err
    assert main(["eval", "--metrics", "em,rouge", "--tasks", str(FIX / "tiny_qa.jsonl")]) == 2
    assert "choose from em, f1, cover_em, llm_judge" in capsys.readouterr().err
    assert main(["eval", "--tasks", str(FIX / "tiny_nogold.jsonl"), "--world", str(saved_tiny)]) == 2
    assert "golden_answers" in capsys.readouterr().err
    # the same --out with other settings is refused instead of mixing two runs
    assert (
        main(
            [
                "eval",
                "--agent",
                "scripted",
                "--tasks",
                "tiny=" + str(FIX / "tiny_qa.jsonl"),
                "--world",
                str(saved_tiny),
                "--output-dir",
                str(out),
                "--max-turns",
                "3",
                "--no-progress",
            ]
        )
        == 2
    )
    assert "--restart" in capsys.readouterr().err


def test_cli_vllm_without_vllm_is_a_clear_error(capsys):
    pytest.importorskip("torch")
    try:
        import vllm  # noqa: F401
    except ImportError:
        from searchgym.cli import main

        assert main(["eval", "--agent", "vllm", "--model", "smollm2", "--tasks", str(FIX / "tiny_qa.jsonl")]) == 2
        assert "pip install 'searchgym[vllm]'" in capsys.readouterr().err
    else:
        pytest.skip("vllm is installed")


def test_a_model_named_for_a_model_free_agent_is_refused_not_ignored(capsys):
    """``searchgym eval --model DIR`` without ``--agent`` once evaluated the scripted expert and printed its scores
    as if they were the model's (exit 0); what names a model now needs an LLM agent, in one line naming the fix."""
    from searchgym.cli import main
    from searchgym.errors import InvalidArgumentError

    assert main(["eval", "--model", "runs/ssp/final", "--limit", "2", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--model is for an LLM agent, but --agent is 'scripted'" in err
    assert "--agent transformers" in err and "Traceback" not in err
    with pytest.raises(InvalidArgumentError, match="--endpoint and --api-key are for an LLM agent"):
        AgentSpec("random", endpoint="http://127.0.0.1:1/v1", api_key="k")
    with pytest.raises(InvalidArgumentError, match="--device is for an LLM agent"):
        AgentSpec("scripted", device="cuda")
    with pytest.raises(InvalidArgumentError, match="--device is for a local model .* --agent openai does not read it"):
        AgentSpec("openai", endpoint="http://127.0.0.1:1/v1", device="cuda")
    with pytest.raises(InvalidArgumentError, match="--endpoint and --api-key are for a served model"):
        AgentSpec("transformers", model="smollm2", endpoint="http://127.0.0.1:1/v1", api_key="k")
    assert AgentSpec("scripted").record_settings() == {}  # the model-free agents still need nothing


@pytest.mark.parametrize("command", ["play", "eval"])
def test_zero_turns_is_refused_not_read_as_the_default(command, capsys):
    """``--max-turns 0`` once played the default 10 turns (``args.max_turns or DEFAULT``) and exited 0."""
    from searchgym.cli import main

    assert main([command, "--max-turns", "0", *(["--games", "1"] if command == "play" else ["--limit", "1"])]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and ("max_turns=0" in err or "got 0" in err), err
