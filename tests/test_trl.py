"""searchgym inside a real ``trl.GRPOTrainer`` (TRL 1.16, CPU, a tiny Llama): both entry points run two
training steps; the loss mask TRL receives is 0 exactly on env-inserted tokens; the rewards TRL
trains on equal what the searchgym env gives for the same rollouts; bad input fails clearly.

The policy is the tiny model with scripted sampling (tests/support/scripted_policy.py) so it searches,
answers, errs and writes malformed tool calls on cue; one test samples from the untouched random
model. Skipped without the ``trl`` extra."""

from __future__ import annotations

import itertools
import json
import os

import pytest

pytest.importorskip("trl", reason="needs the trl extra (pip install -e '.[trl]')")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

import gymnasium as gym  # noqa: E402
import torch  # noqa: E402
from transformers.utils import get_json_schema  # noqa: E402
from trl import GRPOConfig  # noqa: E402

import searchgym  # noqa: E402,F401
from searchgym.core.chat_template import ChatTemplateError  # noqa: E402
from searchgym.envs.function_calling import tool_schemas  # noqa: E402
from searchgym.errors import InvalidArgumentError  # noqa: E402
from searchgym.integrations import trl as sgtrl  # noqa: E402
from searchgym.integrations.trl import (  # noqa: E402
    STATS,
    DatasetRowError,
    SearchGymKGToolEnv,
    check_tokenizer,
    dataset_rows,
    environment_factory,
    grpo_trainer,
    local_config,
    rollout_func,
    train_dataset,
)
from searchgym.integrations.trl.generation import cut_at_stop  # noqa: E402
from searchgym.wrappers.registry import wrap_rewards  # noqa: E402
from tests.support.env_helpers import AcceptAll  # noqa: E402
from tests.support.scripted_policy import question_of, scripted_model  # noqa: E402
from tests.support.tiny_lm import build_model, build_tokenizer, build_tool_tokenizer  # noqa: E402

ENV = {"top_k": 1, "doc_max_chars": 160, "max_turns": 4}  # short observations keep the tiny sequences short


@pytest.fixture(scope="module")
def qwen_tok():
    return build_tool_tokenizer()


@pytest.fixture(scope="module")
def chatml_tok():
    return build_tokenizer()


def grpo_args(**kw) -> GRPOConfig:
    base = dict(per_device_train_batch_size=4, num_generations=2, max_completion_length=400, max_steps=2)
    return local_config(**{**base, "learning_rate": 1e-3, "use_cpu": True, **kw})


def spy(trainer) -> dict:
    """Record what TRL computes each step: its batch (ids, masks) and the rewards per function."""
    seen: dict = {"batches": [], "rewards": []}
    batch_fn, reward_fn = trainer._generate_and_score_completions, trainer._calculate_rewards

    def batches(inputs):
        out = batch_fn(inputs)
        seen["batches"].append(out)
        return out

    def rewards(inputs, prompts, completions, completion_ids):
        out = reward_fn(inputs, prompts, completions, completion_ids)
        envs = list(trainer.environments) if trainer.environments else None
        seen["rewards"].append((inputs, completions, envs, out.clone()))
        return out

    trainer._generate_and_score_completions, trainer._calculate_rewards = batches, rewards
    if trainer.rollout_func is not None:
        rollout = trainer.rollout_func
        seen["rollouts"] = []

        def recorded(prompts, tr):
            out = rollout(prompts, tr)
            seen["rollouts"].append(out)
            return out

        trainer.rollout_func = recorded
    return seen


def assert_trl_got_our_masks(seen) -> None:
    """The completion ids and loss mask TRL trains with are exactly what the rollout function returned."""
    for out, batch in zip(seen["rollouts"], seen["batches"]):
        for i, (ids, mask) in enumerate(zip(out["completion_ids"], out["env_mask"])):
            n = len(ids)
            assert batch["completion_ids"][i][:n].tolist() == ids
            assert (batch["completion_mask"][i][:n] * batch["tool_mask"][i][:n]).tolist() == mask
            assert batch["completion_mask"][i][n:].sum() == 0


