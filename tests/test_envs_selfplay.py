"""KGSelfPlay-v0: the game loop, role-tagged rewards, replay buffer, curriculum, export, CLI."""

from __future__ import annotations

import json
import random
import re

import gymnasium as gym
import pytest

import searchgym  # noqa: F401
from searchgym.agents.scripted import LeakyProposer, PathFollowingSolver, ScriptedProposer, ScriptedSelfPlayAgent
from searchgym.cli import main as cli_main
from searchgym.construction.question_templates import path_question
from searchgym.core.types import Task
from searchgym.envs.export import TrajectoryWriter, read_trajectories
from searchgym.envs.replay import ReplayBuffer
from searchgym.envs.selfplay import KGSelfPlayEnv
from searchgym.errors import InvalidArgumentError
from searchgym.evaluation.game_text import game_lines
from tests.support.env_helpers import AcceptAll, RejectAll, play, tiny_subgraph


def _tiny(world, **kw):
    kw.setdefault("verifier", AcceptAll())
    return KGSelfPlayEnv(world, pool=[tiny_subgraph()], group_size=3, **kw)


class WrongSolver(PathFollowingSolver):
    """Searches like the path follower, then answers wrongly."""

    def turn(self, traj, slot):
        text = super().turn(traj, slot)
        return "<answer>nobody</answer>" if "<answer>" in text else text


def test_default_game_plays_offline_with_the_scripted_agent():
    env = gym.make("KGSelfPlay-v0")
    obs, info = env.reset(seed=0)
    assert obs["role"] == 0 and list(obs["active"]) == [1, 0, 0, 0, 0] and obs["texts"][1:] == ("",) * 4
    assert info["role"] == "proposer" and info["trajectories"][0].role == "proposer"
    agent = ScriptedSelfPlayAgent(seed=0)
    roles, events, done = [], [], False
    while not done:
        obs, reward, term, trunc, info = env.step(agent.act(obs, info))
        roles.append(int(obs["role"]))
        events += info["rewards"]
        assert reward == sum(e["reward"] for e in info["rewards"])
        done = term or trunc
    assert term and not trunc and 1 in roles
    solver = [e for e in events if e["role"] == "solver"]
    assert len(solver) == 5 and sorted(e["slot"] for e in solver) == list(range(5))
    assert [e for e in events if e["role"] == "proposer"]
    assert info["validation"]["valid"] in (True, False)


def test_valid_question_rewards_proposer_one_minus_mean_solver_accuracy(tiny_world):
    env = _tiny(tiny_world)
    agent = ScriptedSelfPlayAgent(proposer=ScriptedProposer(), solver=PathFollowingSolver())
    steps, first = play(env, agent, seed=0)
    # the proposer's event is deferred: it arrives with the solvers' on the last step
    assert all(not s[4]["rewards"] for s in steps[:-1])
    final = steps[-1][4]
    evs = final["rewards"]
    assert [e["role"] for e in evs] == ["solver"] * 3 + ["proposer"]
    assert all(e["reward"] == 1.0 for e in evs[:3]) and evs[3]["reward"] == 0.0
    assert evs[3]["components"] == {"valid": 1.0, "outcome": 0.0, "solve_rate": 1.0}
    assert final["task"].source == "proposer" and final["task"].question == final["proposer"].question
    assert final["replay"] == "proposed" and len(env.replay) == 1
    assert final["reward_components"]["solver"]["outcome"] == [1.0, 1.0, 1.0]
    assert final["reward_components"]["proposer"]["outcome"] == 0.0
    # a hard question (nobody solves it) gives the proposer the full reward
    steps, _ = play(env, ScriptedSelfPlayAgent(solver=WrongSolver()), seed=0)
    prop = [e for e in steps[-1][4]["rewards"] if e["role"] == "proposer"][0]
    assert prop["reward"] == 1.0 and steps[-1][1] == 1.0


