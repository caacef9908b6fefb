"""searchgym's verifiers environment (``searchgym-verifiers``), run through the real verifiers package (0.4.0,
``verifiers.v1``): its loader, its serving / interception stack and eval client, its scoring (``@reward`` /
``@metric``), and its own command line ``vf-eval``. The model is searchgym's OpenAI-compatible server
(:mod:`searchgym.llm.openai_server`) in front of a scripted generator (exact rewards) or the tiny random model
(the CLI run); the function-calling path goes through the tests' stub server, which can send ``tool_calls``.
Skipped without the ``verifiers`` extra."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

vf = pytest.importorskip("verifiers.v1", reason="needs the verifiers extra (pip install -e '.[verifiers]')")

from searchgym.core.llm import TextGenerator  # noqa: E402
from searchgym.integrations.environments import EnvSpec  # noqa: E402
from searchgym.integrations.episode import TURN_STOPS  # noqa: E402
from searchgym.integrations.text_rollout import TextRollout  # noqa: E402
from searchgym.integrations.verifiers import ENV_ID, load_environment, result_of  # noqa: E402
from searchgym.llm.openai_server import OpenAIServer, load_generator  # noqa: E402
from searchgym.llm.tiny_models import question_of  # noqa: E402
from tests.support.openai_server import OpenAIStubServer  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
KEY_VAR = "SEARCHGYM_TEST_KEY"


class ScriptedGenerator(TextGenerator):
    """Searches the question, then answers: the gold for tasks in ``correct``, else a wrong answer whose
    reasoning walks the task's waypoints (WCR's bonus). Ends each turn on its closing tag, as a model stopping
    at a stop string would (the server then drops it, as OpenAI-compatible servers do)."""

    def __init__(self, tasks: dict, correct: set) -> None:
        self.tasks, self.correct, self.stops = tasks, correct, []

    def generate(self, prompts, config=None):
        out = []
        for messages in prompts:
            self.stops.append(tuple(config.stop) if config else ())
            task = self.tasks[question_of(messages[0]["content"] + "\n")]
            if not any(m["role"] == "assistant" for m in messages):
                out.append(f"<think>I need facts.</think><search>{task.question}</search>")
            elif task.id in self.correct:
                out.append(f"<answer>{task.answers[0]}</answer>")
            else:
                out.append(f"<think>via {', '.join(task.waypoints)}</think><answer>surely not this</answer>")
        return out


def run_episodes(env, tasks, server_url):
    """Every task once through verifiers' own serving stack (interception server, eval client)."""
    os.environ[KEY_VAR] = "unused"
    ctx = vf.ModelContext(model="scripted", client=vf.EvalClientConfig(base_url=server_url, api_key_var=KEY_VAR))

    async def main():
        async with env.serving():
            return await asyncio.gather(*(env.run_slot(slot, ctx) for t in tasks for slot in env.slots(t)))

    return asyncio.run(main())


def test_rollouts_score_the_envs_reward_and_components():
    env = load_environment(rewards="wcr")
    assert type(env).__name__ == "SearchGymEnv" and env.config.agent.runtime.type == "subprocess"
    tasks = list(env.taskset.take(2))
    by_question = {t.data.searchgym["task"]["question"]: _task(t) for t in tasks}
    right = _task(tasks[0]).id
    gen = ScriptedGenerator(by_question, {right})
    with OpenAIServer(gen, "scripted") as server:
        episodes = run_episodes(env, tasks, server.url)
    assert set(gen.stops) == {tuple(TURN_STOPS)}  # the tag protocol's turns stop at the closing tags
    for episode in episodes:
        assert episode.ok, episode.errors
        (trace,) = episode.traces
        result = result_of(trace)
        roles = [m.role for m in trace.messages]
        assert roles == ["user", "assistant", "user", "assistant"]
        turns = [m.content for m in trace.messages if m.role == "assistant"]
        assert "<search>" in turns[0] and not turns[0].endswith("</search>")  # as sampled: the server dropped the stop
        assert trace.messages[2].content.startswith("\n<information>")
        assert result["actions"] == [turns[0] + "</search>", turns[1] + "</answer>"]  # the env read the tags closed
        assert len(trace.branches) == 1  # one training sample per rollout
        # the same turns in searchgym's own env: the same reward and components
        replay = TextRollout(EnvSpec("KGSolver-v0", ("wcr",), {"protocol": "tags", "kg_tool": False}))
        replay.reset(options={"task": by_question[question_of(trace.messages[0].content + "\n")]})
        for text in result["actions"]:
            replay.step(text)
        assert trace.reward == pytest.approx(replay.reward) == pytest.approx(result["reward"])
        assert trace.rewards["searchgym_reward"].weight == 1.0
        assert trace.metrics["wcr_bonus"] == pytest.approx(replay.components["wcr_bonus"])
        assert trace.metrics["turns"] == 2 and trace.metrics["answered"] == 1
        if result["task_id"] == right:
            assert trace.reward == 1.0 and trace.metrics["outcome"] == 1.0
        else:
            assert trace.metrics["outcome"] == 0.0 and 0 < trace.reward == pytest.approx(trace.metrics["wcr_bonus"])