def masked_rows(tok, batch):
    """Per completion: (tokens TRL trains on, tokens it does not) as decoded text."""
    ids, cmask = batch["completion_ids"], batch["completion_mask"]
    tmask = batch.get("tool_mask", torch.ones_like(ids))
    rows = []
    for i in range(ids.shape[0]):
        live = cmask[i].bool()
        rows.append(
            (
                tok.decode(ids[i][live & tmask[i].bool()].tolist()),
                tok.decode(ids[i][live & ~tmask[i].bool()].tolist()),
            )
        )
    return rows


def path_of(task):
    sg = task.subgraph
    return [sg.nodes[n].title for n in sg.path], list(sg.relations)


# ----------------------------------------------------------------------------- environment_factory
def test_tool_methods_expose_exactly_the_env_schemas():
    by_name = {t["function"]["name"]: t for t in tool_schemas(kg=True)}
    for method in (SearchGymKGToolEnv.search, SearchGymKGToolEnv.answer, SearchGymKGToolEnv.kg_lookup):
        assert get_json_schema(method) == by_name[method.__name__]


def fc_script(tasks):
    """Search the path's first entity, then answer (right on even calls, wrong on odd); every 5th first
    turn is a tool call with malformed JSON. Reasoning names the waypoints (WCR reads it)."""
    by_question = {t.question: t for t in tasks}
    counter = itertools.count()

    def script(context: str) -> str:
        task = by_question[question_of(context)]
        titles, relations = path_of(task)
        k, n = next(counter), context.count("<tool_response>")
        if n == 0:
            if k % 5 == 3:
                return '<tool_call>\n{"name": "search", "arguments": {"query": "' + titles[0] + "</tool_call>"
            call = {"name": "search", "arguments": {"query": f"{titles[0]} {relations[0]}"}}
            return f"<think>I start from {titles[0]}.</think>\n<tool_call>\n{json.dumps(call)}\n</tool_call>"
        if n == 1:
            answer = task.answer if k % 2 == 0 else "nobody at all"
            call = {"name": "answer", "arguments": {"answer": answer}}
            return f"<think>Then {titles[1]}.</think>\n<tool_call>\n{json.dumps(call)}\n</tool_call>"
        return "Done."

    return script


@pytest.mark.parametrize("transcripts", [True, False])
def test_environment_factory_trains_two_steps_with_the_envs_rewards(qwen_tok, default_world, transcripts):
    ds = train_dataset(n=4, protocol="function_calling", env_kwargs={**ENV, "world": default_world})
    tasks = [sgtrl.task_of_row(r).task for r in ds]
    model = scripted_model(qwen_tok, fc_script(tasks))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    STATS.reset()
    env_kwargs = {**ENV, "world": default_world}
    trainer = grpo_trainer(
        model,
        processing_class=qwen_tok,
        args=grpo_args(),
        train_dataset=ds,
        rewards="wcr",
        env_kwargs=env_kwargs,
        transcripts=transcripts,
    )
    assert sorted(t.__name__ for t in trainer.tools) == ["answer", "search"]  # the env's tools, nothing else
    seen = spy(trainer)
    trainer.train()
    assert len(seen["batches"]) == 2 and trainer.state.global_step == 2
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())  # it trained
    # env tokens carry no loss: what TRL masks out is exactly the tool responses
    n_tool = 0
    for batch in seen["batches"]:
        for trained, masked in masked_rows(qwen_tok, batch):
            assert "<tool_response>" not in trained and "Doc 1" not in trained
            n_tool += masked.count("<tool_response>")
            assert masked.replace("\n", "").replace("<|im_start|>user", "").replace(
                "<|im_start|>assistant", ""
            ) == "" or (masked.count("<tool_response>") == masked.count("</tool_response>") >= 1)
    assert n_tool >= 4
    # rewards: TRL's env column equals the searchgym env on the same rollouts
    fresh = wrap_rewards(gym.make("KGSolver-v0", protocol="function_calling", **env_kwargs).unwrapped, "wcr")
    col = trainer.reward_func_names.index("SearchGymEnv")
    checked = bonus = 0
    for inputs, completions, envs, rewards in seen["rewards"]:
        for row, messages, env, got in zip(inputs, completions, envs, rewards[:, col].tolist()):
            task = sgtrl.task_of_row(row)
            fresh.reset(seed=task.seed, options={"task": task.task})
            events = []
            for m in messages:
                if m["role"] == "assistant" and not fresh.unwrapped.rollout.done:
                    if not transcripts:  # the env saw the tool calls alone, one turn each
                        for c in m.get("tool_calls") or []:
                            if not fresh.unwrapped.rollout.done:
                                events += fresh.step({"role": "assistant", "content": "", "tool_calls": [c]})[-1][
                                    "rewards"
                                ]
                        continue
                    events += fresh.step(m)[-1]["rewards"]
            while not fresh.unwrapped.rollout.done:
                events += fresh.step("")[-1]["rewards"]
            assert got == pytest.approx(sum(ev["reward"] for ev in events))
            assert env.reward_components == events[-1]["components"]
            bonus += events[-1]["components"].get("wcr_bonus", 0) > 0
            checked += 1
    assert checked == 8
    assert (bonus > 0) == transcripts  # WCR's partial credit needs the reasoning, which only transcripts carry
    counts = STATS.snapshot()
    assert counts["rollouts"] == 8 and counts["tool_calls"] >= 8 and counts["seconds"] > 0
    if transcripts:
        assert counts["bad_tool_calls"] >= 1  # the malformed call TRL could not parse still counts


