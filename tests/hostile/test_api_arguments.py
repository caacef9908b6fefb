"""Hostile arguments to the Python API (``gym.make``, the reward wrappers, retrievers, world builders, task sources,
scripted agents) are refused when the object is built, in one line naming the argument.

Each value here was once accepted (NaN passes every ``x < 1`` test, ``True`` is an int, ``2.5`` slips past a
``< 1`` check, a string ``"false"`` is truthy) or failed only later with a traceback from deep inside
``step()``/``reset()`` -- a NaN turn limit that never ends an episode, a ``group_size`` of ``10**30`` that hangs
building the observation space, a pool ``concurrency`` of NaN that spins forever, a ``pool_hops`` no path has
that divides by zero at ``reset``. The checks are :mod:`searchgym.core.arg_checks`.
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest

from searchgym.core.arg_checks import check_choice, check_count, check_counts, check_number
from searchgym.errors import InvalidArgumentError, InvalidTypeError, SearchGymError

NAN, INF = math.nan, math.inf
HUGE = 10**30


def _refused(build, name: str, *, kind: type = InvalidArgumentError) -> str:
    """Call ``build()``; assert it raises ``kind`` in one line naming ``name``; return the message."""
    with pytest.raises(SearchGymError) as caught:
        build()
    message = str(caught.value)
    assert isinstance(caught.value, kind), f"{type(caught.value).__name__}: {message}"
    assert name in message, message
    assert "\n" not in message, message
    return message


# ----------------------------------------------------------------- the checks themselves
def test_the_checks_return_what_they_accept():
    assert check_count("n", np.int64(3)) == 3 and type(check_count("n", np.int64(3))) is int
    assert check_count("n", None, optional=True) is None
    assert check_number("x", 2) == 2 and check_number("x", 0.5, above=0, most=1) == 0.5
    assert check_counts("hops", (2, 1)) == (2, 1)
    assert check_choice("order", "given", ("curriculum", "given")) == "given"


@pytest.mark.parametrize(
    "check, words",
    [
        (lambda: check_count("n", True), "n must be an int >= 1, got True"),
        (lambda: check_count("n", 2.5), "n must be an int >= 1, got 2.5"),
        (lambda: check_count("n", 0), "n must be >= 1, got 0"),
        (lambda: check_count("n", 9, most=8), "n must be at most 8, got 9"),
        (lambda: check_number("x", NAN, least=0), "x must be a finite number >= 0, got nan"),
        (lambda: check_number("x", "0.5"), "x must be a finite number, got '0.5'"),
        (lambda: check_number("x", 1, above=0, below=1), "x must be > 0 and < 1, got 1"),
        (lambda: check_counts("hops", "2"), "hops must be a list of ints like [1, 2], got '2'"),
        (
            lambda: check_choice("mode", "Raw", ("raw", "group")),
            "mode must be one of raw, group, got 'Raw'; did you mean raw?",
        ),
        (lambda: check_choice("mode", 1, (True, False)), "mode must be one of True, False, got 1"),
    ],
)
def test_the_checks_say_what_is_wanted(check, words):
    with pytest.raises(InvalidArgumentError) as caught:
        check()
    assert str(caught.value) == words


# ----------------------------------------------------------------- gym.make
ENV_CASES = [
    *[("KGSolver-v0", "max_turns", v) for v in (NAN, INF, 2.5, True, "3", None)],
    *[("KGSolver-v0", "top_k", v) for v in (NAN, 2.5, True, "3", None)],
    *[("KGSolver-v0", "doc_max_chars", v) for v in (0, -1, NAN, INF, 2.5, True, "3")],
    *[("KGSolver-v0", "max_action_chars", v) for v in (0, -1, NAN, 2.5, True, None)],
    ("KGSolver-v0", "proposer_evidence", "yes"),
    ("KGSolver-v0", "too_many_answers", "sp"),
    *[("KGSolver-v0", "pool_hops", v) for v in ([2.5], "2", [True], 3, [NAN], [HUGE])],
    *[("KGProposer-v0", "max_turns", v) for v in (NAN, 2.5)],
    *[("KGProposer-v0", "n_noise", v) for v in (NAN, INF, 2.5, True, "3")],
    *[("KGProposer-v0", "noise_window", v) for v in (NAN, 2.5, True, "3", HUGE)],
    ("KGProposer-v0", "mode", "kgg"),
    *[("KGSolverGroup-v0", "group_size", v) for v in (NAN, 2.5, True, "3", None, HUGE)],
    *[("KGSolverGroup-v0", "max_turns", v) for v in (NAN, INF)],
    *[("KGSelfPlay-v0", "group_size", v) for v in (NAN, True, HUGE)],
    *[("KGSelfPlay-v0", "replay_capacity", v) for v in (NAN, 2.5, True, "3", HUGE)],
    *[("KGSelfPlay-v0", "replay_reset_every", v) for v in (NAN, 2.5, True, "3")],
    *[("KGSelfPlay-v0", "pool_seed", v) for v in (NAN, 2.5, "3", None)],
    *[("KGSelfPlay-v0", "n_noise", v) for v in (NAN, 2.5)],
    ("KGSelfPlay-v0", "pool_hops", [HUGE]),  # an empty pool: was a ZeroDivisionError at reset
    ("KGSelfPlay-v0", "proposer_mode", "Kg"),
    ("KGSelfPlay-v0", "solver_only_hops", 3),
    *[("KGNavigate-v0", "max_steps", v) for v in (-1, 0, NAN, INF, 2.5, True)],
    *[("KGNavigate-v0", "max_hops", v) for v in (0, NAN, INF)],
    *[("KGNavigate-v0", "step_cost", v) for v in (NAN, INF, True, "0.5", None)],
    *[("KGNavigate-v0", "progress_reward", v) for v in (NAN, INF, True)],
    *[("KGNavigate-v0", "max_candidates", v) for v in (NAN, 2.5, True, "3", HUGE)],
    *[("KGNavigate-v0", "task_seed", v) for v in (-1, NAN, 2.5, "3", None)],
    *[("KGNavigate-v0", "num_tasks", v) for v in (True, 2.5)],
    ("KGNavigate-v0", "inverse_edges", "yes"),
    ("KGNavigate-v0", "candidate_order", "relevence"),
]


@pytest.mark.parametrize("env_id, name, value", ENV_CASES, ids=[f"{e}-{n}={v!r}" for e, n, v in ENV_CASES])
def test_gym_make_refuses_a_bad_argument_when_the_env_is_built(tiny_world, env_id, name, value):
    message = _refused(lambda: gym.make(env_id, world=tiny_world, **{name: value}), name)
    assert "was raised from the environment creator" not in message  # not a TypeError gymnasium rewrote


def test_a_close_enum_typo_is_named_with_the_value_meant(tiny_world):
    message = _refused(lambda: gym.make("KGNavigate-v0", world=tiny_world, candidate_order="relevence"), "relevance")
    assert "did you mean relevance?" in message


def test_good_values_of_other_int_types_still_build(tiny_world):
    env = gym.make("KGSolver-v0", world=tiny_world, max_turns=np.int64(3), top_k=np.int32(2), doc_max_chars=None)
    env.reset(seed=0)
    assert env.unwrapped.max_turns == 3 and env.unwrapped.engine.top_k == 2
    nav = gym.make("KGNavigate-v0", world=tiny_world, max_steps=5, step_cost=0, progress_reward=1)
    nav.reset(seed=0)
    assert nav.unwrapped.max_steps == 5


# ----------------------------------------------------------------- reward wrappers
@pytest.fixture
def group_env(tiny_world):
    return gym.make("KGSolverGroup-v0", world=tiny_world, group_size=2)


class _Answerer:
    def __call__(self, question, evidence=None):
        return "Tarsk"


def _wrapper_cases():
    from searchgym import wrappers as w

    cases = [
        *[(w.WaypointCoverageReward, "alpha", v) for v in (True, "0.3", None)],
        (w.WaypointCoverageReward, "case_insensitive", "yes"),
        (w.WaypointCoverageReward, "match_aliases", 1),
        (w.WaypointCoverageReward, "lone_normalisation", "Raw"),
        *[(w.GraphDistanceReward, "k", v) for v in (NAN, INF, True, "2")],
        *[(w.GraphDistanceReward, "weight", v) for v in (NAN, INF, "3", None)],
        *[(w.DynaSearcherReward, "alpha", v) for v in (NAN, INF, -1, True, "0.5")],
        *[(w.DynaSearcherReward, "beta", v) for v in (NAN, -INF)],
        *[(w.DynaSearcherReward, "n", v) for v in (NAN, 0, "3")],
        (w.DynaSearcherReward, "gamma", "0.9"),
    ]
    for cls in (w.ExtraSearchDiscount, w.ShortSearchDiscount):
        cases += [(cls, "alpha", v) for v in ("0.5", None, True)] + [(cls, "gamma", v) for v in (None, "0.9")]
    return cases


WRAPPER_CASES = _wrapper_cases()


@pytest.mark.parametrize(
    "wrapper, name, value", WRAPPER_CASES, ids=[f"{c.__name__}-{n}={v!r}" for c, n, v in WRAPPER_CASES]
)
def test_a_reward_wrapper_refuses_a_bad_argument(group_env, wrapper, name, value):
    _refused(lambda: wrapper(group_env, **{name: value}), name)


EVE_CASES = [
    *[("m", v) for v in (NAN, 2.5, True, "3", None)],
    *[("max_evidence_tokens", v) for v in (NAN, 2.5, True, None)],
    *[("hops", v) for v in (NAN, INF, 0, 2.5, "3")],
    *[(lam, NAN) for lam in ("lambda_v", "lambda_b", "lambda_e")],
    ("lambda_b", "0.1"),
    ("seed", 2.5),
]


@pytest.mark.parametrize("name, value", EVE_CASES, ids=[f"{n}={v!r}" for n, v in EVE_CASES])
def test_the_evidence_verifier_refuses_a_bad_argument(group_env, name, value):
    from searchgym.wrappers import EvidenceVerifierReward

    _refused(lambda: EvidenceVerifierReward(group_env, _Answerer(), **{name: value}), name)


@pytest.mark.parametrize("reward", [None, 3, ["wcr", 3]])
def test_wrap_rewards_refuses_what_is_no_reward_name(group_env, reward):
    from searchgym.wrappers import wrap_rewards

    _refused(lambda: wrap_rewards(group_env, reward), "reward")


def test_record_games_refuses_an_export_path_that_is_no_path(group_env):
    from searchgym.wrappers import RecordGames

    _refused(lambda: RecordGames(group_env, 3), "export_path")


@pytest.mark.parametrize(
    "name, value", [("games_per_batch", v) for v in (NAN, 2.5, True)] + [("bins", "abc"), ("bins", [0, NAN, 1])]
)
def test_compute_diagnostics_refuses_a_bad_argument(name, value):
    from searchgym.wrappers import compute_diagnostics

    _refused(lambda: compute_diagnostics([], **{name: value}), name)


# ----------------------------------------------------------------- retrieval, worlds, pools, tasks, agents
# each case: (what is built, the argument, the bad value, build(world, value)); the message must name the argument
URL = "http://127.0.0.1:9"


def _docs(world):
    return world.doc_ids, world.doc_titles, world.doc_texts


def _remote(**kw):
    from searchgym.retrieval.client import RemoteRetriever

    return RemoteRetriever(URL, **kw)


def _bm25(world, **kw):
    from searchgym.retrieval.bm25 import BM25Retriever

    return BM25Retriever(*_docs(world), **kw)


def _kg(world, **kw):
    from searchgym.retrieval.kg import KGLookup

    return KGLookup(world, **kw)


def _pool(world, n=3, **kw):
    from searchgym.construction import build_pool

    return build_pool(world, n, progress=False, **kw)


def _cases(what, name, values, build, *, words=None):
    """One case per value: ``build(world, value)`` must be refused in a message holding ``words`` (default the
    argument's name)."""
    return [(what, name, v, build, words or name) for v in values]


def _heldout(fn):
    from searchgym.tasks import heldout

    return getattr(heldout, fn)


def _tasksets(fn):
    from searchgym.tasks import tasksets

    return getattr(tasksets, fn)


def _synthetic(**kw):
    from searchgym.world.synthetic_config import SyntheticConfig

    return SyntheticConfig(**kw).validate()


def _agent(cls):
    from searchgym.agents import eval_agents, llm_agent, scripted
    from searchgym.envs import replay

    for module in (scripted, llm_agent, eval_agents, replay):
        if hasattr(module, cls):
            return getattr(module, cls)
    raise AssertionError(cls)


def _remote_at(url):
    from searchgym.retrieval.client import RemoteRetriever

    return RemoteRetriever(url)


def _replicated(**kw):
    from searchgym.retrieval.replicas import ReplicatedRetriever

    return ReplicatedRetriever(f"{URL},{URL}0", **kw)


def _split(world, sentences):
    from searchgym.retrieval.passages import split_passages

    return split_passages(*_docs(world), sentences=sentences)


def _default_world(seed):
    from searchgym.world.synthetic import default_world

    return default_world(seed)


def _for_entities(n):
    from searchgym.world.synthetic_config import SyntheticConfig

    return SyntheticConfig.for_entities(n)


def _atlas(**kw):
    from searchgym.world.atlas import build_atlas

    return build_atlas(**kw)  # refused before any data package is read


BUILD_CASES = [
    # retrieval
    *_cases("RemoteRetriever", "timeout", (NAN, INF, 1e30, True, "3", 0), lambda w, v: _remote(timeout=v)),
    *_cases("RemoteRetriever", "retries", (NAN, 2.5, True, -1), lambda w, v: _remote(retries=v)),
    *_cases("RemoteRetriever", "backoff", (NAN, INF, None), lambda w, v: _remote(backoff=v)),
    *_cases("RemoteRetriever", "batch_size", (NAN, 2.5, True, 0), lambda w, v: _remote(batch_size=v)),
    *_cases("RemoteRetriever", "url", (None, 3), lambda w, v: _remote_at(v), words="URL"),
    *_cases("ReplicatedRetriever", "timeout", (NAN,), lambda w, v: _replicated(timeout=v)),
    *_cases("BM25Retriever", "k1", (True, "1.5", None), lambda w, v: _bm25(w, k1=v)),
    *_cases("BM25Retriever", "b", (True,), lambda w, v: _bm25(w, b=v), words="b=True"),
    *_cases("BM25Retriever", "threads", (NAN, INF, 2.5, True), lambda w, v: _bm25(w, threads=v)),
    *_cases("BM25Retriever", "stemmer", (3,), lambda w, v: _bm25(w, stemmer=v)),
    *_cases("BM25Retriever", "stopwords", (3, "xx", ["the", 3]), lambda w, v: _bm25(w, stopwords=v)),
    *_cases("KGLookup", "fuzzy_cutoff", (True, "0.5", None), lambda w, v: _kg(w, fuzzy_cutoff=v)),
    *_cases("KGLookup", "max_matches", (NAN, 2.5, True), lambda w, v: _kg(w, max_matches=v)),
    *_cases("KGLookup", "max_scan", (NAN, INF, 2.5, True), lambda w, v: _kg(w, max_scan=v)),
    *_cases("split_passages", "sentences", (NAN, 2.5, True, "3"), lambda w, v: _split(w, v)),
    # worlds
    *_cases("default_world", "seed", (2.5, "3", None, NAN, True), lambda w, v: _default_world(v)),
    *_cases("SyntheticConfig", "num_people", (True,), lambda w, v: _synthetic(num_people=v)),
    *_cases("SyntheticConfig", "num_people", (HUGE,), lambda w, v: _synthetic(num_people=v), words="entities"),
    *_cases("SyntheticConfig", "namesake_rate", ("0.1", None, True), lambda w, v: _synthetic(namesake_rate=v)),
    *_cases("SyntheticConfig", "filler_sentences", ((2.5, 3), "ab"), lambda w, v: _synthetic(filler_sentences=v)),
    *_cases("SyntheticConfig.for_entities", "n", ("3", None, 2500.0), lambda w, v: _for_entities(v), words="entities"),
    *_cases("build_atlas", "max_cities", (True, -1), lambda w, v: _atlas(max_cities=v)),
    *_cases("build_atlas", "seed", (NAN, "3"), lambda w, v: _atlas(seed=v)),
    # pools and tasks
    *_cases("build_pool", "concurrency", (NAN, 2.5, True), lambda w, v: _pool(w, concurrency=v)),  # NaN: a hang
    *_cases("build_pool", "seed", (NAN, -1, 2.5, "3", None), lambda w, v: _pool(w, seed=v)),
    *_cases("build_pool", "max_attempts", (NAN, -1, 2.5), lambda w, v: _pool(w, max_attempts=v)),
    *_cases(
        "build_pool", "abort_after_selector_failures", (NAN, -1), lambda w, v: _pool(w, abort_after_selector_failures=v)
    ),
    *_cases("build_pool", "n", (True, 2.5), lambda w, v: _pool(w, v), words="n must"),
    *_cases(
        "training_subgraphs",
        "n",
        (NAN, INF, 2.5, True, "3", None),
        lambda w, v: _heldout("training_subgraphs")(w, v),
        words="n must",
    ),
    *_cases("training_subgraphs", "hops", (True, 2.5), lambda w, v: _heldout("training_subgraphs")(w, 3, hops=v)),
    *_cases("hop_tasks", "n", (-1, NAN, 2.5), lambda w, v: _heldout("hop_tasks")(w, 1, v), words="n must"),
    *_cases("hop_tasks", "hops", (True,), lambda w, v: _heldout("hop_tasks")(w, v, 3)),
    *_cases("builtin_benchmark", "hops", (3, "2", [2.5]), lambda w, v: _heldout("builtin_benchmark")(w, hops=v)),
    *_cases("atlas_taskset", "n", (True, "3", NAN), lambda w, v: _tasksets("atlas_taskset")(v), words="n must"),
    *_cases("sample_tasks", "limit", (NAN, INF, 2.5, True, 0), lambda w, v: _tasksets("sample_tasks")([], v, 0)),
    *_cases("load_tasksets", "limit", (NAN,), lambda w, v: _tasksets("load_tasksets")("builtin", limit=v, world=w)),
    *_cases(
        "load_tasksets",
        "on_error",
        ("skp",),
        lambda w, v: _tasksets("load_tasksets")("builtin", on_error=v, world=w),
        words="did you mean skip",
    ),
    # agents and the replay buffer
    *_cases("RandomAgent", "seed", (2.5, "3", NAN), lambda w, v: _agent("RandomAgent")(seed=v)),
    *_cases("RandomAgent", "max_pieces", (NAN, -1, 2.5, HUGE), lambda w, v: _agent("RandomAgent")(max_pieces=v)),
    *_cases("MalformedAgent", "size", (NAN, -1, 2.5, HUGE), lambda w, v: _agent("MalformedAgent")(size=v)),
    *_cases("ScriptedSelfPlayAgent", "seed", (NAN,), lambda w, v: _agent("ScriptedSelfPlayAgent")(seed=v)),
    *_cases("AgentConfig", "temperature", (NAN, -1, "1"), lambda w, v: _agent("AgentConfig")(temperature=v)),
    *_cases("AgentConfig", "top_p", (0, 2, NAN), lambda w, v: _agent("AgentConfig")(top_p=v)),
    *_cases("AgentConfig", "max_new_tokens", (0, NAN, True), lambda w, v: _agent("AgentConfig")(max_new_tokens=v)),
    *_cases("AgentConfig", "seed", (2.5,), lambda w, v: _agent("AgentConfig")(seed=v)),
    *_cases("AgentSpec", "concurrency", (NAN, 2.5, True), lambda w, v: _agent("AgentSpec")(concurrency=v)),
    *_cases("AgentSpec", "timeout", (NAN, INF, True), lambda w, v: _agent("AgentSpec")(timeout=v)),
    *_cases("AgentSpec", "retries", (2.5,), lambda w, v: _agent("AgentSpec")(retries=v)),
    *_cases("AgentSpec", "temperature", (NAN,), lambda w, v: _agent("AgentSpec")(temperature=v)),
    *_cases("AgentSpec", "seed", ("3",), lambda w, v: _agent("AgentSpec")(seed=v)),
    *_cases("ReplayBuffer", "capacity", (NAN, 2.5, True, HUGE), lambda w, v: _agent("ReplayBuffer")(v)),
    *_cases("ReplayBuffer", "reset_every", (NAN, 2.5, True), lambda w, v: _agent("ReplayBuffer")(4, v)),
]


@pytest.mark.parametrize(
    "what, name, value, build, words", BUILD_CASES, ids=[f"{c[0]}-{c[1]}={c[2]!r}" for c in BUILD_CASES]
)
def test_a_constructor_or_factory_refuses_a_bad_argument(tiny_world, what, name, value, build, words):
    _refused(lambda: build(tiny_world, value), words)


@pytest.mark.parametrize(
    "name, value",
    [("nprobe", NAN), ("nprobe", 2.5), ("batch_size", 0), ("batch_size", NAN), ("nlist", "3"), ("seed", 2.5)],
)
def test_the_dense_retriever_refuses_a_bad_argument_before_it_embeds(tiny_world, name, value):
    from searchgym.retrieval.dense import DenseRetriever

    class NeverEncodes:
        def encode(self, texts, batch_size=64):
            raise AssertionError("the arguments are checked before anything is embedded")

    _refused(
        lambda: DenseRetriever(*_docs(tiny_world), encoder=NeverEncodes(), index_type="ivf", **{name: value}), name
    )


@pytest.mark.parametrize(
    "source, value",
    [("ListTaskSource", v) for v in ("abc", [1, 2], None)]
    + [("SubgraphTaskSource", v) for v in (None, [1], "abc")]
    + [("JsonlTaskSource", v) for v in (None, 3)],
)
def test_task_sources_refuse_what_holds_no_tasks(source, value):
    from searchgym.tasks import sources

    _refused(lambda: getattr(sources, source)(value), source, kind=InvalidTypeError)


def test_the_path_following_solver_refuses_a_world_that_is_no_world():
    from searchgym.agents.scripted import PathFollowingSolver

    _refused(lambda: PathFollowingSolver(world=3), "world", kind=InvalidTypeError)
