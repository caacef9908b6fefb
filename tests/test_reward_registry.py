"""One reward registry: play, the trainer, its config and verl read the same table; stacks and user wrappers
work everywhere, and a user wrapper that declares step rewards gets SAPO in the trainer."""

from __future__ import annotations

import gymnasium as gym
import pytest

import searchgym.envs  # noqa: F401  (registers the env ids)
from searchgym.core.advantages import group_advantages, sapo_group_advantages
from searchgym.core.types import Task, Trajectory
from searchgym.errors import InvalidArgumentError
from searchgym.training.selfplay_config import TrainConfig
from searchgym.training.selfplay_trainer import Sample, SelfPlayTrainer
from searchgym.wrappers import DynaSearcherReward, GraphDistanceReward, WaypointCoverageReward
from searchgym.wrappers.base import RewardShapingWrapper
from searchgym.wrappers.registry import (
    RewardSpec,
    available_rewards,
    get_reward,
    register_reward,
    reward_plan,
    wrap_rewards,
)


class StepBonus(RewardShapingWrapper):
    """A user's own step-reward wrapper: +0.1 per search, reported per step under its own key."""

    name = "step_bonus"
    advantage = "step"
    step_rewards_key = "bonus_steps"

    def shape_solver_group(self, events, info):  # noqa: D102
        for ev in events:
            steps = [0.1 * len(t.searches) for t in ev["trajectory"].turns] or [0.0]
            self.set_reward(ev, ev["reward"] + sum(steps), bonus_steps=steps)


def test_the_built_in_rewards_and_what_they_declare():
    assert {"binary", "wcr", "gdcr", "dynasearcher"} <= set(available_rewards())
    assert get_reward("binary").factory is None
    gdcr = get_reward("gdcr")
    assert gdcr.factory is GraphDistanceReward and gdcr.advantage == "step" and gdcr.step_rewards_key == "gdcr_steps"
    assert get_reward("wcr").advantage == "outcome" and get_reward("dynasearcher").replaces_reward


def test_stacks_and_user_wrappers_wrap_an_env_in_order():
    env = wrap_rewards(gym.make("KGSolverGroup-v0"), "dynasearcher,wcr")
    assert isinstance(env, WaypointCoverageReward) and isinstance(env.env, DynaSearcherReward)
    plan = reward_plan(f"{__name__}:StepBonus")
    assert plan.advantage == "step" and plan.step_rewards_key == "bonus_steps"
    assert isinstance(plan.wrap(gym.make("KGSolverGroup-v0")), StepBonus)


@pytest.mark.parametrize(
    "bad,error,match",
    [
        ("nope", InvalidArgumentError, "unknown reward 'nope'; choose from .*binary"),
        ("wcr,dynasearcher", InvalidArgumentError, "dynasearcher replaces the reward, so it must come first"),
        ("wcr,wcr", InvalidArgumentError, "listed twice"),
        ("binary,wcr", InvalidArgumentError, "cannot be stacked"),
        (f"gdcr,{__name__}:StepBonus", InvalidArgumentError, "only one reward of a stack may give per-step rewards"),
        ("no.such.module:Thing", InvalidArgumentError, "cannot import the wrapper"),
    ],
)
def test_bad_reward_strings_name_the_fix(bad, error, match):
    with pytest.raises(error, match=match):
        reward_plan(bad)
    with pytest.raises(error, match=match):  # the trainer's config refuses it before any model loads
        TrainConfig(reward=bad)


def test_register_refuses_a_taken_name_and_a_step_reward_without_its_key():
    with pytest.raises(InvalidArgumentError, match="already registered"):
        register_reward(RewardSpec("wcr", WaypointCoverageReward))
    with pytest.raises(InvalidArgumentError, match="step_rewards_key"):
        RewardSpec("mine", StepBonus, advantage="step")


def _traj() -> Trajectory:
    return Trajectory(role="solver", task=Task(id="t", question="q?", answers=["a"]), prompt="p")