def eve(env):
    from searchgym.wrappers import EvidenceVerifierReward

    return EvidenceVerifierReward(env, lambda question, evidence: "x", missing_evidence="answer_only")


@pytest.mark.parametrize(
    "rewards,wrappers", [("binary", ()), ("gdcr", ()), ("dynasearcher,wcr", ()), ("binary", (eve,))]
)
def test_get_reward_is_the_envs_reward_for_every_reward(default_world, rewards, wrappers):
    """Direct calls (as TRL makes them): tools, then get_reward, against the same turns in a plain env."""
    kwargs = {**ENV, "world": default_world}
    cls = environment_factory(rewards, wrappers=wrappers, **kwargs)
    rows = dataset_rows(n=3, protocol="function_calling", env_kwargs=kwargs)
    env = cls()
    fresh = gym.make("KGSolver-v0", protocol="function_calling", **kwargs).unwrapped
    fresh = wrap_rewards(fresh, rewards) if rewards != "binary" else fresh
    for w in wrappers:
        fresh = w(fresh)
    for i, row in enumerate(rows):
        task = sgtrl.task_of_row(row)
        titles, relations = path_of(task.task)
        env.reset(**row)
        calls = [("search", {"query": f"{titles[0]} {relations[0]}"})] + (
            [("answer", {"answer": task.task.answer if i % 2 == 0 else "nobody"})] if i < 2 else []
        )
        for name, arguments in calls:
            getattr(env, name)(**arguments)
        got = env.get_reward()
        fresh.reset(seed=task.seed, options={"task": task.task})
        events = []
        for name, arguments in calls:
            events += fresh.step(
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [{"function": {"name": name, "arguments": arguments}}],
                }
            )[-1]["rewards"]
        while not fresh.unwrapped.rollout.done:  # the third rollout never answers: played to the turn limit
            events += fresh.step("")[-1]["rewards"]
        assert got == pytest.approx(sum(ev["reward"] for ev in events))
        assert env.reward_components == events[-1]["components"]
    assert env.search(query="after the end") == "The episode is over: no more tool calls are run. Stop here."


NO_CREDIT = {"wcr": {"waypoint_answer_credit": False}}


def test_environment_factory_passes_reward_options_to_the_wrappers(default_world):
    """The transcript names every waypoint and answers the seed (a waypoint, wrong): WCR pays it α unless
    ``waypoint_answer_credit`` is off."""
    kwargs = {**ENV, "world": default_world}
    (row,) = dataset_rows(n=1, protocol="function_calling", env_kwargs=kwargs)
    task = sgtrl.task_of_row(row).task
    call = {"function": {"name": "answer", "arguments": {"answer": task.waypoints[0]}}}
    message = {"role": "assistant", "content": f"<think>via {', '.join(task.waypoints)}</think>", "tool_calls": [call]}
    scored = {}
    for options in (None, NO_CREDIT):
        cls = environment_factory("wcr", reward_options=options, **kwargs)
        assert cls.spec.reward_options == (options or {})
        env = cls()
        env.reset(**row)
        env._attach([message])
        scored[bool(options)] = (env.get_reward(), env.reward_components)
    assert scored[False][0] == pytest.approx(0.3) and scored[True][0] == 0.0
    assert scored[True][1]["wcr_answered_waypoint"] == 1
    with pytest.raises(InvalidArgumentError, match="reward 'wcr' has no option credit; its options: alpha"):
        environment_factory("wcr", reward_options={"wcr": {"credit": False}}, **kwargs)
    with pytest.raises(InvalidArgumentError, match="given with no reward stack"):
        environment_factory(reward_options=NO_CREDIT, **kwargs)


