"""The function-calling protocol: tool schemas, message parsing (never raises), the envs in that protocol
(same information, rewards and exports as the tag protocol), and exact token sequences across turns
with a tool-capable chat template (Qwen2.5's, on the tiny tokenizer) and SmolLM2's plain template."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import given, settings
from hypothesis import strategies as st

import searchgym  # noqa: F401  (registers the envs)
from searchgym.agents.scripted import PathFollowingSolver, ScriptedProposer
from searchgym.core.chat_template import ChatTemplateError, ToolChatEncoder, supports_tools
from searchgym.envs.export import read_trajectories
from searchgym.envs.function_calling import parse_message, tool_messages, tool_schemas
from searchgym.envs.protocol import parse_action
from searchgym.llm.sequences import encode_trajectory, record_sampled, turn_encoder
from searchgym.wrappers.registry import wrap_rewards
from tests.support.env_helpers import AcceptAll
from tests.support.tiny_lm import build_tokenizer, build_tool_tokenizer


def call(name, **arguments):
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


def message(content="", *calls, reasoning=None):
    m = {"role": "assistant", "content": content, "tool_calls": list(calls)}
    if reasoning is not None:
        m["reasoning_content"] = reasoning
    return m


def as_message(action: str) -> dict:
    """A tag-protocol turn as the same turn in function calling: think as content, searches and the
    answer as tool calls."""
    act = parse_action(action)
    calls = [call("search", query=s.query) for s in act.searches]
    if act.answer is not None:
        calls.append(call("answer", answer=act.answer))
    return message(f"<think>{act.think}</think>" if act.think else "", *calls)


@pytest.fixture(scope="module")
def qwen_tok():
    return build_tool_tokenizer()


# ----------------------------------------------------------------------------- schemas and parsing
def test_tool_schemas_offer_search_answer_and_kg_when_enabled():
    assert [t["function"]["name"] for t in tool_schemas()] == ["search", "answer"]
    assert [t["function"]["name"] for t in tool_schemas(kg=True, answer=False)] == ["search", "kg_lookup"]
    search = tool_schemas()[0]["function"]
    assert (
        search["parameters"]["required"] == ["query"]
        and search["parameters"]["properties"]["query"]["type"] == "string"
    )


def test_raw_hermes_text_and_message_dicts_parse_to_the_same_action():
    text = (
        "<think>Tarsk is in Merovia.</think>\n<tool_call>\n"
        '{"name": "search", "arguments": {"query": "capital of Merovia"}}\n</tool_call>'
    )
    for action in (text, message("<think>Tarsk is in Merovia.</think>", call("search", query="capital of Merovia"))):
        turn = parse_message(action)
        assert turn.parsed.think == "Tarsk is in Merovia." and turn.parsed.errors == []
        assert [s.query for s in turn.parsed.searches] == ["capital of Merovia"]
        assert turn.parsed.answer is None and len(turn.calls) == 1
    assert parse_message(text).text == text  # raw text is kept as the agent's text


def test_reasoning_content_answer_calls_and_plain_content():
    turn = parse_message(message("", call("answer", answer=" Ostrel "), reasoning="it is Ostrel"))
    assert turn.parsed.answer == "Ostrel" and turn.parsed.think == "it is Ostrel" and turn.parsed.answer_count == 1
    plain = parse_message(message("The capital is Ostrel, so <answer>Ostrel</answer>"))
    assert plain.parsed.answer == "Ostrel" and plain.parsed.think == "The capital is Ostrel, so"
    tags = parse_message(message("<search>not run</search> hmm"))
    assert tags.parsed.searches == [] and any("not run" in w for w in tags.parsed.warnings)
    assert tags.parsed.errors == ["no_action"]


@pytest.mark.parametrize(
    "action,error,fix",
    [
        ('<tool_call>{"name": "search", "arguments": {"query": "Alice</tool_call>', "bad_tool_call", "does not parse"),
        (
            message("", {"type": "function", "function": {"name": "search", "arguments": '{"query": '}}),
            "bad_tool_call",
            "not valid JSON",
        ),
        (message("", call("lookup", q="x")), "bad_tool_call", "no tool named 'lookup'"),
        (message("", call("search", q="x")), "empty_query", "non-empty 'query'"),
        (message("", call("search", query=42)), "empty_query", "non-empty 'query'"),
        (message("", call("kg_lookup", entity=["Tarsk"])), "bad_tool_call", "no tool named 'kg_lookup'"),
        (message("", call("answer", answer="")), "bad_tool_call", "non-empty 'answer'"),
        (
            message('<tool_call>\n{"name": "search", "arguments": {"query": "Al</tool_call>'),
            "bad_tool_call",
            "not parse",
        ),
    ],
)
def test_bad_calls_get_a_corrective_tool_message(action, error, fix):
    turn = parse_message(action)
    assert error in turn.parsed.errors and turn.parsed.searches == [] and turn.parsed.answer is None
    (reply,) = tool_messages(turn, [])
    assert reply["role"] == "tool" and reply["content"].startswith("Error:") and fix in reply["content"]
    assert '"arguments"' in reply["content"]  # it shows how to call the tool


def test_kg_lookup_when_enabled_and_too_many_searches():
    kg = parse_message(message("", call("kg_lookup", entity="Tarsk", relation=["located in"])), kg=True)
    (req,) = kg.parsed.searches
    assert req.entities == ("Tarsk",) and req.relations == ("located in",) and not req.corpus
    for relation in ({}, {"relation": None}):  # optional and nullable in the schema (TRL's Optional[list])
        (req,) = parse_message(message("", call("kg_lookup", entity=["Tarsk"], **relation)), kg=True).parsed.searches
        assert req.entities == ("Tarsk",) and req.relations == ()
    many = parse_message(message("", *[call("search", query=f"q{i}") for i in range(4)]))
    assert [s.query for s in many.parsed.searches] == ["q0", "q1", "q2"] and "too_many_searches" in many.parsed.errors
    replies = tool_messages(many, ["r0", "r1", "r2"])
    assert [r["content"] for r in replies[:3]] == ["r0", "r1", "r2"] and "only the first 3" in replies[3]["content"]
    assert tool_messages(parse_message("just text"), [])[0]["role"] == "user"  # no call: a user correction


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(
        st.text(alphabet=st.sampled_from(list('<>/{}"[]:, abtoolcal_nmeqrysh\n')), max_size=200),
        st.dictionaries(
            st.sampled_from(["content", "tool_calls", "reasoning_content", "role"]),
            st.one_of(
                st.none(),
                st.text(max_size=20),
                st.lists(
                    st.one_of(
                        st.text(max_size=5),
                        st.dictionaries(
                            st.sampled_from(["function", "name", "arguments", "type"]),
                            st.one_of(
                                st.text(max_size=10),
                                st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2),
                            ),
                            max_size=3,
                        ),
                    ),
                    max_size=3,
                ),
            ),
        ),
    )
)
def test_parse_message_never_raises(action):
    turn = parse_message(action)
    tool_messages(turn, ["r"] * len(turn.parsed.searches))


# ----------------------------------------------------------------------------- the envs in function calling
def fc_env(env_id="KGSolver-v0", **kw):
    return gym.make(env_id, protocol="function_calling", **kw).unwrapped


def test_solver_env_in_function_calling_mode(default_world):
    env, tags = fc_env(world=default_world), gym.make("KGSolver-v0", world=default_world).unwrapped
    obs, info = env.reset(seed=3)
    tags.reset(seed=3)
    assert "call the search tool" in obs and info["task"] == tags.rollout.trajectory.task
    assert env.tool_schemas() == tool_schemas() and env.rollout.trajectory.metadata["tools"] == tool_schemas()
    query = f"{info['task'].subgraph.nodes[info['task'].subgraph.path[0]].title}"
    obs, reward, term, trunc, info = env.step(message("<think>start</think>", call("search", query=query)))
    (reply,) = info["turn"].messages
    assert reply == {"role": "tool", "name": "search", "content": reply["content"]} and "Doc 1" in reply["content"]
    assert obs == info["inserted"] and "<tool_response>" in obs and not (term or trunc) and reward == 0
    *_, tinfo = tags.step(f"<think>start</think><search>{query}</search>")
    assert info["turn"].information == tinfo["turn"].information  # the same retrieved information
    obs, reward, term, trunc, info = env.step('<tool_call>{"name": "search", "arguments": {"query": </tool_call>')
    assert "could not be read" in info["turn"].messages[0]["content"] and not term
    assert info["trajectory"].metadata["invalid_turns"] == 1
    obs, reward, term, trunc, info = env.step(message("", call("answer", answer=info["task"].answer)))
    assert term and reward == 1.0 and info["rewards"][0]["components"] == {"outcome": 1.0}


def test_checker_and_group_env_in_function_calling_mode(default_world):
    check_env(
        gym.make("KGSolver-v0", protocol="function_calling", world=default_world).unwrapped, skip_render_check=True
    )
    env = fc_env("KGSolverGroup-v0", world=default_world, group_size=2)
    obs, info = env.reset(seed=1)
    obs, r, term, trunc, info = env.step((message("", call("answer", answer=info["task"].answer)), "no tool"))
    assert not term and info["turn"][1].messages[0]["role"] == "user"
    obs, r, term, trunc, info = env.step(("", message("", call("answer", answer="wrong"))))
    assert term and [ev["reward"] for ev in info["rewards"]] == [1.0, 0.0]


@pytest.mark.parametrize("rewards", ["binary", "wcr", "gdcr", "dynasearcher,wcr"])
def test_same_rollouts_get_the_same_rewards_in_both_protocols(default_world, rewards):
    """PathFollowingSolver's turns, played as tags and as tool calls (think as content), score the same."""
    results = []
    for protocol in ("tags", "function_calling"):
        env = gym.make("KGSolverGroup-v0", world=default_world, group_size=2, protocol=protocol).unwrapped
        env = wrap_rewards(env, rewards) if rewards != "binary" else env
        agents = [PathFollowingSolver(default_world), PathFollowingSolver()]
        obs, info = env.reset(seed=5)
        done, events = False, []
        while not done:
            acts = [a.act(obs, info)[i] if obs["active"][i] else "" for i, a in enumerate(agents)]
            acts = [as_message(a) if protocol == "function_calling" and a else a for a in acts]
            obs, _, term, trunc, info = env.step(tuple(acts))
            events += info["rewards"]
            done = term or trunc
        results.append([(ev["reward"], ev["components"]) for ev in events])
        trajs = [ev["trajectory"] for ev in events]
    assert results[0] == results[1]
    assert trajs[0].think_text and trajs[0].num_searches >= 2  # it reasoned and searched in both


