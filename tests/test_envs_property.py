"""Property tests: arbitrary text (tags included) thrown at every text env never crashes it, and
the trajectory bookkeeping invariants hold whatever the agent writes."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from searchgym.envs.export import read_trajectories
from searchgym.envs.group import KGSolverGroupEnv
from searchgym.envs.proposer import KGProposerEnv
from searchgym.envs.selfplay import KGSelfPlayEnv
from searchgym.envs.solver import KGSolverEnv
from searchgym.envs.spaces import UnicodeText, text_space
from searchgym.tasks.sources import SubgraphTaskSource
from tests.conftest import build_tiny_world
from tests.support.env_helpers import tiny_subgraph

WORLD = build_tiny_world()
TAGS = [
    "<think>",
    "</think>",
    "<search>",
    "</search>",
    "<answer>",
    "</answer>",
    "<question>",
    "</question>",
    "<information>",
    "</information>",
    "<tool_call>",
    "</tool_call>",
    "<evidence>",
    "</evidence>",
    "< SEARCH >",
    '{"query": "Tarsk", "entity": ["Tarsk"], "relation": ["located in"]}',
    "Ostrel",
    "Tarsk",
]
piece = st.one_of(st.text(max_size=40), st.sampled_from(TAGS))
turn_text = st.lists(piece, max_size=12).map("".join)
turns = st.lists(turn_text, min_size=1, max_size=12)

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _source():
    return SubgraphTaskSource([tiny_subgraph()], WORLD)


ENVS = {
    "solver": KGSolverEnv(WORLD, _source(), max_turns=6, kg_tool=True),
    "proposer": KGProposerEnv(WORLD, _source(), max_turns=6),
    "group": KGSolverGroupEnv(WORLD, _source(), group_size=3, max_turns=4),
    "selfplay": KGSelfPlayEnv(WORLD, pool=[tiny_subgraph()], group_size=3, max_turns=4),
}


def _check_traj(traj):
    text = traj.text
    assert text == "".join(s.text for s in traj.segments)
    env_texts = [text[a:b] for a, b in traj.env_spans]
    # every env insertion is either a turn's retrieved information (in order) or a corrective message
    assert [x for x in env_texts if x.startswith("\n<information>")] == [
        t.information for t in traj.turns if t.information
    ]
    assert all(
        x.startswith("\nMy previous action is invalid.") for x in env_texts if not x.startswith("\n<information>")
    )
    for t in traj.turns:
        assert "<information>" not in t.think  # forged observations never count as thinking
    assert len(traj.turns) <= traj.metadata["max_turns"]


def _run(env, texts, multi):
    obs, info = env.reset(seed=0)
    assert obs in env.observation_space
    for i, text in enumerate(texts):
        action = tuple(text + str(j) * (j % 2) for j in range(env.group_size)) if multi else text
        obs, reward, term, trunc, info = env.step(action)
        assert obs in env.observation_space and isinstance(reward, float) and math.isfinite(reward)
        assert reward == pytest.approx(sum(e["reward"] for e in info["rewards"]))
        assert all(e["reward"] >= 0.0 and e["role"] in ("solver", "proposer") for e in info["rewards"])
        for t in info["trajectories"] if multi else [info["trajectory"]]:
            if t is not None:
                _check_traj(t)
        if term or trunc:
            return


@SETTINGS
@given(texts=turns)
def test_solver_survives_arbitrary_text(texts):
    _run(ENVS["solver"], texts, multi=False)


@SETTINGS
@given(texts=turns)
def test_proposer_survives_arbitrary_text(texts):
    _run(ENVS["proposer"], texts, multi=False)


@SETTINGS
@given(texts=turns)
def test_group_survives_arbitrary_text(texts):
    _run(ENVS["group"], texts, multi=True)


@SETTINGS
@given(texts=st.lists(turn_text, min_size=1, max_size=20))
def test_selfplay_survives_arbitrary_text(texts):
    _run(ENVS["selfplay"], texts, multi=True)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_random_samples_of_the_action_space_parse(seed):
    env = ENVS["selfplay"]
    env.action_space.seed(seed)
    env.reset(seed=seed)
    for _ in range(3):
        obs, reward, term, trunc, info = env.step(env.action_space.sample())
        assert obs in env.observation_space
        if term or trunc:
            break


@given(st.text())
def test_text_space_contains_every_unicode_string(s):
    assert s in text_space()


def test_text_space_bounds_and_samples():
    space = UnicodeText(10, min_length=2, seed=0)
    assert "a" not in space and "a" * 11 not in space and 5 not in space and "é\U0001f600" in space
    samples = [space.sample() for _ in range(50)]
    assert all(s in space for s in samples) and len(set(samples)) > 40
    assert len(text_space(0).sample(mask=(1000, None))) == 1000
    assert space == UnicodeText(10, min_length=2) and space != UnicodeText(11, min_length=2)


# ---------------------------------------------------------------- export on
# Any code point, surrogates included (an LLM's byte-level decoding can produce lone surrogates).
any_char = st.characters(codec=None, categories=None)
wild_piece = st.one_of(
    st.text(alphabet=any_char, max_size=20),
    st.sampled_from(TAGS),
    st.sampled_from(["\ud800", "\udfff", "\ud83d\ude00", "\x00", "\ufffe", "<answer>\ud800</answer>"]),
)
wild_turns = st.lists(st.lists(wild_piece, max_size=8).map("".join), min_size=1, max_size=6)


def _pairs_joined(text: str) -> str:
    """``text`` with each adjacent high+low surrogate pair read as the one character it encodes (what
    any JSON reader does with the escapes); lone surrogates stay as they are."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