def test_rollout_func_and_grpo_trainer_pass_reward_options(qwen_tok, chatml_tok, default_world, monkeypatch):
    import trl

    rows = dataset_rows(n=1, env_kwargs={"world": default_world})
    given = {"wcr": {"waypoint_answer_credit": False}}
    func = rollout_func(rows, rewards="gdcr,wcr", reward_options=given, env_kwargs={"world": default_world})
    given["wcr"]["waypoint_answer_credit"] = True  # the rollout keeps its own checked copy
    for role, group in (("solver", 2), ("selfplay", 3), ("proposer", 2)):
        assert func.spec(role, group).reward_options == NO_CREDIT
    assert func._take_env(func.spec("solver", 2)).get_wrapper_attr("waypoint_answer_credit") is False
    with pytest.raises(InvalidArgumentError, match="reward options for 'wcr', which is not in the reward stack gdcr"):
        rollout_func(rows, rewards="gdcr", reward_options=NO_CREDIT)

    made = []  # grpo_trainer hands the options to either entry point
    monkeypatch.setattr(trl, "GRPOTrainer", lambda *a, **kw: made.append(kw) or kw)
    common = dict(args=None, train_dataset=rows, rewards="wcr", reward_options=NO_CREDIT)
    grpo_trainer(None, processing_class=qwen_tok, env_kwargs={"world": default_world}, **common)
    grpo_trainer(None, processing_class=chatml_tok, entry="rollout_func", **common)
    assert made[0]["environment_factory"].spec.reward_options == NO_CREDIT
    assert made[1]["rollout_func"].spec("solver", 2).reward_options == NO_CREDIT


# ----------------------------------------------------------------------------- rollout_func
def after_prompt(context: str) -> str:
    return context.rsplit("<|im_start|>assistant\n", 1)[-1]


def tags_script(tasks):
    by_question = {t.question: t for t in tasks}
    counter = itertools.count()

    def script(context: str) -> str:
        task = by_question[question_of(context)]
        titles, relations = path_of(task)
        k, n = next(counter), after_prompt(context).count("<information>")
        if n == 0:
            return f"<think>I start from {titles[0]}.</think><search>{titles[0]} {relations[0]}</search>"
        answer = task.answer if k % 2 == 0 else "nobody at all"
        return f"<think>Then {titles[1]}.</think><answer>{answer}</answer>"

    return script


def replay_group(env, seed, task, turns_per_slot):
    """The G agent turns (decoded from what TRL trains on) replayed through a fresh group env."""
    env.reset(seed=seed, options={"task": task})
    events, step = [], 0
    while not env.unwrapped.group.done:
        acts = tuple(turns[step] if step < len(turns) else "" for turns in turns_per_slot)
        events += env.step(acts)[-1]["rewards"]
        step += 1
    return events


