"""``gymnasium.vector.AsyncVectorEnv`` over searchgym's text envs, with gymnasium's default shared memory
and without it, on a world whose documents and questions are not ASCII: the observations equal the
``SyncVectorEnv``'s (they used to come back as 1,048,576 ``"0"`` characters through shared memory, and a
non-ASCII text crashed ``flatten``). Spawned workers import this module to build their envs."""

from __future__ import annotations

import functools
import pickle

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.spaces.utils import flatten, flatten_space, unflatten

import searchgym  # noqa: F401  (registers the env ids)
from searchgym.core.types import Task
from searchgym.envs.spaces import CODE_POINT_PAD, UnicodeText, text_space
from searchgym.world import WorldBuilder

#: Latin accents, Cyrillic, CJK, an astral-plane emoji and a combining accent.
ANSWER = "Zürich"
QUESTION = "In welcher Stadt wurde Zoë Œrstedt geboren, die 東京 und Москва besuchte? 🚀"


def unicode_world():
    """Two people and two cities, every name and document non-ASCII."""
    b = WorldBuilder("unicode")
    b.add_relation("born_in", "place of birth")
    b.add_entity("E1", "Zoë Œrstedt", description="Chemikerin", type="person")
    b.add_entity("E2", ANSWER, description="Stadt", type="location")
    b.add_entity("E3", "東京", description="都市", type="location")
    b.add_triple("E1", "born_in", "E2")
    b.add_document("D1", "Zoë Œrstedt", "Zoë Œrstedt ist eine Chemikerin, geboren in Zürich. 🚀 Москва.", entity="E1")
    b.add_document("D2", ANSWER, "Zürich liegt an der Limmat; Straße, Größe, naïve café (e\u0301).", entity="E2")
    b.add_document("D3", "東京", "東京は日本の首都です。Zoë Œrstedt besuchte 東京.", entity="E3")
    return b.build()


def make_env(env_id: str):
    """One env over the Unicode world with its one task (what each worker process builds)."""
    kwargs = {"group_size": 2} if env_id == "KGSolverGroup-v0" else {}
    return gym.make(env_id, **env_kwargs(), **kwargs)


def env_kwargs() -> dict:
    """The Unicode world, its one task (the question and gold answer above) and 3 turns."""
    return {"world": unicode_world(), "tasks": [Task(id="u0", question=QUESTION, answers=[ANSWER])], "max_turns": 3}


def script(env_id: str) -> list:
    """Vector actions for 2 envs: env 0 searches twice then answers, env 1 answers at once."""
    turns = [
        ("<search>Zoë Œrstedt 東京</search>", f"<answer>{ANSWER}</answer>"),
        ("<search>Zürich Straße 🚀</search>", "<search>Москва</search>"),
        (f"<answer>{ANSWER}</answer>", f"<answer>{ANSWER}</answer>"),
    ]
    if env_id == "KGSolverGroup-v0":  # per slot, the texts of the 2 envs (gymnasium's batched Tuple)
        return [(pair, pair[::-1]) for pair in turns]
    return turns


def play(vec, env_id: str) -> list:
    """Reset with a seed, then the scripted steps; every (obs, reward, terminated, truncated)."""
    obs, _ = vec.reset(seed=7)
    out = [(obs, None, None, None)]
    for action in script(env_id):
        obs, reward, terminated, truncated, _ = vec.step(action)
        out.append((obs, reward.tolist(), terminated.tolist(), truncated.tolist()))
    vec.close()
    return out


def texts_of(obs) -> list[str]:
    """Every text inside a vector observation (a tuple of texts, or the group env's dict)."""
    if isinstance(obs, dict):
        return [t for slot in obs["texts"] for t in slot]
    return list(obs)


def assert_same(got: list, want: list) -> None:
    """Step by step: equal texts (a plain tuple of ``str`` each, as ``SyncVectorEnv`` gives), flags, rewards."""
    assert len(got) == len(want)
    for (g_obs, *g_rest), (w_obs, *w_rest) in zip(got, want):
        assert g_rest == w_rest  # rewards, terminated, truncated
        if isinstance(w_obs, dict):
            assert g_obs["texts"] == w_obs["texts"] and all(type(t) is tuple for t in g_obs["texts"])
            np.testing.assert_array_equal(g_obs["active"], w_obs["active"])
            np.testing.assert_array_equal(g_obs["role"], w_obs["role"])
        else:
            assert g_obs == w_obs and type(g_obs) is tuple


@pytest.mark.parametrize("env_id", ["KGSolver-v0", "KGSolverGroup-v0"])
def test_async_vector_env_observations_equal_sync_with_and_without_shared_memory(env_id):
    fns = [functools.partial(make_env, env_id)] * 2
    want = play(gym.vector.SyncVectorEnv(fns), env_id)
    seen = "".join(t for obs, *_ in want for t in texts_of(obs))
    assert "Zürich liegt" in seen and "東京は" in seen and "🚀" in seen  # non-ASCII documents came back
    assert any(r > 0 for _, rewards, *_ in want[1:] for r in rewards)  # the answers were judged
    for shared in (True, False):
        vec = gym.vector.AsyncVectorEnv(fns, context="spawn", shared_memory=shared)
        assert_same(play(vec, env_id), want)


def test_async_vector_env_without_copy_hands_out_a_live_view_equal_to_the_texts():
    fns = [functools.partial(make_env, "KGSolver-v0")] * 2
    vec = gym.vector.AsyncVectorEnv(fns, context="spawn", copy=False)
    try:
        first, _ = vec.reset(seed=7)
        prompts = tuple(first)
        assert all(QUESTION in p for p in prompts) and first == prompts
        second, *_ = vec.step(script("KGSolver-v0")[0])
        assert second[0].startswith("\n<information>") and "Œrstedt" in second[0] and second[1] == ""
        assert pickle.loads(pickle.dumps(second)) == tuple(second)  # pickles as the texts themselves
    finally:
        vec.close()


def test_make_vec_async_defaults_equal_sync():
    sync = gym.make_vec("KGSolver-v0", num_envs=2, vectorization_mode="sync", **env_kwargs())
    vec = gym.make_vec("KGSolver-v0", 2, vectorization_mode="async", vector_kwargs={"context": "spawn"}, **env_kwargs())
    assert vec.unwrapped.shared_memory  # gymnasium's default
    assert_same(play(vec, "KGSolver-v0"), play(sync, "KGSolver-v0"))


@pytest.mark.parametrize(
    "text", ["", ANSWER, QUESTION, "e\u0301 \x00 \U0010ffff", "lone \ud800 surrogate", "<search>q</search>"]
)
def test_flatten_round_trips_any_unicode(text):
    space = UnicodeText(128)
    flat = flatten(space, text)
    assert flat.dtype == np.int32 and flat.shape == (128,) and flatten_space(space).contains(flat)
    assert unflatten(space, flat) == text
    assert (flat[len(text) :] == CODE_POINT_PAD).all()
    assert space.contains(text)


def test_flatten_refuses_a_text_longer_than_the_space():
    with pytest.raises(ValueError, match="does not fit"):
        flatten(UnicodeText(4), "Zürich")


def test_sample_is_in_the_space_and_flattens():
    space = text_space(seed=3)
    for _ in range(5):
        s = space.sample()
        assert space.contains(s) and unflatten(space, flatten(space, s)) == s
