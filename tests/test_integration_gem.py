"""searchgym's GEM env, run through the real gem-llm package: ``gem.make`` / ``gem.make_vec`` (sync and async vector
envs) on the ids ``searchgym.integrations.gem`` registers, GEM's ``ObservationWrapper`` with a chat template, and the
rewards checked against searchgym's own Gymnasium env for the same turns. Skipped without the ``gem`` extra."""

from __future__ import annotations

import gymnasium as gym
import pytest

gem = pytest.importorskip("gem", reason="needs the gem extra (pip install -e '.[gem]', then gem-llm --no-deps)")

from gem.utils.constants import TERMINAL_STATE  # noqa: E402
from gem.wrappers.observation_wrapper import ObservationWrapper  # noqa: E402

import searchgym.integrations.gem as sggem  # noqa: E402
from searchgym.errors import InvalidArgumentError  # noqa: E402
from searchgym.llm.tiny_models import build_tokenizer  # noqa: E402
from searchgym.wrappers import WaypointCoverageReward  # noqa: E402


def first_turn(task):
    """Reasoning through the task's waypoints (what WCR rewards), then a search."""
    return f"<think>via {', '.join(task.waypoints)}</think><search>{task.question}</search>"


WRONG = "<answer>surely not this</answer>"


def play(env, task):
    """The first turn, then a wrong answer (WCR's bonus is for wrong answers): the two step results."""
    return [env.step(first_turn(task)), env.step(WRONG)]


def test_registered_ids_play_with_the_envs_reward_and_components():
    assert set(sggem.register_envs()) <= set(gem.envs.registration.ENV_REGISTRY)  # idempotent
    env = gem.make("searchgym:KGSolver-WCR-v0", seed=3)
    obs, info = env.reset()
    task = env.rollout.task
    assert obs == env.rollout.prompt and task.question in obs and info["task_id"] == task.id
    (o1, r1, te1, tr1, i1), (o2, r2, te2, tr2, i2) = play(env, task)
    assert o1.startswith("\n<information>") and r1 == 0.0 and not (te1 or tr1) and i1["use_tool"] is False
    assert o2 == TERMINAL_STATE and te2 and not tr2
    comps = i2["reward_components"]
    assert comps["outcome"] == 0.0 and comps["wcr_bonus"] > 0 and r2 == pytest.approx(comps["wcr_bonus"])
    assert i2["metrics"]["turns"] == 2 and i2["metrics"]["reward"] == r2

    # the same turns in searchgym's own Gymnasium env, wrapped with WCR: the same reward and components
    ref = WaypointCoverageReward(gym.make("KGSolver-v0").unwrapped)
    ref.reset(seed=0, options={"task": task})
    ref.step(first_turn(task))
    *_, rinfo = ref.step(WRONG)
    assert rinfo["rewards"][0]["reward"] == pytest.approx(r2)
    assert rinfo["reward_components"]["wcr_bonus"] == pytest.approx(comps["wcr_bonus"])


def test_seeded_draws_vector_envs_and_spawn():
    a, b = gem.make("searchgym:KGSolver-v0", seed=11), gem.make("searchgym:KGSolver-v0", seed=11)
    draws = [a.reset()[1]["task_id"] for _ in range(4)]
    assert draws == [b.reset()[1]["task_id"] for _ in range(4)]
    assert a.reset(seed=5)[1]["task_id"] == b.reset(seed=5)[1]["task_id"]
    child = a.spawn(same_state=True)
    assert child.reset()[1]["task_id"] == a.reset()[1]["task_id"]

    for async_mode in (False, True):  # GEM's vector envs: env i is made with seed + i
        vec = gem.make_vec(["searchgym:KGSolver-v0"] * 3, seed=0, async_mode=async_mode)
        obs, infos = vec.reset()
        assert len(obs) == 3 and len({o for o in obs}) > 1
        _, rewards, terminated, truncated, _ = vec.step([WRONG] * 3)
        assert list(rewards) == [0.0, 0.0, 0.0] and all(terminated)


def test_gem_observation_wrapper_renders_the_conversation():
    tok = build_tokenizer()
    env = ObservationWrapper(gem.make("searchgym:KGSolver-v0", seed=2), include_chat_template=True, tokenizer=tok)
    obs, _ = env.reset()
    task = env.unwrapped.rollout.task
    assert obs.endswith("<|im_start|>assistant\n") and task.question in obs
    obs, *_ = env.step(f"<search>{task.question}</search>")
    assert obs.count("<|im_start|>user") == 2 and "<information>" in obs and f"<search>{task.question}</search>" in obs


def test_task_sources_function_calling_and_bad_settings():
    base = gem.make("searchgym:KGSolver-v0")
    picked = base.tasks[:2]
    env = gem.make("searchgym:KGSolver-v0", tasks=picked, protocol="function_calling", max_turns=3, seed=1)
    assert {env.reset()[1]["task_id"] for _ in range(6)} <= {t.id for t in picked}
    assert [t["function"]["name"] for t in env.tools()] == ["search", "answer"]
    task = env.rollout.task
    call = {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function"}]}
    call["tool_calls"][0]["function"] = {"name": "search", "arguments": {"query": task.question}}
    obs, reward, terminated, _, info = env.step(call)
    assert info["use_tool"] is True and "Doc 1" in obs and reward == 0.0 and not terminated
    with pytest.raises(InvalidArgumentError, match="give at most one of"):
        gem.make("searchgym:KGSolver-v0", tasks=picked, pool=[])
    with pytest.raises(InvalidArgumentError, match="unknown reward"):
        gem.make("searchgym:KGSolver-v0", rewards="nope")


def test_reward_options_reach_the_wrappers_and_spawned_envs():
    no_credit = {"wcr": {"waypoint_answer_credit": False}}
    env = gem.make("searchgym:KGSolver-WCR-v0", reward_options=no_credit, seed=3)
    env.reset()
    task = env.rollout.task
    # reasoning through the waypoints, then a wrong answer that is one of them: no WCR credit with the option
    turn = f"<think>via {', '.join(task.waypoints)}</think><answer>{task.waypoints[0]}</answer>"
    _, reward, terminated, _, info = env.step(turn)
    assert terminated and reward == 0.0 and info["reward_components"]["wcr_answered_waypoint"] == 1
    assert env.spawn().rollout.env.get_wrapper_attr("waypoint_answer_credit") is False
    assert gem.make("searchgym:KGSolver-WCR-v0").rollout.env.get_wrapper_attr("waypoint_answer_credit") is True
    with pytest.raises(InvalidArgumentError, match="given with no reward stack"):
        gem.make("searchgym:KGSolver-v0", reward_options=no_credit)