def test_selfplay_and_export_in_function_calling_mode(default_world, tmp_path):
    env = fc_env(
        "KGSelfPlay-v0", world=default_world, group_size=2, verifier=AcceptAll(), export_path=tmp_path / "g.jsonl"
    )
    obs, info = env.reset(seed=0)
    assert "call the search tool" in obs["texts"][0] and env.tool_schemas("proposer") == tool_schemas(answer=False)
    proposer, solver = ScriptedProposer(), PathFollowingSolver(default_world)
    done = False
    while not done:
        if info["role"] == "proposer":
            text = proposer.act(obs, info)[0]
            act = parse_action(text)
            content = (f"<think>{act.think}</think>" if act.think else "") + (
                f"<question>{act.question}</question>" if act.question else ""
            )
            acts = (message(content, *[call("search", query=s.query) for s in act.searches]), "")
        else:
            acts = tuple(as_message(solver.act(obs, info)[i]) if obs["active"][i] else "" for i in range(2))
        obs, _, term, trunc, info = env.step(acts)
        done = term or trunc
    assert info["validation"]["valid"] and info["proposer"].reward_components["valid"] == 1.0
    env.close()
    (game,) = read_trajectories(tmp_path / "g.jsonl")
    sent = [t.messages for t in game.solvers[0].turns if t.messages]
    assert sent and all(m["role"] == "tool" for ms in sent for m in ms)  # messages survive export
    assert game.solvers[0].metadata["protocol"] == "function_calling"


