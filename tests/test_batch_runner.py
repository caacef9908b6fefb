"""The one lock-step batch runner: batched agent turns, refilling free envs, typed records in report order, the
batch's shared state passed in reset options (never assigned to an env), and play_games on top of it."""

from __future__ import annotations

import gymnasium as gym
import pytest

import searchgym  # noqa: F401
from searchgym.agents.scripted import PathFollowingSolver, ScriptedSelfPlayAgent
from searchgym.envs.proposer import BatchNoise
from searchgym.envs.replay import ReplayBuffer
from searchgym.errors import InvalidArgumentError, InvalidTypeError, SearchGymRuntimeError
from searchgym.evaluation.batch_runner import BatchRunner, EpisodeStart, batch_actor
from searchgym.evaluation.games import play_games


class CountdownEnv(gym.Env):
    """An episode of ``options["length"]`` steps (default 2); each step reports one reward event naming it."""

    observation_space = gym.spaces.Discrete(100)
    action_space = gym.spaces.Discrete(100)

    def __init__(self, name: str = "env") -> None:
        self.name = name
        self.resets: list = []
        self.left = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.resets.append((seed, options))
        self.left = (options or {}).get("length", 2)
        self.episode = (options or {}).get("id")
        return self.left, {"episode": self.episode}

    def step(self, action):
        self.left -= 1
        done = self.left <= 0
        event = {"episode": self.episode, "action": action, "left": self.left}
        return self.left, float(done), done, False, {"episode": self.episode, "rewards": [event]}


class BatchAgent:
    """Records every batched call; the action is the number of turns in that call."""

    def __init__(self) -> None:
        self.calls: list[list] = []

    def act_batch(self, turns):
        self.calls.append([info["episode"] for _, info in turns])
        return [len(turns)] * len(turns)


def _starts(lengths):
    return [EpisodeStart(key=f"e{i}", seed=i, options={"length": n, "id": f"e{i}"}) for i, n in enumerate(lengths)]


def test_every_pending_turn_goes_to_the_agent_in_one_call_and_a_free_env_takes_the_next_episode():
    envs = [CountdownEnv("a"), CountdownEnv("b")]
    agent = BatchAgent()
    result = BatchRunner(envs).play(agent, _starts([1, 3, 2]))
    # e0 ends after one turn, so env a takes e2 while env b still plays e1
    assert agent.calls == [["e0", "e1"], ["e2", "e1"], ["e2", "e1"]]
    assert [(e.key, e.env_index, e.steps) for e in result.episodes] == [("e0", 0, 1), ("e2", 0, 2), ("e1", 1, 3)]
    assert [s for s, _ in envs[0].resets] == [0, 2] and [s for s, _ in envs[1].resets] == [1]
    assert all(e.reward == 1.0 for e in result.episodes)
    # events in the order the envs reported them, each with its episode's key
    assert [(r.key, r.event["left"]) for r in result.events] == [
        ("e0", 0),
        ("e1", 2),
        ("e2", 1),
        ("e1", 1),
        ("e2", 0),
        ("e1", 0),
    ]
    assert result.episodes[2].events == [r.event for r in result.events if r.key == "e1"]
    assert result.agent_s >= 0 and result.env_s > 0


def test_starts_are_read_lazily_and_finished_episodes_are_handed_on_after_each_turn():
    taken: list[int] = []

    def starts():
        for i in range(3):
            taken.append(i)
            yield EpisodeStart(key=i, options={"length": 1, "id": i})

    seen: list = []

    def on_finished(episodes):
        seen.append(([e.key for e in episodes], list(taken)))

    result = BatchRunner([CountdownEnv()]).play(BatchAgent(), starts(), on_finished=on_finished, keep=False)
    assert seen == [([0], [0]), ([1], [0, 1]), ([2], [0, 1, 2])]  # the next start is drawn only when an env is free
    assert result.episodes == [] and len(result.events) == 3


def test_an_agent_with_only_act_is_asked_once_per_turn():
    class OneAtATime:
        def __init__(self):
            self.calls = 0

        def act(self, obs, info):
            self.calls += 1
            return 0

    agent = OneAtATime()
    BatchRunner([CountdownEnv(), CountdownEnv()]).play(agent, _starts([2, 2]))
    assert agent.calls == 4
    with pytest.raises(InvalidArgumentError, match="act_batch"):
        batch_actor(object())


def test_an_episode_that_never_ends_is_refused_naming_it():
    with pytest.raises(SearchGymRuntimeError, match="episode 'e0' did not end after 5 steps"):
        BatchRunner([CountdownEnv()], max_steps=5).play(BatchAgent(), _starts([100]))


def test_without_shared_state_the_reset_options_pass_through_unchanged():
    env = CountdownEnv()
    runner = BatchRunner([env])
    assert runner.replay is None and runner.batch_noise is None
    runner.play(BatchAgent(), [EpisodeStart(seed=3, options=None), EpisodeStart(options={"length": 1})])
    assert env.resets == [(3, None), (None, {"length": 1})]


