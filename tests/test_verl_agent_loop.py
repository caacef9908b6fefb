"""The verl agent loops, run with verl's real classes (AgentLoopBase, AgentLoopOutput, TokenOutput,
DictConfigWrap) and a stand-in ``server_manager``: a scripted one for exact rewards and masks, a
local tiny Llama for real sampled token ids. Skipped when the ``verl`` extra is not installed."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

pytest.importorskip("verl.experimental.agent_loop.agent_loop", reason="needs the verl extra (pip install -e '.[verl]')")

from omegaconf import OmegaConf  # noqa: E402
from verl.experimental.agent_loop.agent_loop import DictConfigWrap, _agent_loop_registry  # noqa: E402
from verl.workers.rollout.replica import TokenOutput  # noqa: E402

from searchgym.integrations.environments import EnvSpec, cached_env  # noqa: E402
from searchgym.integrations.verl import agent_loop as al  # noqa: E402
from searchgym.integrations.verl.data import VerlRowError  # noqa: E402
from searchgym.retrieval.base import Retriever  # noqa: E402
from tests.support.tiny_lm import build_model, build_tokenizer  # noqa: E402

RESPONSE_LENGTH = 4096


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


def make_loop(cls, tok, server, *, n=1, response_length=RESPONSE_LENGTH, **kw):
    cfg = OmegaConf.create(
        {
            "actor_rollout_ref": {"rollout": {"prompt_length": 1024, "response_length": response_length, "n": n}},
            "data": {},
        }
    )
    return cls(
        trainer_config=DictConfigWrap(cfg),
        server_manager=server,
        tokenizer=tok,
        processor=None,
        dataset_cls=None,
        data_config=DictConfigWrap(cfg.data),
        **kw,
    )


class ScriptedServer:
    """Searches the question on the first turn, then answers ``answer``."""

    def __init__(self, tok, answer, fail_on_call=None, logprobs=False):
        self.tok, self.answer, self.calls, self.fail_on_call, self.logprobs = tok, answer, 0, fail_on_call, logprobs
        self.params, self.request_ids = [], []

    async def generate(self, request_id, prompt_ids, sampling_params, **kw):
        self.calls += 1
        self.params.append(sampling_params)
        self.request_ids.append(request_id)
        if self.fail_on_call == self.calls:
            raise ConnectionError("vLLM replica went away")
        seen = self.tok.decode(prompt_ids)
        text = (
            "<think>find it</think><search>capital of the country</search>"
            if not seen.endswith("</information>\n")
            else f"<think>so it is {self.answer}</think><answer>{self.answer}</answer>"
        )
        ids = self.tok.encode(text, add_special_tokens=False)
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids) if self.logprobs else None)


class TinyModelServer:
    """Greedy generation with a real (tiny, random) causal LM: token ids as a rollout replica returns them."""

    def __init__(self, tok):
        import torch

        self.torch, self.tok, self.model = torch, tok, build_model(tok, seed=0).eval()

    async def generate(self, request_id, prompt_ids, sampling_params, **kw):
        with self.torch.no_grad():
            ids = self.torch.tensor([prompt_ids])
            out = self.model.generate(
                ids,
                attention_mask=self.torch.ones_like(ids),
                do_sample=False,
                max_new_tokens=min(16, sampling_params["max_tokens"]),
                pad_token_id=self.tok.pad_token_id,
            )
        return TokenOutput(token_ids=out[0, len(prompt_ids) :].tolist(), log_probs=None)


def first_task():
    env = cached_env(EnvSpec("KGSolver-v0"), clone=False)
    env.reset(options={"index": 0})
    return env.unwrapped.rollout.trajectory.task


def masked_out_text(tok, out):
    """The decoded runs of response tokens with mask 0 (what the env inserted)."""
    runs, cur = [], []
    for t, m in zip(out.response_ids, out.response_mask):
        if m == 0:
            cur.append(t)
        elif cur:
            runs.append(tok.decode(cur))
            cur = []
    if cur:
        runs.append(tok.decode(cur))
    return runs


def test_loops_register_with_verl():
    assert _agent_loop_registry["searchgym_solver"]["_target_"].endswith("agent_loop.SearchGymSolverLoop")
    assert _agent_loop_registry["searchgym_selfplay"]["_target_"].endswith("agent_loop.SearchGymSelfPlayLoop")
    assert _agent_loop_registry["searchgym_proposer"]["_target_"].endswith("agent_loop.SearchGymProposerLoop")


def test_solver_loop_reward_components_and_exact_env_mask(tok):
    task = first_task()
    server = ScriptedServer(tok, task.answers[0])
    loop = make_loop(al.SearchGymSolverLoop, tok, server, rewards="wcr")
    out = asyncio.run(loop.run({"temperature": 1.0}, extra_info={"searchgym": {"task": task.to_dict()}}))
    assert out.reward_score == pytest.approx(1.0 + out.extra_fields["reward_extra_info"]["wcr_bonus"])
    assert out.extra_fields["reward_extra_info"]["outcome"] == 1.0
    assert out.extra_fields["searchgym_failed"] == 0 and server.calls == 2
    assert len(out.response_ids) == len(out.response_mask)
    assert out.response_logprobs is None  # the server sent no log-probs: none are made up
    env_runs = masked_out_text(tok, out)
    assert len(env_runs) == 1 and env_runs[0].startswith("\n<information>") and env_runs[0].endswith("</information>\n")
    sampled = tok.decode([t for t, m in zip(out.response_ids, out.response_mask) if m])
    assert sampled.endswith(f"<answer>{task.answers[0]}</answer>")
    assert server.request_ids[0] == server.request_ids[1]  # one sticky session per rollout
    assert server.params[0]["stop"] == al.TURN_STOPS and server.params[0]["max_tokens"] == RESPONSE_LENGTH
    d = out.as_dict()  # verl's own conversion to tensors accepts it
    assert d["rm_scores"][-1].item() == pytest.approx(out.reward_score)


def test_log_probs_of_sampled_tokens_pass_through_env_tokens_get_zero(tok):
    task = first_task()
    loop = make_loop(al.SearchGymSolverLoop, tok, ScriptedServer(tok, task.answers[0], logprobs=True))
    out = asyncio.run(loop.run({}, extra_info={"searchgym": {"task": task.to_dict()}}))
    assert len(out.response_logprobs) == len(out.response_ids)
    assert all((lp == -0.5) == bool(m) for lp, m in zip(out.response_logprobs, out.response_mask))


def test_rollout_cut_by_response_length_is_flagged_not_scored(tok):
    task = first_task()
    loop = make_loop(al.SearchGymSolverLoop, tok, ScriptedServer(tok, task.answers[0]), response_length=64)
    out = asyncio.run(loop.run({}, extra_info={"searchgym": {"task": task.to_dict()}}))
    assert out.extra_fields["searchgym_cut"] == 1 and out.reward_score == 0.0
    assert out.extra_fields["reward_extra_info"] == {"cut_by_response_length": 1.0}
    assert len(out.response_ids) == 64


class ToolCallServer(ScriptedServer):
    """The same rollout in the function-call form (``<tool_call>`` JSON) instead of tags."""

    async def generate(self, request_id, prompt_ids, sampling_params, **kw):
        self.calls += 1
        call = (
            {"name": "search", "arguments": {"query": "capital of the country"}}
            if not self.tok.decode(prompt_ids).endswith("</information>\n")
            else {"name": "answer", "arguments": {"answer": self.answer}}
        )
        text = f"<tool_call>{json.dumps(call)}</tool_call>"
        return TokenOutput(token_ids=self.tok.encode(text, add_special_tokens=False), log_probs=None)


def test_solver_loop_plays_the_tool_call_protocol(tok):
    task = first_task()
    server = ToolCallServer(tok, task.answers[0])
    out = asyncio.run(
        make_loop(al.SearchGymSolverLoop, tok, server).run({}, extra_info={"searchgym": {"task": task.to_dict()}})
    )
    assert server.calls == 2 and out.reward_score == 1.0
    assert len(masked_out_text(tok, out)) == 1


def test_wrong_answer_scores_zero(tok):
    task = first_task()
    loop = make_loop(al.SearchGymSolverLoop, tok, ScriptedServer(tok, "certainly not the answer"))
    out = asyncio.run(loop.run({}, extra_info={"searchgym": {"task": task.to_dict()}}))
    assert out.reward_score == 0.0 and out.extra_fields["reward_extra_info"]["outcome"] == 0.0


def test_solver_loop_with_a_tiny_model(tok):
    loop = make_loop(al.SearchGymSolverLoop, tok, TinyModelServer(tok), env_kwargs={"max_turns": 3})
    out = asyncio.run(loop.run({}, extra_info={"searchgym": {"index": 3}}))
    assert 0 < len(out.response_ids) <= RESPONSE_LENGTH
    assert sum(out.response_mask) > 0 and out.num_turns >= 2
    assert out.extra_fields["searchgym_failed"] == 0
    assert out.reward_score == 0.0  # a random tiny model answers nothing right


def test_server_manager_failing_mid_rollout_is_marked_and_counted(tok):
    task = first_task()
    before = al.FAILED_ROLLOUTS.get("searchgym_solver", 0)
    loop = make_loop(al.SearchGymSolverLoop, tok, ScriptedServer(tok, task.answers[0], fail_on_call=2))
    out = asyncio.run(loop.run({}, extra_info={"searchgym": {"task": task.to_dict()}}))
    assert out.extra_fields["searchgym_failed"] == 1
    assert "vLLM replica went away" in out.extra_fields["searchgym_error"]
    assert set(out.response_mask) == {0}  # no gradient from a broken rollout
    assert al.FAILED_ROLLOUTS["searchgym_solver"] == before + 1
    raising = make_loop(
        al.SearchGymSolverLoop, tok, ScriptedServer(tok, "x", fail_on_call=1), on_generate_error="raise"
    )
    with pytest.raises(RuntimeError, match="generator failed mid-rollout"):
        asyncio.run(raising.run({}, extra_info={"searchgym": {"task": task.to_dict()}}))


def test_bad_names_fail_clearly(tok):
    with pytest.raises(ValueError, match="unknown env id 'KGSolver-v9'.*KGSolver-v0"):
        make_loop(al.SearchGymSolverLoop, tok, None, env_id="KGSolver-v9")
    with pytest.raises(ValueError, match="unknown reward 'wrc'.*wcr"):
        make_loop(al.SearchGymSolverLoop, tok, None, rewards="wrc")
    with pytest.raises(ValueError, match="rollout.n=3 must equal the game's group_size=5"):
        make_loop(al.SearchGymSelfPlayLoop, tok, None, n=3)
    with pytest.raises(ValueError, match="tag protocol.*TRL adapter"):
        make_loop(al.SearchGymSolverLoop, tok, None, env_kwargs={"protocol": "function_calling"})


def test_reward_options_from_the_yaml_reach_the_solver_loops_wrappers(tok):
    task = first_task()
    seed = task.waypoints[0]  # answered: a wrong answer that is a waypoint, named in the reasoning
    no_credit = OmegaConf.create({"wcr": {"waypoint_answer_credit": False}})  # as hydra passes the YAML entry
    loop = make_loop(al.SearchGymSolverLoop, tok, ScriptedServer(tok, seed), rewards="wcr", reward_options=no_credit)
    assert loop.spec == EnvSpec("KGSolver-v0", ("wcr",), reward_options={"wcr": {"waypoint_answer_credit": False}})
    assert type(loop.spec.reward_options["wcr"]) is dict
    paid = make_loop(al.SearchGymSolverLoop, tok, ScriptedServer(tok, seed), rewards="wcr")
    row = {"searchgym": {"task": task.to_dict()}}
    withheld, credited = (
        asyncio.run(x.run({}, extra_info=row)).extra_fields["reward_extra_info"] for x in (loop, paid)
    )
    assert credited["wcr_bonus"] > 0 and credited["outcome"] == 0.0
    assert withheld["wcr_bonus"] == 0.0 and withheld["wcr_answered_waypoint"] == 1.0
    with pytest.raises(ValueError, match="reward 'wcr' has no option credit"):
        make_loop(al.SearchGymSolverLoop, tok, None, rewards="wcr", reward_options={"wcr": {"credit": False}})


def test_selfplay_loop_one_game_per_group(tok):
    group = 3
    server = TinyModelServer(tok)
    loops = [
        make_loop(
            al.SearchGymSelfPlayLoop,
            tok,
            server,
            n=group,
            rewards="wcr",
            env_kwargs={"group_size": group, "max_turns": 2},
        )
        for _ in range(group)
    ]

    async def run_group():
        return await asyncio.gather(*[lp.run({}, uid="row-7", extra_info={"searchgym": {"index": 1}}) for lp in loops])

    outs = asyncio.run(run_group())
    assert sorted(o.extra_fields["searchgym_slot"] for o in outs) == list(range(group))
    first = outs[0].extra_fields["searchgym_proposer_response_ids"]
    assert len(first) > 0 and all(o.extra_fields["searchgym_proposer_response_ids"] == first for o in outs)
    assert all(o.extra_fields["searchgym_valid_question"] == 0.0 for o in outs)  # a random model proposes nothing valid
    assert all(o.extra_fields["searchgym_proposer_reward"] == 0.0 for o in outs)
    assert all(len(o.response_ids) == len(o.response_mask) and sum(o.response_mask) > 0 for o in outs)
    assert "row-7" not in al.SearchGymSelfPlayLoop._games  # the game is released once every slot joined


def test_proposer_loop_returns_the_proposer_rollout(tok):
    server = TinyModelServer(tok)
    loop = make_loop(al.SearchGymProposerLoop, tok, server, n=2, env_kwargs={"group_size": 2, "max_turns": 2})
    out = asyncio.run(loop.run({}, extra_info={"searchgym": {"index": 2}}))
    assert out.extra_fields["searchgym_valid_question"] == 0.0 and out.reward_score == 0.0
    assert out.extra_fields["reward_extra_info"] == {"valid": 0.0, "outcome": 0.0}
    assert 0 < sum(out.response_mask) < len(out.response_mask)  # sampled turns and env observations
    assert out.extra_fields["searchgym_replay"] in ("dummy", "True")


def test_selfplay_lone_sample_as_in_validation_releases_its_game(tok):
    loop = make_loop(
        al.SearchGymSelfPlayLoop, tok, TinyModelServer(tok), n=2, env_kwargs={"group_size": 2, "max_turns": 2}
    )
    out = asyncio.run(loop.run({}, uid="val-row", extra_info={"searchgym": {"index": 0}}))
    assert out.extra_fields["searchgym_slot"] == 0 and "val-row" not in al.SearchGymSelfPlayLoop._games


def test_selfplay_games_of_a_process_share_replay_and_noise():
    spec = EnvSpec("KGSelfPlay-v0", (), {"group_size": 2})
    a, b = cached_env(spec).unwrapped, cached_env(spec).unwrapped
    assert a is not b and a.replay is b.replay and a.validation.recent is b.validation.recent


def test_example_yaml_instantiates_through_hydra_as_verl_does(tok):
    from pathlib import Path

    import hydra

    entries = OmegaConf.load(Path(__file__).resolve().parents[1] / "examples/verl/agent_loops.yaml")
    cfg = OmegaConf.create(
        {"actor_rollout_ref": {"rollout": {"prompt_length": 1024, "response_length": 512, "n": 5}}, "data": {}}
    )
    loops = {
        e.name: hydra.utils.instantiate(
            config=e,
            trainer_config=DictConfigWrap(cfg),
            server_manager=None,
            tokenizer=tok,
            processor=None,
            hf_model_type=None,
            dataset_cls=None,
            data_config=DictConfigWrap(cfg.data),
            tools=None,
        )
        for e in entries
    }
    assert loops["searchgym_solver"].spec == EnvSpec("KGSolver-v0", ("wcr",), {"max_turns": 6})
    assert loops["searchgym_selfplay"].spec.env_kwargs == {"group_size": 5, "max_turns": 6}
    assert isinstance(loops["searchgym_proposer"], al.SearchGymProposerLoop)


# ----------------------------------------------------------------------------- rows from elsewhere
def search_r1_row(task, prompt=None, **extra):
    """A row of Search-R1's verl parquet as verl hands it to a loop (golds as a numpy object array)."""
    import numpy as np

    from searchgym.tasks.tasksets import search_r1_prompt

    content = prompt or search_r1_prompt(task.question)
    return {
        "data_source": "nq",
        "prompt": [{"role": "user", "content": content}],
        "raw_prompt": [{"role": "user", "content": content}],
        "reward_model": {"style": "rule", "ground_truth": {"target": np.array(list(task.answers), dtype=object)}},
        "extra_info": {"split": "train", "index": 7},
        **extra,
    }