def test_invalid_question_rewards_zero_at_verification_and_solvers_get_a_replay_task(tiny_world):
    env = _tiny(tiny_world)
    play(env, ScriptedSelfPlayAgent(), seed=0)  # one valid game fills the buffer
    stored = env.replay.sample(random.Random(0))
    obs, info = env.reset(seed=0)
    agent = ScriptedSelfPlayAgent(proposer=LeakyProposer())
    while info["role"] == "proposer":
        obs, reward, term, trunc, info = env.step(agent.act(obs, info))
    (ev,) = info["rewards"]  # emitted on the verification step
    assert ev["role"] == "proposer" and ev["reward"] == 0.0 and ev["components"]["valid"] == 0.0 and reward == 0.0
    assert info["validation"].valid is False and info["validation"].reason == "answer_leak"
    assert obs["role"] == 1 and list(obs["active"]) == [1, 1, 1] and info["replay"] == "replayed"
    assert info["task"] is stored and all(t.task is stored for t in info["trajectories"])
    done = False
    while not done:
        obs, reward, term, trunc, info = env.step(agent.act(obs, info))
        done = term or trunc
    assert [e["role"] for e in info["rewards"]] == ["solver"] * 3  # no second proposer event
    assert all(e["reward"] >= 0 for e in info["rewards"])


def test_invalid_question_with_empty_buffer_uses_the_dummy_template_task(tiny_world):
    env = _tiny(tiny_world, verifier=RejectAll())
    obs, info = env.reset(seed=0)
    agent = ScriptedSelfPlayAgent()
    while info["role"] == "proposer":
        obs, _, _, _, info = env.step(agent.act(obs, info))
    assert info["replay"] == "dummy" and info["task"].source == "dummy"
    assert (
        info["task"].question.startswith("What place is the capital of")
        and info["validation"]["reason"] == "verifier_incorrect"
    )
    assert len(env.replay) == 0  # invalid questions never enter the buffer


def test_replay_buffer_periodic_reset_and_capacity():
    buf = ReplayBuffer(capacity=2, reset_every=3)
    assert buf.sample(random.Random(0)) is None
    for i in range(3):
        buf.add(Task(id=str(i), question="q", answers=["a"]))
    assert len(buf) == 2 and {buf.sample(random.Random(s)).id for s in range(20)} == {"1", "2"}
    assert [buf.end_game() for _ in range(3)] == [False, False, True] and len(buf) == 0 and buf.resets == 1
    with pytest.raises(ValueError, match="capacity"):
        ReplayBuffer(0)


def test_env_clears_the_replay_buffer_every_n_games(tiny_world):
    env = _tiny(tiny_world, replay_reset_every=2)
    agent = ScriptedSelfPlayAgent()
    play(env, agent, seed=0)
    assert len(env.replay) == 1
    play(env, agent, seed=0)
    assert len(env.replay) == 0 and env.replay.resets == 1


def test_curriculum_order_and_seeded_choice():
    env = gym.make("KGSelfPlay-v0").unwrapped
    counts = [sg.node_count for sg in env.pool]
    assert counts == sorted(counts, reverse=True)  # curriculum: descending node count
    _, info = env.reset(seed=3)
    assert info["subgraph"] is env.pool[3]
    _, info = env.reset()
    assert info["subgraph"] is env.pool[4]
    _, info = env.reset(options={"index": 0})
    assert info["subgraph"] is env.pool[0]


def test_vanilla_proposer_mode_prompt(tiny_world):
    env = _tiny(tiny_world, proposer_mode="vanilla")
    obs, _ = env.reset(seed=0)
    assert "Ostrel" in obs["texts"][0] and "Target path" not in obs["texts"][0]
    with pytest.raises(ValueError, match="proposer_mode"):
        _tiny(tiny_world, proposer_mode="x")