def test_kg_lookup_returns_kg_facts_only(default_world):
    env = fc_env(world=default_world, kg_tool=True)
    obs, info = env.reset(seed=2)
    sg = info["task"].subgraph
    assert "kg_lookup tool" in obs and [t["function"]["name"] for t in env.tool_schemas()] == [
        "search",
        "kg_lookup",
        "answer",
    ]
    entity, relation = sg.nodes[sg.path[0]].title, sg.relations[0]
    *_, info = env.step(message("", call("kg_lookup", entity=[entity], relation=[relation])))
    content = info["turn"].messages[0]["content"]
    assert content.startswith("KG facts:") and "Doc 1" not in content and info["turn"].searches[0].doc_ids == []


# ----------------------------------------------------------------------------- exact tokens across turns
def test_tool_templates_are_told_apart(qwen_tok):
    assert supports_tools(qwen_tok) and not supports_tools(build_tokenizer())
    with pytest.raises(ChatTemplateError, match="drops the tool schemas.*protocol='tags'"):
        ToolChatEncoder(build_tokenizer(), tool_schemas())


def test_smollm2_plain_template_is_refused_with_the_fix_and_tags_still_work(default_world):
    from transformers import AutoTokenizer

    from searchgym.llm.bundled_model import ensure_smollm2

    tok = AutoTokenizer.from_pretrained(ensure_smollm2())
    assert not supports_tools(tok)
    env = fc_env(world=default_world)
    env.reset(seed=0)
    env.step(message("", call("answer", answer="x")))
    with pytest.raises(ChatTemplateError, match=r"drops the tool schemas, the assistant's tool call.*protocol='tags'"):
        encode_trajectory(tok, env.rollout.trajectory)
    tags = gym.make("KGSolver-v0", world=default_world).unwrapped
    tags.reset(seed=0)
    tags.step("<search>x</search>")
    tags.step("<answer>x</answer>")
    enc = encode_trajectory(tok, tags.rollout.trajectory)
    assert enc.num_agent_tokens > 0 and enc.retokenised == 2


