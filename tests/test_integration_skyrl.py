"""searchgym's SkyRL-Gym env, run through the real skyrl-gym package (``skyrl_gym.register`` / ``make``,
``BaseTextEnv``'s ``init`` / ``step`` / ``get_metrics`` / ``aggregate_metrics``) with the config and extras
SkyRL-train's generator passes, on rows from :func:`searchgym.integrations.skyrl.dataset_rows` and on
Search-R1 rows. The token test replays SkyRL-train's own token-in-token-out bookkeeping
(``use_conversation_multi_turn=false``, read at NovaSky-AI/SkyRL ``skyrl_gym_generator.py``) with the tiny
tokenizer and checks it against searchgym's verl / TRL stream of the same turns. Skipped without the
``skyrl`` extra."""

from __future__ import annotations

import asyncio
import json

import pytest

skyrl_gym = pytest.importorskip("skyrl_gym", reason="needs the skyrl extra (pip install -e '.[skyrl]')")

from omegaconf import OmegaConf  # noqa: E402
from skyrl_gym.envs.base_text_env import BaseTextEnv  # noqa: E402

from searchgym.errors import InvalidArgumentError  # noqa: E402
from searchgym.integrations.environments import EnvSpec, cached_env  # noqa: E402
from searchgym.integrations.episode import play_solver_episode  # noqa: E402
from searchgym.integrations.skyrl import SkyRLRowError, dataset_rows, register_env  # noqa: E402
from searchgym.integrations.skyrl.env import SearchGymSkyRLEnv  # noqa: E402
from searchgym.llm.tiny_models import build_tokenizer  # noqa: E402


@pytest.fixture(scope="module")
def name():
    return register_env()


@pytest.fixture(scope="module")
def rows():
    return dataset_rows(3, seed=7)


def extras_of(row, max_turns=4):
    """What SkyRL-train's generator hands the env: the row's columns but prompt and env_class, plus max_turns."""
    out = {k: v for k, v in row.items() if k not in ("prompt", "env_class")}
    out["max_turns"] = max_turns
    return out


def task_of(row):
    return json.loads(row["extra_info"]["searchgym"]["task"])


def test_register_and_make_play_a_row_with_the_envs_reward(name, rows):
    assert register_env() == name == "searchgym"  # idempotent
    row = rows[0]
    assert row["env_class"] == name and row["reward_spec"]["method"] == "rule"
    env = skyrl_gym.make(name, env_config=OmegaConf.create({"rewards": "wcr"}), extras=extras_of(row))
    assert isinstance(env, BaseTextEnv) and env.spec.id == name
    prompt, meta = env.init(row["prompt"])
    assert prompt == row["prompt"]  # the row's prompt is the env's own
    task = task_of(row)
    assert meta["task_id"] == task["id"]
    out = env.step(f"<think>look it up</think><search>{task['question']}</search>")
    assert not out["done"] and out["reward"] == 0.0
    ((obs,),) = [out["observations"]]
    assert obs["role"] == "user" and obs["content"].startswith("\n<information>")
    out = env.step(f"<answer>{task['answers'][0]}</answer>")
    assert out["done"] and out["observations"] == []
    comps = out["metadata"]["reward_components"]
    assert out["reward"] == pytest.approx(1.0 + comps["wcr_bonus"]) and comps["outcome"] == 1.0
    metrics = env.get_metrics()
    assert metrics["reward"] == out["reward"] and metrics["turns"] == 2 and metrics["answered"] == 1
    agg = SearchGymSkyRLEnv.aggregate_metrics([metrics, {**metrics, "outcome": 0.0}])  # SkyRL's own averaging
    assert agg["outcome"] == 0.5


def test_skyrl_token_bookkeeping_equals_searchgyms_stream(name, rows):
    """SkyRL's single-assistant-message path (sampled ids mask 1, each observation encoded on its own mask 0)
    yields exactly the ids, mask and reward of searchgym's own stream (what verl and TRL train on)."""
    tok = build_tokenizer()
    row = rows[1]
    task = task_of(row)
    turns = [
        f"<search>{task['question']}</search>",
        "<search>more facts</search>",
        f"<answer>{task['answers'][0]}</answer>",
    ]

    # SkyRL-train, generator.use_conversation_multi_turn=false (token-in-token-out)
    env = skyrl_gym.make(name, env_config={"rewards": "wcr"}, extras=extras_of(row))
    chat, _ = env.init(row["prompt"])
    input_ids = list(tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=True, return_dict=False))
    prompt_len, loss_mask, step_rewards = len(input_ids), [], []
    for text in turns:
        output_ids = tok.encode(text, add_special_tokens=False)
        out = env.step(tok.decode(output_ids))
        loss_mask += [1] * len(output_ids)
        input_ids += output_ids
        for obs in out["observations"]:
            obs_ids = tok.encode(obs["content"], add_special_tokens=False)
            loss_mask += [0] * len(obs_ids)
            input_ids += obs_ids
        step_rewards.append(out["reward"])
        if out["done"]:
            break

    # searchgym's own stream of the same turns (the verl agent loop's episode)
    script = iter(turns)

    async def generate(prompt_ids, max_tokens, rollout_id):
        return tok.encode(next(script), add_special_tokens=False), None

    spec = EnvSpec("KGSolver-v0", ("wcr",), {"max_turns": 4})
    ref = asyncio.run(
        play_solver_episode(
            cached_env(spec), generate, tok, response_length=4096, options={"task": env.rollout.task}, seed=env.seed
        )
    ).stream
    assert input_ids[:prompt_len] == ref.prompt_ids
    assert input_ids[prompt_len:] == ref.response_ids and loss_mask == ref.response_mask
    assert 0 in loss_mask and sum(step_rewards) == pytest.approx(ref.reward) and step_rewards[:-1] == [0.0, 0.0]
    assert env.get_metrics()["outcome"] == ref.components["outcome"] == 1.0