def test_export_round_trips_every_game(tmp_path, tiny_world):
    path = tmp_path / "out" / "games.jsonl"
    env = _tiny(tiny_world, export_path=path)
    play(env, ScriptedSelfPlayAgent(), seed=0)
    play(env, ScriptedSelfPlayAgent(proposer=LeakyProposer()), seed=0)
    env.close()
    games = read_trajectories(path)
    assert [g.game for g in games] == [0, 1] and [g.validation["valid"] for g in games] == [True, False]
    g0, g1 = games
    assert g0.proposer.role == "proposer" and len(g0.solvers) == 3 and g1.replay == "replayed"
    assert g0.replay == "proposed"
    assert [e.role for e in g1.rewards] == ["proposer"] + ["solver"] * 3
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert all("trajectory" not in e for line in lines for e in line["rewards"]) and lines[0]["format"] == 2
    assert g0.rewards[0].trajectory is g0.solvers[0] and g1.rewards[0].trajectory is g1.proposer
    live = env.proposer.trajectory
    assert g1.proposer.to_dict() == live.to_dict()  # exact round trip
    assert g1.solvers[0].env_spans == env.group.trajectories[0].env_spans


def test_read_trajectories_reads_the_first_format(tmp_path, tiny_world):
    """Lines written before the format key: replay false/true/"dummy" read as the named sources."""
    path = tmp_path / "games.jsonl"
    env = _tiny(tiny_world, export_path=path)
    play(env, ScriptedSelfPlayAgent(), seed=0)
    env.close()
    (line,) = [json.loads(t) for t in path.read_text().splitlines()]
    del line["format"]
    old = [{**line, "replay": value, "game": i} for i, value in enumerate([False, True, "dummy"])]
    old.append({**line, "proposer": None, "replay": False, "game": 3})  # a solver-only game of version 1
    path.write_text("".join(json.dumps(rec) + "\n" for rec in old))
    assert [g.replay for g in read_trajectories(path)] == ["proposed", "replayed", "dummy", None]
    assert read_trajectories(path)[0].validation.valid is True


def test_read_trajectories_errors(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"game": 0, "proposer": {"role": "proposer"}}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl: line 1 is not a valid searchgym game record \(no .task. field\)"):
        read_trajectories(bad)
    with pytest.raises(FileNotFoundError):
        read_trajectories(tmp_path / "none.jsonl")
    w = TrajectoryWriter(tmp_path / "w.jsonl")
    w.close()
    w.close()
    with pytest.raises(ValueError, match="closed"):
        w.write_game(game=0, proposer=None, validation=None, solvers=[], rewards=[])


def test_step_errors(tiny_world):
    env = _tiny(tiny_world)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(("",) * 3)
    env.reset(seed=0)
    with pytest.raises(TypeError, match="tuple of 3"):
        env.step("<search>x</search>")


def test_play_cli_prints_rewards_and_exports(tmp_path, capsys):
    out = tmp_path / "play.jsonl"
    assert cli_main(["play", "--env", "KGSelfPlay-v0", "--games", "2", "--export", str(out)]) == 0
    text = capsys.readouterr().out
    assert len(re.findall(r"^game \d: question (verified|rejected)", text, re.M)) == 2 and "games/s" in text
    assert "proposer reward " in text and " reward 1.00 = outcome 1.00" in text  # each reward with its terms
    assert len(read_trajectories(out)) == 2
    assert cli_main(["play", "--env", "KGSolver-v0", "--agent", "leaky"]) == 2
    assert "leaky" in capsys.readouterr().err


def test_clone_shares_resources_but_not_game_state(tiny_world):
    env = _tiny(tiny_world)
    play(env, ScriptedSelfPlayAgent(), seed=0)
    twin = env.clone()
    assert twin.world is env.world and twin.retriever is env.retriever and twin.pool == env.pool
    assert twin.validation.verifier is env.validation.verifier and len(twin.replay) == 0 and len(env.replay) == 1
    assert twin.group_size == env.group_size and twin.max_turns == env.max_turns