def assistant_text(msg: dict) -> str:
    """The assistant message's text as Qwen2.5's template renders it."""
    calls = "".join(
        "\n<tool_call>\n"
        + json.dumps({"name": c["function"]["name"], "arguments": c["function"]["arguments"]})
        + "\n</tool_call>"
        for c in msg["tool_calls"]
    )
    return msg["content"] + calls


def test_incremental_ids_equal_the_templates_rendering_and_keep_sampled_ids(qwen_tok):
    tools = tool_schemas()
    chat = ToolChatEncoder(qwen_tok, tools)
    user = {"role": "user", "content": "Question: where was Alice Varn born?"}
    a1 = message("<think>look it up</think>", call("search", query="Alice Varn place of birth"))
    t1 = [{"role": "tool", "name": "search", "content": 'Doc 1 (Title: "Alice Varn") Alice Varn was born in Tarsk.'}]
    a2 = message("<think>Tarsk</think>", call("answer", answer="Tarsk"))
    eos = qwen_tok.eos_token_id
    s1 = qwen_tok.encode(assistant_text(a1), add_special_tokens=False) + [eos]
    s2 = qwen_tok.encode(assistant_text(a2), add_special_tokens=False) + [eos]
    ours = chat.prompt_ids([user]) + s1 + chat.reply_ids(t1, s1) + s2
    full = qwen_tok.apply_chat_template([user, a1, *t1, a2], tools=tools, tokenize=True, return_dict=False)
    assert ours == list(full)[: len(ours)] and len(full) - len(ours) == 1  # (the template adds a final "\n")
    # a sampled split the tokenizer would not produce is kept as sampled; re-rendering would change it
    odd = [i for ch in assistant_text(a1) for i in qwen_tok.encode(ch, add_special_tokens=False)] + [eos]
    assert odd != s1
    stream = chat.prompt_ids([user]) + odd + chat.reply_ids(t1, odd)
    start = len(chat.prompt_ids([user]))
    assert stream[start : start + len(odd)] == odd and stream[start + len(odd) :] == chat.reply_ids(t1, s1)
    # a turn that did not sample the end-of-turn token gets it (as an inserted token)
    assert chat.reply_ids(t1, odd[:-1]) == [eos] + chat.reply_ids(t1, odd)


def test_encode_trajectory_of_a_function_calling_rollout_masks_exactly(qwen_tok, default_world):
    env = fc_env(world=default_world)
    obs, info = env.reset(seed=4)
    enc = turn_encoder(qwen_tok, "function_calling", env.tool_schemas())
    ids, mask = enc.prompt_ids(obs), [0] * len(enc.prompt_ids(obs))
    sg = info["task"].subgraph
    turns = [
        message("<think>a</think>", call("search", query=sg.nodes[sg.path[0]].title)),
        message("oops", {"type": "function", "function": {"name": "search", "arguments": "{bad"}}),
        message("", call("answer", answer=info["task"].answer)),
    ]
    traj = env.rollout.trajectory
    for msg in turns:
        text = parse_message(msg).text
        sampled = qwen_tok.encode(text, add_special_tokens=False) + [qwen_tok.eos_token_id]
        record_sampled(traj, sampled)
        ids, mask = ids + sampled, mask + [1] * len(sampled)
        *_, info = env.step(msg)
        inserted = enc.env_ids(info["inserted"], info["turn"], ids)
        ids, mask = ids + inserted, mask + [0] * len(inserted)
    encoded = encode_trajectory(qwen_tok, traj, for_generation=True)
    assert encoded.input_ids == ids and encoded.loss_mask == mask and encoded.retokenised == 0
    env_text = qwen_tok.decode([t for t, m in zip(ids, mask) if not m][len(enc.prompt_ids(obs)) :])
    assert env_text.count("<tool_response>") == 2 and "not valid JSON" in env_text