def test_generator_max_turns_is_the_turn_limit(name, rows):
    env = skyrl_gym.make(name, env_config={}, extras=extras_of(rows[0], max_turns=1))
    env.init(rows[0]["prompt"])
    out = env.step("<search>anything</search>")
    assert out["done"] and out["reward"] == 0.0 and env.max_turns == 1
    assert env.get_metrics()["answered"] == 0


def test_search_r1_rows_play_their_question_and_bad_rows_are_refused(name, rows):
    gold = task_of(rows[0])["answers"]
    prompt = "Answer the question. Search with <search> query </search>, answer with <answer> x </answer>. Question: "
    q = task_of(rows[0])["question"]
    search_r1 = {  # SkyRL's own Search-R1 dataset layout
        "data_source": "nq",
        "prompt": [{"role": "user", "content": prompt + q}],
        "env_class": name,
        "reward_spec": {"method": "rule", "ground_truth": {"target": gold}},
        "extra_info": {"index": 3},
    }
    env = skyrl_gym.make(name, env_config={}, extras=extras_of(search_r1))
    chat, meta = env.init(search_r1["prompt"])
    assert meta["question"] == q and chat == search_r1["prompt"]  # the tag-teaching prompt is kept
    assert env.step(f"<answer>{gold[0]}</answer>")["reward"] == 1.0
    bad = skyrl_gym.make(name, env_config={}, extras={"data_source": "x", "reward_spec": {"method": "rule"}})
    with pytest.raises(SkyRLRowError, match=r"columns: \['data_source', 'reward_spec'\].*ground_truth.target"):
        bad.init([{"role": "user", "content": "What is the capital?"}])  # no gold: refused, never a random task


def test_function_calling_observations_are_tool_messages(name, rows):
    cfg = {"env_kwargs": {"protocol": "function_calling"}}
    env = skyrl_gym.make(name, env_config=cfg, extras=extras_of(rows[2]))
    env.init(rows[2]["prompt"])
    assert [t["function"]["name"] for t in env.tools()] == ["search", "answer"]
    task = task_of(rows[2])
    call = {"name": "search", "arguments": {"query": task["question"]}}
    out = env.step(f"<tool_call>\n{json.dumps(call)}\n</tool_call>")
    assert [m["role"] for m in out["observations"]] == ["tool"] and "Doc 1" in out["observations"][0]["content"]
    call = {"name": "answer", "arguments": {"answer": task["answers"][0]}}
    out = env.step(f"<tool_call>\n{json.dumps(call)}\n</tool_call>")
    assert out["done"] and out["reward"] == 1.0


def test_bad_settings_fail_clearly(name, rows):
    with pytest.raises(InvalidArgumentError, match="use env_id, rewards, env_kwargs"):
        skyrl_gym.make(name, env_config={"reward": "wcr"}, extras=extras_of(rows[0]))
    with pytest.raises(InvalidArgumentError, match="one Solver rollout"):
        skyrl_gym.make(name, env_config={"env_id": "KGSelfPlay-v0"}, extras=extras_of(rows[0]))
    with pytest.raises(InvalidArgumentError, match="unknown reward"):
        skyrl_gym.make(name, env_config={"rewards": "nope"}, extras=extras_of(rows[0]))
    if "searchgym_other" not in skyrl_gym.registry:
        skyrl_gym.register(id="searchgym_other", entry_point="skyrl_gym.envs.gsm8k.env:GSM8kEnv")
    with pytest.raises(InvalidArgumentError, match="already has an env"):
        register_env("searchgym_other")


def test_reward_options_in_the_hydra_block_reach_the_wrappers(name, rows):
    block = OmegaConf.create({"rewards": "wcr", "reward_options": {"wcr": {"waypoint_answer_credit": False}}})
    env = skyrl_gym.make(name, env_config=block, extras=extras_of(rows[0]))
    assert env.rollout.env.get_wrapper_attr("waypoint_answer_credit") is False  # (skyrl_gym.make sets env.spec)
    env.init(rows[0]["prompt"])
    waypoints = task_of(rows[0])["waypoints"]
    # reasoning through the waypoints, then a wrong answer that is one of them: no WCR credit with the option
    out = env.step(f"<think>via {', '.join(waypoints)}</think><answer>{waypoints[0]}</answer>")
    assert out["done"] and out["reward"] == 0.0 and out["metadata"]["reward_components"]["wcr_answered_waypoint"] == 1
    with pytest.raises(InvalidArgumentError, match="reward 'wcr' has no option credit"):
        bad = {"rewards": "wcr", "reward_options": {"wcr": {"credit": 1}}}
        skyrl_gym.make(name, env_config=bad, extras=extras_of(rows[0]))