class SeedAnswerer(ScriptedGenerator):
    """Reasons through the task's waypoints and answers the seed: a wrong answer that is itself a waypoint."""

    def generate(self, prompts, config=None):
        out = []
        for messages in prompts:
            task = self.tasks[question_of(messages[0]["content"] + "\n")]
            out.append(f"<think>via {', '.join(task.waypoints)}</think><answer>{task.waypoints[0]}")
        return out


def test_reward_options_travel_in_the_task_payload_to_the_harness():
    from searchgym.integrations.verifiers.environment import SearchGymData, _spec

    no_credit = {"wcr": {"waypoint_answer_credit": False}}
    env = load_environment(rewards="wcr", reward_options=no_credit)
    (task,) = list(env.taskset.take(1))
    assert task.data.searchgym["reward_options"] == no_credit
    back = SearchGymData.model_validate_json(task.data.model_dump_json())  # as a task is serialised
    spec = _spec(json.loads(json.dumps(back.searchgym)))
    assert spec == env.taskset.config.env_spec() and spec.reward_options == no_credit
    assert _spec({**back.searchgym, "reward_options": {}}).reward_options == {}
    with OpenAIServer(SeedAnswerer({task.data.searchgym["task"]["question"]: _task(task)}, set()), "s") as server:
        (episode,) = run_episodes(env, [task], server.url)
    assert episode.ok, episode.errors
    (trace,) = episode.traces
    assert trace.reward == 0.0 and trace.metrics["wcr_answered_waypoint"] == 1.0 and trace.metrics["wcr_coverage"] > 0
    with pytest.raises(ValueError, match="reward 'wcr' has no option credit"):
        load_environment(rewards="wcr", reward_options={"wcr": {"credit": False}})
    with pytest.raises(ValueError, match="given with no reward stack"):
        load_environment(reward_options=no_credit)


def test_function_calling_sends_the_envs_tools_and_tool_messages():
    env = load_environment(protocol="function_calling")
    (task,) = list(env.taskset.take(1))
    gold = _task(task)
    bodies = []

    def chat(body):
        bodies.append(body)
        n = sum(m["role"] == "tool" for m in body["messages"])
        name, args = ("search", {"query": gold.question}) if n == 0 else ("answer", {"answer": gold.answers[0]})
        call = {"id": f"call_{n}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        return 200, {
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": "stub",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
        }

    with OpenAIStubServer(lambda *a: "", routes={("POST", "/v1/chat/completions"): chat}) as server:
        (episode,) = run_episodes(env, [task], server.url)
    assert episode.ok, episode.errors
    (trace,) = episode.traces
    names = [t["function"]["name"] for t in bodies[0]["tools"]]
    assert names == ["search", "answer"] and "stop" not in bodies[0]
    tool = next(m for m in bodies[1]["messages"] if m["role"] == "tool")
    assert tool["tool_call_id"] == "call_0" and "Doc 1" in tool["content"]
    assert trace.reward == 1.0 and trace.metrics["outcome"] == 1.0 and trace.metrics["turns"] == 2


@pytest.mark.slow
def test_vf_eval_command_line_with_the_tiny_model(tmp_path):
    """``vf-eval searchgym-verifiers`` as users run it, against the tiny random model served by searchgym."""
    out = tmp_path / "runs"
    with OpenAIServer(load_generator("tiny"), "tiny") as server:
        cmd = [str(Path(sys.executable).with_name("vf-eval")), ENV_ID, "-m", "tiny", "-n", "2", "--no-push"]
        cmd += ["--client.base-url", server.url, "--client.api-key-var", KEY_VAR, "-o", str(out)]
        cmd += ["--env.taskset.max-turns", "2", "--env.taskset.rewards", "wcr"]
        cmd += ["--env.agent.harness.id", ENV_ID, "--env.agent.harness.max-turn-tokens", "8"]
        env = {
            **os.environ,
            KEY_VAR: "unused",
            "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        }
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert server.requests == 4  # 2 tasks x the 2-turn limit
    (traces,) = list(out.glob("*/traces.jsonl"))
    episodes = [json.loads(line) for line in traces.read_text().splitlines()]
    assert len(episodes) == 2
    for episode in episodes:
        (trace,) = episode["traces"]
        assert trace["ok"] and trace["metrics"]["turns"] == 2 and trace["metrics"]["answered"] == 0
        assert trace["rewards"]["searchgym_reward"]["score"] == trace["info"]["searchgym"]["reward"]
        assert {"outcome", "wcr_bonus", "wcr_coverage"} <= set(trace["metrics"])


def test_bad_settings_fail_when_the_config_is_read():
    with pytest.raises(ValueError, match="unknown reward"):
        load_environment(rewards="nope")


def _task(vf_task):
    from searchgym.core.types import Task

    return Task.from_dict(vf_task.data.searchgym["task"])