def test_rollout_func_tags_trains_two_steps_with_exact_masks_and_the_envs_rewards(chatml_tok, default_world):
    ds = train_dataset(n=2, protocol="tags", env_kwargs={**ENV, "world": default_world})
    tasks = [sgtrl.task_of_row(r).task for r in ds]
    model = scripted_model(chatml_tok, tags_script(tasks), eos=False)
    STATS.reset()
    trainer = grpo_trainer(
        model,
        processing_class=chatml_tok,
        args=grpo_args(),
        train_dataset=ds,
        entry="rollout_func",
        rewards="wcr",
        env_kwargs={**ENV, "world": default_world},
    )
    seen = spy(trainer)
    trainer.train()
    assert trainer.state.global_step == 2 and len(seen["batches"]) == 2
    assert_trl_got_our_masks(seen)
    fresh = wrap_rewards(gym.make("KGSolverGroup-v0", group_size=2, **ENV, world=default_world).unwrapped, "wcr")
    for batch, (inputs, _, _, rewards) in zip(seen["batches"], seen["rewards"]):
        rows = masked_rows(chatml_tok, batch)
        for trained, masked in rows:  # the env's insertions (and the closing EOS) are masked, nothing else
            assert "<information>" not in trained and masked.count("<information>") == 1
            assert trained.count("<search>") == 1 and trained.count("<answer>") == 1
        for g in range(0, len(rows), 2):
            row = sgtrl.task_of_row(inputs[g])
            turns = [
                [t + "</search>" for t in trained.split("</search>")[:-1]] + [trained.split("</search>")[-1]]
                for trained, _ in rows[g : g + 2]
            ]
            events = replay_group(fresh, row.seed, row.task, turns)
            assert rewards[g : g + 2, 0].tolist() == pytest.approx([ev["reward"] for ev in events])
            assert [inputs[g + i]["searchgym_wcr_coverage"] for i in range(2)] == pytest.approx(
                [ev["components"]["wcr_coverage"] for ev in events]
            )
    assert STATS.snapshot()["rollouts"] == 8
    logged = [h for h in trainer.state.log_history if "searchgym/cut" in h]
    assert logged and logged[0]["searchgym/cut"] == 0


def selfplay_script(tasks):
    """Proposer: two searches along the path, then a question naming only the seed; Solvers: search
    once, then answer (right on even calls)."""
    by_seed = {path_of(t)[0][0]: t for t in tasks}
    counter = itertools.count()

    def script(context: str) -> str:
        response = after_prompt(context)
        n = response.count("<information>")
        if "Required searches" in context:  # the Proposer's prompt
            task = next(t for seed, t in by_seed.items() if f"Answer: {t.answer}" in context and seed in context)
            titles, relations = path_of(task)
            if n < 2:
                return f"<think>check {titles[n]}</think><search>{titles[n]} {relations[n]}</search>"
            return (
                f"<question>Which place do you reach from {titles[0]} by following the relations "
                f"{', '.join(relations)} one after the other?</question>"
            )
        task = next(t for seed, t in by_seed.items() if seed in question_of(context))
        titles, relations = path_of(task)
        if n == 0:
            return f"<search>{titles[0]} {relations[0]}</search>"
        return f"<answer>{task.answer if next(counter) % 2 == 0 else 'nobody'}</answer>"

    return script


def test_rollout_func_selfplay_trains_solvers_on_the_proposers_question_in_the_same_step(chatml_tok, default_world):
    kwargs = {**ENV, "world": default_world}
    ds = train_dataset(n=1, mode="selfplay", env_kwargs=kwargs)
    assert [sgtrl.task_of_row(r).role for r in ds] == ["proposer", "selfplay"]
    tasks = [sgtrl.task_of_row(ds[0]).task]
    model = scripted_model(chatml_tok, selfplay_script(tasks), eos=False)
    trainer = grpo_trainer(
        model,
        processing_class=chatml_tok,
        args=grpo_args(per_device_train_batch_size=4, num_generations=2),
        train_dataset=ds,
        entry="rollout_func",
        env_kwargs={**kwargs, "verifier": AcceptAll()},
    )
    seen = spy(trainer)
    trainer.train()
    assert trainer.state.global_step == 2
    inputs, _, _, rewards = seen["rewards"][0]
    roles = [r["searchgym_role"] for r in inputs]
    assert roles == ["proposer", "proposer", "selfplay", "selfplay"]
    proposer_rows = [r for r in inputs if r["searchgym_role"] == "proposer"]
    solver_rows = [r for r in inputs if r["searchgym_role"] == "selfplay"]
    for r in proposer_rows:  # each proposer generation played its own game: reward 1 - solve rate
        assert r["searchgym_valid"] == 1.0 and r["searchgym_reward"] == pytest.approx(1 - r["searchgym_solve_rate"])
    assert sorted(r["searchgym_reward"] for r in solver_rows) == [0.0, 1.0]  # one right, one wrong
    rows = masked_rows(chatml_tok, seen["batches"][0])
    assert all("<information>" not in trained for trained, _ in rows)
    prompts = [
        chatml_tok.decode(p[m.bool()].tolist())
        for p, m in zip(*(seen["batches"][0][k] for k in ("prompt_ids", "prompt_mask")))
    ]
    assert all("Which place do you reach from" in p for p in prompts[2:])  # the Solvers got the Proposer's question