def test_search_r1_and_flashrag_rows_are_played_as_their_question(tok):
    task = first_task()
    custom = f"Think, then <search>query</search>; end with <answer>name</answer>. Question: {task.question}"
    server = ScriptedServer(tok, task.answers[0])
    out = asyncio.run(make_loop(al.SearchGymSolverLoop, tok, server).run({}, **search_r1_row(task, custom)))
    assert out.reward_score == 1.0 and server.calls == 2
    assert custom in tok.decode(out.prompt_ids)  # a prompt that teaches the tags is the Solver's prompt
    flashrag = {"question": task.question, "golden_answers": list(task.answers), "prompt": task.question}
    out = asyncio.run(make_loop(al.SearchGymSolverLoop, tok, ScriptedServer(tok, task.answers[0])).run({}, **flashrag))
    assert out.reward_score == 1.0
    assert "Answer the given question" in tok.decode(out.prompt_ids)  # a bare question: the env's Solver prompt
    wrong = asyncio.run(
        make_loop(al.SearchGymSolverLoop, tok, ScriptedServer(tok, "certainly not")).run({}, **search_r1_row(task))
    )
    assert wrong.reward_score == 0.0  # the golds came from reward_model.ground_truth.target


def test_rows_without_a_task_are_refused_never_a_default_pool_task(tok):
    loop = make_loop(al.SearchGymSolverLoop, tok, ScriptedServer(tok, "x"))
    with pytest.raises(VerlRowError, match=r"verl row without a searchgym task \(columns: .*make_data.py"):
        asyncio.run(loop.run({}, prompt=[{"role": "user", "content": "hi"}], extra_info={"index": 0}))
    with pytest.raises(VerlRowError, match="neither a task nor an index"):
        asyncio.run(loop.run({}, extra_info={"searchgym": {"seed": 3}}))
    task = first_task()
    selfplay = make_loop(al.SearchGymSelfPlayLoop, tok, TinyModelServer(tok), n=2, env_kwargs={"group_size": 2})
    no_subgraph = search_r1_row(task)
    with pytest.raises(VerlRowError, match="has none.*searchgym_qa"):
        asyncio.run(selfplay.run({}, uid="qa-row", **no_subgraph))
    assert "qa-row" not in al.SearchGymSelfPlayLoop._games  # the refused row left no half-started game