def test_the_batch_state_reaches_self_play_clones_through_their_reset_options_only():
    first = gym.make("KGSelfPlay-v0", group_size=2, max_turns=4)
    envs = [first, first.unwrapped.clone()]
    own = [e.unwrapped.replay for e in envs]
    runner = BatchRunner(envs, share_batch_state=True)
    assert isinstance(runner.replay, ReplayBuffer) and runner.replay.reset_every is None
    assert isinstance(runner.batch_noise, BatchNoise)
    assert [e.unwrapped.replay for e in envs] == own  # building the runner writes nothing into the envs
    assert runner.reset_options(0, {"index": 3}) == {
        "index": 3,
        "replay": runner.replay,
        "batch_noise": runner.batch_noise,
    }
    runner.begin_batch()
    starts = [EpisodeStart(key=g, seed=g, options={"index": g}) for g in range(4)]
    result = runner.play(ScriptedSelfPlayAgent(), starts)
    assert len(result.episodes) == 4
    for env in envs:
        base = env.unwrapped
        assert base.replay is runner.replay and base.validation.batch is runner.batch_noise
        assert len(base.own_replay) == 0
    assert len(runner.batch_noise) == 4  # every Proposer rollout of the batch registered
    valid = [e for e in result.episodes if (e.info.get("validation") or {}).get("valid")]
    assert len(runner.replay) == len(valid)
    assert runner.clear_replay() and len(runner.replay) == 0 and runner.replay.resets == 1
    # a reset without the options goes back to the env's own buffer and noise window
    envs[0].reset(seed=0)
    assert envs[0].unwrapped.replay is own[0] and envs[0].unwrapped.validation.batch is None


def test_a_shared_state_option_of_the_wrong_type_is_refused():
    env = gym.make("KGSelfPlay-v0", group_size=2)
    with pytest.raises(InvalidTypeError, match="ReplayBuffer"):
        env.reset(seed=0, options={"replay": []})
    with pytest.raises(InvalidTypeError, match="BatchNoise"):
        gym.make("KGProposer-v0").reset(seed=0, options={"batch_noise": "noise"})


def test_the_runner_state_round_trips():
    first = gym.make("KGSelfPlay-v0", group_size=2, max_turns=4)
    runner = BatchRunner([first], share_batch_state=True)
    runner.play(ScriptedSelfPlayAgent(), [EpisodeStart(key=g, seed=g) for g in range(3)])
    twin = BatchRunner([gym.make("KGSelfPlay-v0", group_size=2, max_turns=4)], share_batch_state=True)
    twin.load_state_dict(runner.state_dict())
    assert twin.state_dict() == runner.state_dict()


def test_play_games_reports_each_game_as_it_ends_and_stops_when_asked():
    env = gym.make("KGSolver-v0", max_turns=3)
    played = []
    summaries = play_games(
        env,
        PathFollowingSolver(),
        5,
        seed=10,
        seed_each_game=True,
        first_game=2,
        on_game=played.append,
        until=lambda game: game.game == 3,
    )
    assert [g.game for g in played] == [2, 3] and [s["game"] for s in summaries] == [2, 3]
    assert all(g.summary is s for g, s in zip(played, summaries))
    assert all(g.events and g.seconds >= 0 for g in played)
    # game g was reset with seed + g: replaying game 3 alone gives the same question
    (again,) = play_games(gym.make("KGSolver-v0", max_turns=3), PathFollowingSolver(), 1, seed=13)
    assert again["question"] == summaries[1]["question"]


class CountingBatches:
    """``act_batch`` over a per-turn agent, recording how many turns each call carried."""

    def __init__(self, agent) -> None:
        self.agent, self.sizes = agent, []

    def act_batch(self, turns):
        self.sizes.append(len(turns))
        return [self.agent.act(obs, info) for obs, info in turns]


def test_play_games_on_clones_plays_them_at_once_and_each_game_is_the_one_its_seed_names():
    agent = CountingBatches(PathFollowingSolver())
    clones = [gym.make("KGSolver-v0", max_turns=3) for _ in range(3)]
    played = []
    summaries = play_games(clones, agent, 3, seed=20, seed_each_game=True, on_game=played.append)
    assert sorted(g.game for g in played) == [0, 1, 2] and len(summaries) == 3
    assert agent.sizes[0] == 3  # the three games' first turns went to the agent in one call
    for game in played:  # the same game as played alone on one env with its seed
        (alone,) = play_games(gym.make("KGSolver-v0", max_turns=3), PathFollowingSolver(), 1, seed=20 + game.game)
        assert alone["question"] == game.summary["question"]
    # without seed_each_game clone j starts from seed + j: distinct games, not three copies of one
    firsts = play_games([gym.make("KGSolver-v0", max_turns=3) for _ in range(3)], PathFollowingSolver(), 3, seed=20)
    assert sorted(s["question"] for s in firsts) == sorted(s["question"] for s in summaries)


def test_play_games_on_self_play_clones_shares_the_batch_state_when_asked_and_stops_starting_games():
    clones = [gym.make("KGSelfPlay-v0") for _ in range(2)]
    played = []
    play_games(
        clones,
        ScriptedSelfPlayAgent(),
        6,
        seed=4,
        seed_each_game=True,
        on_game=played.append,
        until=lambda game: True,  # the first game to end stops new starts; the other one under way finishes
        share_batch_state=True,
    )
    assert sorted(g.game for g in played) == [0, 1]
    first, second = (c.unwrapped for c in clones)
    assert first.replay is second.replay and first.validation.batch is second.validation.batch is not None
    with pytest.raises(InvalidArgumentError, match="non-empty list"):
        play_games([], ScriptedSelfPlayAgent(), 1)