def test_state_dict_continues_the_game_stream_exactly():
    import pickle

    env = gym.make("KGSelfPlay-v0").unwrapped
    agent = ScriptedSelfPlayAgent()
    for seed in (5, None):
        play(env, agent, seed=seed)
    state = pickle.loads(pickle.dumps(env.state_dict()))
    other = env.clone()
    other.load_state_dict(state)
    a, _ = play(env, agent)
    b, _ = play(other, agent)
    ia, ib = a[-1][4], b[-1][4]
    assert ia["subgraph"] is ib["subgraph"] is env.pool[7]
    assert ia["game"] == ib["game"] == 2 and ia["validation"]["valid"] == ib["validation"]["valid"]
    assert [e["reward"] for e in ia["rewards"]] == [e["reward"] for e in ib["rewards"]]
    assert len(env.replay) == len(other.replay) and list(env.validation.recent) == list(other.validation.recent)


def test_a_solver_only_game_has_no_proposer_phase_and_reports_only_the_solvers(tiny_world):
    """``solver_only_hops``: a game on a subgraph of that hop count starts in the Solver phase on the subgraph's own
    question, reports the G Solver events and no Proposer event, stores nothing in the replay buffer, and prints as
    a game without a Proposer; the reset option overrides the hop counts both ways."""
    env = _tiny(tiny_world, solver_only_hops=[3])  # the tiny subgraph's path has 3 hops
    steps, first = play(env, ScriptedSelfPlayAgent(), seed=0)
    assert first["role"] == "solver" and first["proposer"] is None and first["replay"] == "solver_only"
    assert first["task"].source == "subgraph" and first["task"].question == path_question(tiny_subgraph())
    assert first["subgraph"].id == "tiny-0" and first["reward_components"]["proposer"] == {}
    final = steps[-1][4]
    assert [e["role"] for e in final["rewards"]] == ["solver"] * 3
    assert all(e["reward"] == 1.0 for e in final["rewards"])  # the path follower answers the template question
    assert len(env.replay) == 0 and env.games_finished == 1
    lines = game_lines(0, final["rewards"], final)
    assert "a solver-only game" in lines[1] and "proposer reward" not in "\n".join(lines)
    _, info = env.reset(seed=0, options={"solver_only": False})
    assert info["role"] == "proposer" and info["replay"] == "proposed"
    _, info = _tiny(tiny_world).reset(seed=0, options={"solver_only": True})
    assert info["role"] == "solver" and info["proposer"] is None
    with pytest.raises(InvalidArgumentError, match="solver_only"):
        env.reset(seed=0, options={"solver_only": "yes"})
    for bad in (["1"], [0], "1"):
        with pytest.raises(InvalidArgumentError, match="solver_only_hops"):
            _tiny(tiny_world, solver_only_hops=bad)
    assert env.clone().solver_only_hops == (3,)


def test_solver_only_games_pass_check_env_and_export(tmp_path):
    from gymnasium.utils.env_checker import check_env

    env = gym.make("KGSelfPlay-v0", pool_hops=[1, 2], solver_only_hops=[1])
    check_env(env.unwrapped, skip_render_check=True)
    path = tmp_path / "games.jsonl"
    env = gym.make("KGSelfPlay-v0", pool_hops=[1, 2], solver_only_hops=[1], export_path=str(path))
    roles = []
    for seed in range(4):
        _, first = play(env, ScriptedSelfPlayAgent(seed=seed), seed=seed)
        roles.append((len(first["subgraph"].path) - 1, first["role"]))
    assert sorted(set(roles)) == [(1, "solver"), (2, "proposer")]
    games = list(read_trajectories(path))
    assert len(games) == 4
    one_hop = [g for g in games if g.replay == "solver_only"]
    assert one_hop and all(g.proposer is None and len(g.solvers) == 5 for g in one_hop)
