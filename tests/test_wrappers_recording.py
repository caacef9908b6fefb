"""Recording is the outermost wrapper: the export holds the rewards the caller sees in ``info``.

Regression for issue 32: ``searchgym play --reward wcr --export g.jsonl`` printed a Solver reward of 0.3 and
wrote 0.0 (components ``{outcome}`` only), because the env wrote its games before the wrappers shaped them.
"""

from __future__ import annotations

import gymnasium as gym
import pytest

import searchgym  # noqa: F401  (registration)
from searchgym.agents.scripted import LeakyProposer, PathFollowingSolver, ScriptedSelfPlayAgent
from searchgym.core.rewards import RewardEvent
from searchgym.envs.export import read_trajectories
from searchgym.envs.selfplay import KGSelfPlayEnv
from searchgym.errors import InvalidArgumentError
from searchgym.wrappers import RecordGames, RewardShapingWrapper, WaypointCoverageReward, wrap_rewards
from tests.support.env_helpers import AcceptAll, tiny_subgraph


class WrongSolver(PathFollowingSolver):
    """Follows the path (so WCR's coverage is full), then answers wrongly (so WCR's bonus is paid)."""

    def turn(self, traj, slot):
        text = super().turn(traj, slot)
        return "<answer>nobody</answer>" if "<answer>" in text else text


class SearchCost(RewardShapingWrapper):
    """A user-defined reward term: 0.05 off a Solver's reward per search."""

    name = "search_cost"

    def shape_solver_group(self, events, info):
        for ev in events:
            ev.add_term("search_cost", -0.05 * ev.trajectory.num_searches, searches=ev.trajectory.num_searches)


class Bonus(gym.Wrapper):
    """A plain Gymnasium wrapper (not a searchgym base class) that rewrites the events itself."""

    def step(self, action):
        obs, reward, term, trunc, info = self.env.step(action)
        shaped = [RewardEvent.coerce(ev) for ev in info["rewards"]]
        for ev in shaped:
            ev.add_term("bonus", 0.5)
        info["rewards"] = shaped
        return obs, reward + 0.5 * len(shaped), term, trunc, info


def _env(world, **kw):
    return KGSelfPlayEnv(world, pool=[tiny_subgraph()], group_size=2, verifier=AcceptAll(), **kw)


def _play(env, games):
    """Play ``games`` games (the second one with a rejected question); the events each game showed in info."""
    shown = []
    for game in range(games):
        proposer = LeakyProposer() if game == 1 else None
        agent = ScriptedSelfPlayAgent(proposer=proposer, solver=WrongSolver())
        obs, info = env.reset(seed=0)
        events, done = [], False
        while not done:
            obs, reward, term, trunc, info = env.step(agent.act(obs, info))
            assert reward == pytest.approx(sum(ev["reward"] for ev in info["rewards"]))
            events += [ev.to_dict() for ev in info["rewards"]]
            done = term or trunc
        shown.append(events)
    return shown


def _exported(path):
    return [[ev.to_dict() for ev in g.rewards] for g in read_trajectories(path)]


def test_export_path_with_stacked_wcr_and_a_user_wrapper_writes_the_shaped_events(tmp_path, tiny_world):
    path = tmp_path / "g.jsonl"
    env = wrap_rewards(_env(tiny_world, export_path=path), ["wcr", "tests.test_wrappers_recording:SearchCost"])
    assert isinstance(env, RecordGames) and not env.unwrapped.records_games
    shown = _play(env, 2)
    env.close()
    assert _exported(path) == shown
    solver = [ev for ev in shown[0] if ev["role"] == "solver"]
    assert solver[0]["components"]["wcr_bonus"] > 0 and solver[0]["components"]["search_cost"] < 0
    assert solver[0]["reward"] == pytest.approx(solver[0]["components"]["wcr_bonus"] - 0.05 * 3)
    assert [ev["role"] for ev in shown[1]][0] == "proposer"  # the rejected question's event, from an earlier step
    (game,) = read_trajectories(path)[:1]
    assert game.solvers[0].reward == pytest.approx(solver[0]["reward"])  # the trajectories carry it too