@pytest.fixture(scope="module")
def exporting_envs(tmp_path_factory):
    """Every text env with export on, each writing its own file."""
    d = tmp_path_factory.mktemp("export")
    envs = {
        "solver": KGSolverEnv(WORLD, _source(), max_turns=3, export_path=d / "solver.jsonl"),
        "proposer": KGProposerEnv(WORLD, _source(), max_turns=3, export_path=d / "proposer.jsonl"),
        "group": KGSolverGroupEnv(WORLD, _source(), group_size=2, max_turns=2, export_path=d / "group.jsonl"),
        "selfplay": KGSelfPlayEnv(
            WORLD, pool=[tiny_subgraph()], group_size=2, max_turns=2, export_path=d / "selfplay.jsonl"
        ),
    }
    yield envs
    for env in envs.values():
        env.close()


@pytest.mark.parametrize("name", ["solver", "proposer", "group", "selfplay"])
def test_export_never_crashes_step_on_agent_text(exporting_envs, name):
    """Fuzz: whatever code points the agent writes, every step returns and every finished game is
    written as a line that reads back with the agent's exact text."""
    env = exporting_envs[name]
    multi = name in ("group", "selfplay")

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(texts=wild_turns)
    def play(texts):
        before = env.writer.count
        obs, info = env.reset(seed=0)
        for text in texts * 8:  # repeat the turns until the game ends (max_turns is small)
            obs, reward, term, trunc, info = env.step(tuple([text] * env.group_size) if multi else text)
            assert math.isfinite(reward)
            if term or trunc:
                break
        assert term or trunc
        assert env.writer.count == before + 1
        (last,) = read_trajectories(env.writer.path)[-1:]
        live = info["trajectories"] if multi else [info["trajectory"]]
        exported = ([last.proposer] if last.proposer is not None else []) + last.solvers
        assert {_pairs_joined(t.text) for t in live if t is not None} <= {t.text for t in exported}

    play()


def test_lone_surrogate_answer_is_scored_and_exported(tmp_path):
    """The issue's case: ``<answer>\\ud800</answer>`` with export on ends the game with a reward."""
    env = KGSolverEnv(WORLD, _source(), export_path=tmp_path / "x.jsonl")
    env.reset(seed=0)
    obs, reward, term, trunc, info = env.step("<answer>\ud800</answer>")
    assert term and reward == 0.0
    env.close()
    (rec,) = read_trajectories(tmp_path / "x.jsonl")
    assert "\ud800" in rec.solvers[0].text and rec.solvers[0].text == info["trajectory"].text