SLOW_SEARCH_S = 1.0  # each search of SlowRetriever sleeps this long


class SlowRetriever(Retriever):
    """The default world's real BM25, behind a deliberate ``SLOW_SEARCH_S`` sleep per call (a remote retriever
    under load); counts calls in flight (class-level, so the env copies verl plays share the count)."""

    lock = threading.Lock()
    in_flight = peak = calls = 0

    def __init__(self, inner):
        self.inner = inner

    def batch_search(self, queries, k=3):
        cls = type(self)
        with cls.lock:
            cls.in_flight += 1
            cls.calls += 1
            cls.peak = max(cls.peak, cls.in_flight)
        try:
            time.sleep(SLOW_SEARCH_S)
            return self.inner.batch_search(queries, k)
        finally:
            with cls.lock:
                cls.in_flight -= 1


def test_env_steps_run_off_the_event_loop_so_slow_searches_overlap(tok):
    from searchgym.envs.resources import default_retriever
    from searchgym.world.synthetic import default_world

    n, task = 4, first_task()
    slow = SlowRetriever(default_retriever(default_world()))
    loops = [
        make_loop(al.SearchGymSolverLoop, tok, ScriptedServer(tok, task.answers[0]), env_kwargs={"retriever": slow})
        for _ in range(n)
    ]
    cached_env(loops[0].spec, clone=False)  # build the env once, outside the measured part

    async def play_all():
        return await asyncio.gather(*[lp.run({}, extra_info={"searchgym": {"task": task.to_dict()}}) for lp in loops])

    start = time.perf_counter()
    outs = asyncio.run(play_all())
    elapsed = time.perf_counter() - start
    assert [o.reward_score for o in outs] == [1.0] * n and SlowRetriever.calls == n  # one search per rollout
    assert SlowRetriever.peak == n  # all n searches were waiting at once
    assert elapsed < n * SLOW_SEARCH_S * 0.6, f"{n} rollouts took {elapsed:.2f}s: their searches ran one by one"


def test_selfplay_loop_refuses_a_solver_only_game_before_generating(tok):
    """A game without a Proposer phase (``solver_only_hops``) cannot train both roles: one line, nothing sampled."""
    server = TinyModelServer(tok)
    loop = make_loop(
        al.SearchGymSelfPlayLoop,
        tok,
        server,
        n=1,
        env_kwargs={"group_size": 1, "max_turns": 2, "pool_hops": [1], "solver_only_hops": [1]},
    )
    with pytest.raises(ValueError, match="no Proposer phase"):
        asyncio.run(loop.run({}, uid="row-s", extra_info={"searchgym": {"index": 0}}))
