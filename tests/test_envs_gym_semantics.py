"""Gymnasium semantics shared by the text envs: terminated vs truncated when the group ends, and
render metadata."""

from __future__ import annotations

import warnings

import gymnasium as gym
import pytest

import searchgym  # noqa: F401
from searchgym.envs.group import KGSolverGroupEnv
from searchgym.envs.registration import ENV_IDS
from searchgym.envs.selfplay import KGSelfPlayEnv
from searchgym.tasks.sources import SubgraphTaskSource
from tests.support.env_helpers import AcceptAll, tiny_subgraph

TEXT_ENV_IDS = [e for e in ENV_IDS if e != "KGNavigate-v0"]


def _group(world):
    return KGSolverGroupEnv(world, SubgraphTaskSource([tiny_subgraph()], world), group_size=3, max_turns=1)


def _selfplay(world):
    env = KGSelfPlayEnv(world, pool=[tiny_subgraph()], group_size=3, max_turns=1, verifier=AcceptAll())
    env.reset(seed=0)
    obs, _, term, trunc, _ = env.step(("no question here", "", ""))  # the Proposer runs out of its one turn
    assert obs["role"] == 1 and not (term or trunc)  # the Solvers now play a fallback task
    return env


def _last_step(env, texts):
    if isinstance(env, KGSolverGroupEnv):
        env.reset(seed=0)
    return env.step(tuple(texts))


@pytest.mark.parametrize(
    "texts, flags",
    [
        (["thinking", "still thinking", "hmm"], (False, True)),  # every Solver ran out of turns: the time limit
        (["<answer>Ostrel</answer>", "hmm", "hmm"], (True, False)),
    ],  # one Solver answered
    ids=["all_out_of_turns", "one_answered"],
)
def test_group_and_selfplay_agree_on_terminated_and_truncated(tiny_world, texts, flags):
    for env in (_group(tiny_world), _selfplay(tiny_world)):
        _, reward, term, trunc, info = _last_step(env, texts)
        assert (term, trunc) == flags, type(env).__name__
        assert len([e for e in info["rewards"] if e["role"] == "solver"]) == 3  # the game is scored either way
        with pytest.raises(RuntimeError, match="ended"):
            env.step(("", "", ""))


@pytest.mark.parametrize("env_id", TEXT_ENV_IDS + ["KGNavigate-v0"])
def test_envs_declare_render_fps(env_id):
    cls = gym.spec(env_id).entry_point
    env = gym.make(env_id, render_mode="ansi", **({"num_tasks": 20} if env_id == "KGNavigate-v0" else {}))
    assert isinstance(env.metadata.get("render_fps"), int), cls
    env.reset(seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # gymnasium's passive checker warns "No render fps was declared"
        assert isinstance(env.render(), str)
    env.close()