@pytest.mark.parametrize("reward,sapo", [("wcr", False), ("gdcr", True), (f"{__name__}:StepBonus", True)])
def test_the_trainer_picks_sapo_from_the_registry_not_from_a_reward_name(reward, sapo):
    """A user's step-reward wrapper gets SAPO (its own component key), an outcome reward gets GRPO."""
    key = reward_plan(reward).step_rewards_key or "unused"
    events = [
        {"role": "solver", "reward": r, "trajectory": _traj(), "components": {key: steps}}
        for r, steps in ((1.0, [0.5, 0.0]), (0.0, [0.0, 0.2]), (1.0, [0.1, 0.1]))
    ]
    trainer = SelfPlayTrainer.__new__(SelfPlayTrainer)  # advantages need only the config and the plan
    trainer.config, trainer.reward_plan = TrainConfig(reward=reward), reward_plan(reward)
    samples = [Sample.from_event(ev, "g", trainer.reward_plan.step_rewards_key) for ev in events]
    tables = trainer.advantages(samples)
    rewards = [ev["reward"] for ev in events]
    if sapo:
        assert tables == [list(t) for t in sapo_group_advantages(rewards, [ev["components"][key] for ev in events])]
        assert any(len(set(t)) > 1 for t in tables)  # per-step values, not one number per rollout
    else:
        assert [t[0] for t in tables] == pytest.approx(group_advantages(rewards, ["g"] * 3))


@pytest.mark.parametrize("reward", ["wcr", "gdcr", "dynasearcher", "dynasearcher,wcr", f"{__name__}:StepBonus"])
def test_a_wrapped_env_spec_round_trips_through_gym_make(reward):
    """Gymnasium 1.x: every wrapper records its constructor arguments, so gym.make(env.spec) rebuilds the stack."""
    env = wrap_rewards(gym.make("KGSolverGroup-v0", max_turns=3), reward)
    if reward == "wcr":
        env = WaypointCoverageReward(gym.make("KGSolverGroup-v0", max_turns=3), alpha=0.2, case_insensitive=True)
    again = gym.make(env.spec)
    chain = lambda e: [type(w) for w in _stack(e)]  # noqa: E731
    assert chain(again) == chain(env)
    assert [w._saved_kwargs for w in _stack(again)] == [w._saved_kwargs for w in _stack(env)]
    assert again.unwrapped.max_turns == 3


def _stack(env):
    out = []
    while isinstance(env, gym.Wrapper):
        if isinstance(env, gym.utils.RecordConstructorArgs) and env.__module__.startswith(("searchgym", __name__)):
            out.append(env)
        env = env.env
    return out


def test_set_wrapper_attr_reaches_the_env_through_a_stack():
    env = wrap_rewards(gym.make("KGSolverGroup-v0"), "dynasearcher,wcr")
    env.set_wrapper_attr("max_turns", 3)
    assert env.unwrapped.max_turns == 3 and env.get_wrapper_attr("max_turns") == 3
    assert env.get_wrapper_attr("alpha") == 0.3  # the outermost wrapper that has it answers (WCR's α)


def test_reward_options_reach_the_wrappers_from_the_config_and_bad_ones_name_the_fix():
    from searchgym.training.selfplay_envs import make_envs

    cfg = TrainConfig(reward="gdcr,wcr", max_turns=2, batch_size=1, group_size=2).with_overrides(
        ["reward_options.wcr.waypoint_answer_credit=false", "reward_options.wcr.alpha=0.5"]
    )
    assert cfg.reward_options == {"wcr": {"waypoint_answer_credit": False, "alpha": 0.5}}
    (env,) = make_envs(cfg, 1)
    wcr = env.get_wrapper_attr("waypoint_answer_credit"), env.get_wrapper_attr("alpha")
    assert wcr == (False, 0.5)
    again = gym.make(env.spec)  # the options are recorded constructor arguments
    assert again.get_wrapper_attr("waypoint_answer_credit") is False
    for options, match in [
        ({"dynasearcher": {}}, "not in the reward stack gdcr,wcr"),
        ({"wcr": {"alpha_": 0.5}}, "has no option alpha_; its options: alpha, "),
        ({"wcr": 0.5}, "must be a mapping"),
        (
            {"wcr": {"waypoint_answer_credit": "nope"}},
            "option waypoint_answer_credit expects true or false, got 'nope'",
        ),
        ({"wcr": {"alpha": True}}, "option alpha expects a number"),
    ]:
        with pytest.raises(InvalidArgumentError, match=match):
            TrainConfig(reward="gdcr,wcr", reward_options=options)
    with pytest.raises(InvalidArgumentError, match="'binary' is the env's own reward and takes no options"):
        reward_plan("binary").check_options({"binary": {"x": 1}})
    with pytest.raises(InvalidArgumentError, match="'eve' has no option x; its options: \\(none\\)"):
        reward_plan("eve").check_options({"eve": {"x": 1}})