def test_rollout_func_function_calling_answers_malformed_calls(qwen_tok, default_world):
    kwargs = {**ENV, "world": default_world}
    ds = train_dataset(n=2, protocol="function_calling", env_kwargs=kwargs)
    tasks = [sgtrl.task_of_row(r).task for r in ds]
    by_question = {t.question: t for t in tasks}

    def script(context: str) -> str:
        task = by_question[question_of(context)]
        n = after_prompt(context).count("<tool_response>")
        n = context.count("<tool_response>")
        if n == 0:
            return '<tool_call>\n{"name": "search", "arguments": {"query": </tool_call>'
        return '<tool_call>\n{"name": "answer", "arguments": {"answer": "' + task.answer + '"}}\n</tool_call>'

    trainer = grpo_trainer(
        scripted_model(qwen_tok, script),
        processing_class=qwen_tok,
        args=grpo_args(max_steps=1),
        train_dataset=ds,
        entry="rollout_func",
        protocol="function_calling",
        env_kwargs=kwargs,
    )
    seen = spy(trainer)
    trainer.train()
    inputs, _, _, rewards = seen["rewards"][0]
    assert rewards[:, 0].tolist() == [1.0] * 4  # corrected, then answered right
    for trained, masked in masked_rows(qwen_tok, seen["batches"][0]):
        assert "could not be read" in masked and "could not be read" not in trained
        assert trained.count("<tool_call>") == 2


def test_rollout_func_with_the_random_model_keeps_sampled_ids_and_masks(chatml_tok, default_world):
    """Real sampling (the untouched tiny model): whatever it writes, the env's corrections are masked and
    every sampled token is trained."""
    kwargs = {**ENV, "world": default_world, "max_turns": 2}
    ds = train_dataset(n=1, env_kwargs=kwargs)
    STATS.reset()
    trainer = grpo_trainer(
        build_model(chatml_tok, seed=1),
        processing_class=chatml_tok,
        args=grpo_args(max_steps=1, max_completion_length=48, per_device_train_batch_size=2),
        train_dataset=ds,
        entry="rollout_func",
        env_kwargs=kwargs,
    )
    seen = spy(trainer)
    trainer.train()
    batch = seen["batches"][0]
    assert_trl_got_our_masks(seen)
    for i, (trained, masked) in enumerate(masked_rows(chatml_tok, batch)):
        assert "<information>" not in trained and "My previous action is invalid" not in trained
        assert trained  # the sampled ids are trained
    assert STATS.snapshot()["rollouts"] == 2


# ----------------------------------------------------------------------------- data, bad input
def test_dataset_sources_render_the_envs_prompts(default_world, tmp_path):
    rows = dataset_rows(n=3, env_kwargs={"world": default_world})
    env = gym.make("KGSolver-v0", world=default_world).unwrapped
    for i, row in enumerate(rows):
        env.reset(options={"index": i})
        assert row["prompt"][0]["content"] == env.rollout.trajectory.prompt
    pool = env.tasks.pool if hasattr(env.tasks, "pool") else None
    fc = dataset_rows(n=2, protocol="function_calling", kg_tool=True, env_kwargs={"world": default_world})
    assert "kg_lookup tool" in fc[0]["prompt"][0]["content"]
    qa = dataset_rows(flashrag="tests/fixtures/eval/tiny_qa.jsonl")
    assert sgtrl.task_of_row(qa[0]).task.answers == ["Tarsk"] and len(qa) >= 2
    from searchgym.envs.resources import default_pool

    subgraphs = default_pool(default_world)[:3]
    from_pool = dataset_rows(pool=subgraphs, env_kwargs={"world": default_world})
    assert [sgtrl.task_of_row(r).task.subgraph.id for r in from_pool] == [sg.id for sg in subgraphs]
    assert pool is None or pool
    with pytest.raises(InvalidArgumentError, match="at most one of"):
        dataset_rows(pool=subgraphs, flashrag="tests/fixtures/eval/tiny_qa.jsonl")
    with pytest.raises(InvalidArgumentError, match="self-play rows need KG subgraphs"):
        dataset_rows(mode="selfplay", flashrag="tests/fixtures/eval/tiny_qa.jsonl")


