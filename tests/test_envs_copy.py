"""Envs as Python objects: every registered env survives pickle and deepcopy mid-episode, the copy
continues exactly like the original for the same actions, and the shared caches (default world,
BM25 index, KG tool, reader) are re-attached, not copied."""

from __future__ import annotations

import copy
import json
import os
import pickle
import re
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

import searchgym  # noqa: F401
from searchgym.agents.scripted import ScriptedSelfPlayAgent
from searchgym.envs.registration import ENV_IDS
from searchgym.envs.solver import KGSolverEnv
from searchgym.tasks.sources import SubgraphTaskSource
from searchgym.world.synthetic import default_world
from tests.support.env_helpers import tiny_subgraph

MULTI = ("KGSolverGroup-v0", "KGSelfPlay-v0")
KWARGS = {"KGNavigate-v0": {"num_tasks": 30}}


def _text_action(obs: str, step: int) -> str:
    """A deterministic policy over the observation: search two of its names, answer every third turn."""
    names = re.findall(r"[A-Z][a-z]{3,}", obs) or ["Raeskania"]
    if step % 3 == 2:
        return f"<think>ok</think><answer>{names[-1]}</answer>"
    return f"<think>look up</think><search>{' '.join(names[-2:])}</search>"


class Driver:
    """Plays ``env`` with a deterministic policy and records what it sees; resets (without a seed,
    so the env's RNG stream continues) whenever an episode ends."""

    def __init__(self, env_id: str) -> None:
        self.env_id = env_id
        self.agent = ScriptedSelfPlayAgent(seed=0) if env_id in MULTI else None
        self.step_no = 0

    def act(self, env, obs, info):
        self.step_no += 1
        if self.env_id == "KGNavigate-v0":
            return [env.unwrapped.search_action, 0, 1, 0, env.unwrapped.answer_action][self.step_no % 5]
        if self.agent is not None:
            return self.agent.act(obs, info)
        return _text_action(obs, self.step_no)

    def run(self, env, obs, info, steps: int) -> list:
        trace = []
        for _ in range(steps):
            obs, reward, term, trunc, info = env.step(self.act(env, obs, info))
            trace.append((_plain(obs), reward, term, trunc, _events(info)))
            if term or trunc:
                obs, info = env.reset()
                trace.append(("reset", _plain(obs)))
        return trace


def _plain(obs):
    if isinstance(obs, dict):
        return int(obs["role"]), tuple(int(a) for a in obs["active"]), tuple(obs["texts"])
    if isinstance(obs, np.ndarray):
        return obs.tobytes()
    return obs


def _events(info):
    return (
        [(e["role"], e["slot"], e["reward"], sorted(e["components"].items())) for e in info.get("rewards", [])]
        if "rewards" in info
        else [info["success"], info["node"]]
    )


def _started(env_id):
    """A registered env (defaults: the default world and its caches) a few steps into a game."""
    env = gym.make(env_id, **KWARGS.get(env_id, {}))
    obs, info = env.reset(seed=3)
    driver = Driver(env_id)
    for _ in range(2):
        obs, _, term, trunc, info = env.step(driver.act(env, obs, info))
        if term or trunc:
            obs, info = env.reset()
    return env, driver, obs, info


def _shared(env):
    u = env.unwrapped
    return [u.world] + ([u._retriever] if hasattr(u, "_retriever") else [u.retriever, u.judge])


@pytest.mark.parametrize("env_id", list(ENV_IDS))
@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_copy_continues_exactly_like_the_original(env_id, how):
    env, driver, obs, info = _started(env_id)
    # obs/info hold the live trajectories: copy them with the env, as a snapshot would
    state = (env, driver, obs, info)
    twin, twin_driver, twin_obs, twin_info = (
        copy.deepcopy(state) if how == "deepcopy" else pickle.loads(pickle.dumps(state))
    )
    assert twin.unwrapped is not env.unwrapped
    assert twin.unwrapped.world is env.unwrapped.world is default_world()  # re-attached, not copied
    if env_id != "KGNavigate-v0":
        assert twin.unwrapped.retriever is env.unwrapped.retriever  # the cached BM25 index
    steps = 24  # enough to cross a game boundary: a self-play game over a 7-hop path takes up to 16 steps
    expected = driver.run(env, obs, info, steps)
    assert twin_driver.run(twin, twin_obs, twin_info, steps) == expected
    assert any(step[0] == "reset" for step in expected) or env_id == "KGNavigate-v0"


def test_deepcopy_shares_user_resources_and_pickle_copies_them(tiny_world):
    env = KGSolverEnv(tiny_world, SubgraphTaskSource([tiny_subgraph()], tiny_world), max_turns=3)
    env.reset(seed=0)
    twin = copy.deepcopy(env)
    assert twin.world is tiny_world and twin.retriever is env.retriever and twin.tasks is env.tasks
    assert twin.rollout is not env.rollout and twin._rng is not env._rng
    loaded = pickle.loads(pickle.dumps(env))  # a world built by hand has no cache: pickled by value
    assert loaded.world is not tiny_world and loaded.world.num_entities == tiny_world.num_entities
    assert loaded.world.find_entities("Merovia") and loaded.retriever.search("Merovia")
    for e in (env, twin, loaded):
        assert e.step("<answer>Ostrel</answer>")[1] == 1.0


def test_export_writer_is_shared_by_a_deepcopy_and_reopened_by_pickle(tiny_world, tmp_path):
    from searchgym.envs.export import read_trajectories

    env = KGSolverEnv(tiny_world, SubgraphTaskSource([tiny_subgraph()], tiny_world), export_path=tmp_path / "g.jsonl")
    env.reset(seed=0)
    twin, loaded = copy.deepcopy(env), pickle.loads(pickle.dumps(env))
    assert twin.writer is env.writer and loaded.writer is not env.writer
    for e in (env, twin, loaded):
        e.step("<answer>Ostrel</answer>")
    for e in (env, twin, loaded):  # the twin's writer is env's: closing either closes it (idempotent)
        e.close()
    assert len(read_trajectories(tmp_path / "g.jsonl")) == 3


CHILD = """
import json, pickle, sys
sys.path.insert(0, sys.argv[1])
from tests.test_envs_copy import Driver
env, driver, obs, info = pickle.load(sys.stdin.buffer)
print(json.dumps(driver.run(env, obs, info, 8), default=repr))
"""


def test_pickled_env_continues_in_a_fresh_process():
    """In a fresh process the default world and its index are rebuilt by their caches (same seed):
    the unpickled game continues exactly as here."""
    env, driver, obs, info = _started("KGSelfPlay-v0")
    blob = pickle.dumps((env, driver, obs, info))
    expected = json.loads(json.dumps(driver.run(env, obs, info, 8), default=repr))
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, root],
        input=blob,
        capture_output=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([root, *sys.path])},
    )
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    assert json.loads(proc.stdout) == expected