# ----------------------------------------------------------------------------- the adapters' EnvSpec
NO_CREDIT = {"wcr": {"waypoint_answer_credit": False}}


def _answer_a_waypoint(env) -> dict:
    """One rollout of ``env`` (a ``KGSolver-v0``) whose reasoning walks every waypoint and whose wrong answer is
    the seed (a waypoint): its reward components."""
    _, info = env.reset(seed=0)
    task = info["task"]
    *_, info = env.step(f"<think>{' '.join(task.waypoints)}</think><answer>{task.waypoints[0]}</answer>")
    return info["reward_components"]


def test_env_spec_reward_options_reach_the_wrapper_and_change_the_reward():
    from searchgym.integrations.environments import EnvSpec, cached_env, make_env

    given = {"wcr": {"waypoint_answer_credit": False}}
    spec = EnvSpec("KGSolver-v0", ("wcr",), reward_options=given)
    given["wcr"]["waypoint_answer_credit"] = True  # the spec keeps its own checked copy
    assert spec.reward_options == NO_CREDIT and type(spec.reward_options["wcr"]) is dict
    env = make_env(spec)
    assert isinstance(env, WaypointCoverageReward) and env.waypoint_answer_credit is False
    off = _answer_a_waypoint(env)
    on = _answer_a_waypoint(make_env(EnvSpec("KGSolver-v0", ("wcr",))))
    assert on["wcr_bonus"] == pytest.approx(0.3) and off["wcr_bonus"] == 0.0 and off["wcr_answered_waypoint"] == 1
    # the options are part of the spec's identity: cached envs with and without them differ
    plain = EnvSpec("KGSolver-v0", ("wcr",))
    assert spec.key() != plain.key() and spec != plain
    assert spec.key() == EnvSpec("KGSolver-v0", ("wcr",), reward_options=NO_CREDIT).key()
    assert cached_env(spec, clone=False) is not cached_env(plain, clone=False)
    assert cached_env(spec).get_wrapper_attr("waypoint_answer_credit") is False


def test_env_spec_from_config_reads_reward_options():
    from searchgym.integrations.environments import EnvSpec

    cfg = {"env_id": "KGSolver-v0", "rewards": "gdcr,wcr", "env_kwargs": {"max_turns": 3}, "reward_options": NO_CREDIT}
    spec = EnvSpec.from_config(cfg)
    assert spec == EnvSpec("KGSolver-v0", ("gdcr", "wcr"), {"max_turns": 3}, reward_options=NO_CREDIT)
    assert EnvSpec.from_config({**cfg, "rewards": list(spec.rewards), "reward_options": spec.reward_options}) == spec
    assert EnvSpec.from_config({"rewards": "wcr"}).reward_options == {}
    with pytest.raises(InvalidArgumentError, match="use env_id, rewards, env_kwargs, reward_options$"):
        EnvSpec.from_config({"reward_option": NO_CREDIT})


@pytest.mark.parametrize(
    "rewards,options,match",
    [
        ((), NO_CREDIT, "given with no reward stack .*add the reward they configure to rewards, e.g. rewards='wcr'"),
        (("binary",), NO_CREDIT, "given with no reward stack"),  # the env's own reward: no wrapper to configure
        (("gdcr",), NO_CREDIT, "reward options for 'wcr', which is not in the reward stack gdcr; drop them or add"),
        (("wcr",), {"wcr": {"credit": False}}, "reward 'wcr' has no option credit; its options: alpha, "),
        (("wcr",), {"wcr": {"alpha": "high"}}, "reward 'wcr' option alpha expects a number, got 'high'"),
        (("wcr",), ["wcr"], "reward options must map a reward name to its keyword arguments"),
    ],
)
def test_env_spec_refuses_bad_reward_options_in_one_line(rewards, options, match):
    from searchgym.integrations.environments import EnvSpec, reward_names

    with pytest.raises(InvalidArgumentError, match=match) as caught:
        EnvSpec("KGSolver-v0", reward_names(rewards), reward_options=options)
    assert "\n" not in str(caught.value)