def test_bad_input_fails_clearly(qwen_tok, chatml_tok, default_world):
    with pytest.raises(InvalidArgumentError, match="unknown env id 'KGSolver-v9'.*KGSolver-v0"):
        environment_factory(env_id="KGSolver-v9")
    with pytest.raises(InvalidArgumentError, match="KGSelfPlay-v0.*rollout_func"):
        environment_factory(env_id="KGSelfPlay-v0")
    with pytest.raises(InvalidArgumentError, match="unknown reward 'wrc'.*wcr"):
        environment_factory("wrc")
    rows = dataset_rows(n=1, env_kwargs={"world": default_world})
    with pytest.raises(InvalidArgumentError, match="unknown reward 'wrc'"):
        rollout_func(rows, rewards="wrc")
    env = environment_factory(world=default_world)()
    with pytest.raises(DatasetRowError, match="without a searchgym task.*train_dataset"):
        env.reset(prompt=[{"role": "user", "content": "hi"}], text="no task here")
    with pytest.raises(DatasetRowError, match="not the env's prompt.*protocol='function_calling'"):
        env.reset(**rows[0])  # a tags row played by the function-calling env
    env.reset(question="Where was Alice Varn born?", answer="Tarsk")  # QA columns are a task too
    assert env.search(query=42).startswith("Error:")  # bad arguments: a corrective reply, never a crash
    assert sgtrl.STATS.snapshot()["bad_tool_calls"] >= 1
    with pytest.raises(DatasetRowError, match="row 1: dataset row without a searchgym task"):
        rollout_func([rows[0], {"prompt": "x"}])
    # chat templates: no tool support at all, and one TRL cannot parse
    with pytest.raises(ChatTemplateError, match="drops the tool schemas.*protocol='tags'"):
        check_tokenizer(chatml_tok)
    check_tokenizer(chatml_tok, "rollout_func", "tags")  # the tag protocol works with any template
    odd = build_tool_tokenizer()
    odd.chat_template = qwen_tok.chat_template.replace("You are Qwen", "You are Tiny")
    check_tokenizer(odd, "rollout_func", "function_calling")  # searchgym parses its tool calls itself
    with pytest.raises(ChatTemplateError, match="Unrecognized chat template.*rollout_func"):
        check_tokenizer(odd)
    with pytest.raises(ChatTemplateError, match="drops the tool schemas"):
        grpo_trainer(build_model(chatml_tok), processing_class=chatml_tok, args=grpo_args(), train_dataset=rows)


def test_generation_agrees_across_processes_and_idles_with_one_token():
    """With several processes every one must call generation equally often (collective calls)."""
    from types import SimpleNamespace

    from searchgym.integrations.trl.generation import TrainerGeneration

    calls, gathered = [], []

    class Accelerator:
        num_processes, device = 2, "cpu"

        def gather(self, t):
            gathered.append(int(t.item()))
            return torch.cat([t, torch.tensor([3])])  # the other process still has 3 streams

    trainer = SimpleNamespace(
        accelerator=Accelerator(),
        processing_class=SimpleNamespace(eos_token_id=7),
        _generate_single_turn=lambda prompts, images, fields, n: calls.append((prompts, n)) or ([[1]], None),
    )
    gen = TrainerGeneration(trainer)
    assert gen.any_active(0) and gathered == [0]  # nothing here, but the other process is still going
    gen.idle()
    assert calls == [([[7]], 1)]
    with pytest.raises(searchgym.errors.SearchGymRuntimeError, match="install TRL 1.16.0"):
        TrainerGeneration(SimpleNamespace())


def test_cut_at_stop_keeps_the_shortest_prefix(chatml_tok):
    ids = chatml_tok.encode("<think>x</think><search>Tarsk</search> and more text", add_special_tokens=False)
    n = cut_at_stop(ids, chatml_tok, ["</search>"])
    assert chatml_tok.decode(ids[:n]).endswith("</search>") and not chatml_tok.decode(ids[: n - 1]).endswith(
        "</search>"
    )
    assert cut_at_stop(ids, chatml_tok, ["</answer>"]) == len(ids) and cut_at_stop(ids, chatml_tok, []) == len(ids)