def test_record_games_over_a_hand_built_stack_with_a_plain_wrapper(tmp_path, tiny_world):
    path = tmp_path / "g.jsonl"
    env = RecordGames(Bonus(WaypointCoverageReward(_env(tiny_world))), path)
    shown = _play(env, 2)
    env.close()
    assert _exported(path) == shown
    assert all("bonus" in ev["components"] for ev in shown[0])
    assert all("wcr_bonus" in ev["components"] for ev in shown[0] if ev["role"] == "solver")


def test_wrap_rewards_moves_a_recorder_on_top_outside_the_rewards(tmp_path, tiny_world):
    path = tmp_path / "g.jsonl"
    env = wrap_rewards(RecordGames(_env(tiny_world), path), "wcr")
    assert isinstance(env, RecordGames) and isinstance(env.env, WaypointCoverageReward)
    shown = _play(env, 1)
    env.close()
    assert _exported(path) == shown and "wcr_bonus" in shown[0][0]["components"]


def test_a_reward_wrapper_refuses_to_go_outside_the_recording(tmp_path, tiny_world):
    with pytest.raises(InvalidArgumentError, match="wrap_rewards"):
        WaypointCoverageReward(_env(tiny_world, export_path=tmp_path / "a.jsonl"))
    with pytest.raises(InvalidArgumentError, match="outermost"):
        WaypointCoverageReward(RecordGames(_env(tiny_world), tmp_path / "b.jsonl"))
    with pytest.raises(InvalidArgumentError, match="one recorder"):
        RecordGames(RecordGames(_env(tiny_world), tmp_path / "c.jsonl"), tmp_path / "d.jsonl")
    with pytest.raises(InvalidArgumentError, match="export_path"):
        RecordGames(_env(tiny_world))


def test_every_clone_of_an_exporting_env_records_its_games(tmp_path, tiny_world):
    path = tmp_path / "g.jsonl"
    first = gym.make("KGSelfPlay-v0", world=tiny_world, pool=[tiny_subgraph()], group_size=2, export_path=path)
    bases = [first.unwrapped] + [first.unwrapped.clone() for _ in range(2)]
    envs = [wrap_rewards(b, "wcr") for b in bases]
    shown = [events for env in envs for events in _play(env, 1)]
    for env in envs:
        env.close()
    assert _exported(path) == shown and len(shown) == 3


def test_an_unwrapped_env_still_writes_its_own_games(tmp_path, tiny_world):
    path = tmp_path / "g.jsonl"
    env = _env(tiny_world, export_path=path)
    assert env.records_games
    shown = _play(env, 2)
    env.close()
    assert _exported(path) == shown


def test_reward_event_terms_and_dict_reads():
    ev = RewardEvent("solver", 1, 0.0, {"outcome": 0.0})
    ev.add_term("wcr_bonus", 0.3, wcr_coverage=1.0)
    assert ev.reward == pytest.approx(0.3) and ev.components == {"outcome": 0.0, "wcr_bonus": 0.3, "wcr_coverage": 1.0}
    assert ev["reward"] == ev.get("reward") == ev.reward and "components" in ev and ev.get("nope", 7) == 7
    assert dict(ev)["slot"] == 1 and RewardEvent.coerce(ev.to_dict()) == ev and RewardEvent.coerce(ev) is not ev
    with pytest.raises(InvalidArgumentError):
        RewardEvent("judge", 0, 1.0)


def test_a_user_wrapper_writing_an_event_by_key_still_works():
    """Wrappers written when events were dicts set ``ev["reward"] = r``: that writes the field; a key that is
    not a field is refused by name (a new dict entry would have been read by nobody)."""
    from searchgym.errors import NotFoundError

    ev = RewardEvent("solver", 0, 1.0)
    ev["reward"] = 0.25
    assert ev.reward == 0.25 and ev.to_dict()["reward"] == 0.25
    with pytest.raises(NotFoundError, match="no field 'bonus'"):
        ev["bonus"] = 1.0
