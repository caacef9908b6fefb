"""docs/envs.md documents every env family's ``info`` (keys, types, when present) and the reward events:
play every env and check each ``info`` of reset and step against those tables, so the page cannot drift;
and the ``info["kind"]`` discriminator the wrappers read."""

from __future__ import annotations

import re
from pathlib import Path

import gymnasium as gym
import pytest

import searchgym  # noqa: F401  (registration)
from searchgym.agents.scripted import LeakyProposer, PathFollowingSolver, ScriptedProposer, ScriptedSelfPlayAgent
from searchgym.core.info import INFO_KINDS, has_slots, info_kind
from searchgym.core.rewards import RewardEvent
from searchgym.core.subgraph import Subgraph
from searchgym.core.types import Task, Trajectory, Turn
from searchgym.core.validation import ValidationResult
from searchgym.envs.group import KGSolverGroupEnv
from searchgym.envs.navigate import KGNavigateEnv
from searchgym.envs.proposer import KGProposerEnv
from searchgym.envs.registration import ENV_IDS
from searchgym.envs.selfplay import KGSelfPlayEnv
from searchgym.envs.solver import KGSolverEnv
from searchgym.errors import InvalidArgumentError
from searchgym.tasks.sources import SubgraphTaskSource
from tests.support.env_helpers import AcceptAll, RejectAll, play, tiny_subgraph

DOC = Path(__file__).resolve().parent.parent / "docs" / "envs.md"
CLASSES = {
    "Trajectory": Trajectory,
    "Task": Task,
    "Turn": Turn,
    "Subgraph": Subgraph,
    "RewardEvent": RewardEvent,
    "ValidationResult": ValidationResult,
}
EVENTS = "Reward events"


# ------------------------------------------------------------------ the documented schema
def _schema() -> dict[str, list[tuple[str, str, str]]]:
    """``{section heading: [(key, type, present), ...]}`` of the ``info`` tables in docs/envs.md."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("### `info`", 1)[1].split("\n### ", 1)[0]
    tables: dict[str, list[tuple[str, str, str]]] = {}
    heading = None
    for line in section.splitlines():
        if line.startswith("#### "):
            heading = line[5:].strip()
            tables[heading] = []
        elif heading and line.startswith("| `"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            key = cells[0].strip("`")
            tables[heading].append((key, cells[1].strip("`").replace("\\|", "|"), cells[2]))
    return tables


def _table(name: str) -> list[tuple[str, str, str]]:
    """The rows of the one table whose heading names ``name`` (an env id, or the reward events)."""
    found = [rows for heading, rows in _schema().items() if f"`{name}`" in heading or heading.startswith(name)]
    assert len(found) == 1, f"docs/envs.md: expected one info table naming {name}, found {len(found)}"
    return found[0]


def _split_top(text: str, sep: str) -> list[str]:
    """``text`` split at ``sep`` outside brackets."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "["
        depth -= ch == "]"
        if ch == sep and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return [*parts, cur.strip()]


def matches(value, type_text: str) -> bool:
    """Whether ``value`` has the documented type (``A | B``, ``list[T]``, ``dict[K, V]``, ``"literal"``, names)."""
    for alt in _split_top(type_text, "|"):
        if alt.startswith('"'):
            ok = value == alt.strip('"')
        elif alt == "None":
            ok = value is None
        elif alt in ("int", "float"):
            ok = isinstance(value, {"int": int, "float": float}[alt]) and not isinstance(value, bool)
        elif alt in ("bool", "str"):
            ok = isinstance(value, {"bool": bool, "str": str}[alt])
        elif alt in CLASSES:
            ok = isinstance(value, CLASSES[alt])
        elif alt in ("list", "dict"):
            ok = isinstance(value, {"list": list, "dict": dict}[alt])
        elif alt.startswith("list[") and alt.endswith("]"):
            ok = isinstance(value, list) and all(matches(v, alt[5:-1]) for v in value)
        elif alt.startswith("dict[") and alt.endswith("]"):
            k, v = _split_top(alt[5:-1], ",")
            ok = isinstance(value, dict) and all(matches(a, k) and matches(b, v) for a, b in value.items())
        else:
            raise AssertionError(f"docs/envs.md: type {alt!r} is not one this test knows; add it to matches()")
        if ok:
            return True
    return False


def check_info(env_id: str, info: dict) -> None:
    """``info`` has exactly the documented keys for ``env_id``, each of its documented type."""
    rows = _table(env_id)
    expected = {key for key, _, present in rows if present == "always" or f"`{env_id}`" in present}
    assert set(info) == expected, f"{env_id}: info keys differ from docs/envs.md"
    for key, type_text, _ in rows:
        if key in info:
            assert matches(info[key], type_text), f"{env_id}: info[{key!r}] = {info[key]!r} is not {type_text}"
    for ev in info.get("rewards", ()):
        check_event(ev)


def check_event(event: dict) -> None:
    """A reward event has the documented keys and types."""
    rows = _table(EVENTS)
    assert set(event) == {key for key, _, _ in rows}
    for key, type_text, _ in rows:
        assert matches(event[key], type_text), f"reward event[{key!r}] = {event[key]!r} is not {type_text}"


# ------------------------------------------------------------------ playing every env
def _infos(env, agent, **reset) -> list[dict]:
    steps, first = play(env, agent, **reset)
    return [first] + [info for *_, info in steps]


class _AcceptOnce(AcceptAll):
    """Accepts the first question, rejects the rest (the second game's Solvers replay the first's)."""

    def __init__(self):
        self.calls = 0

    def verify(self, question, answers, materials, noise_pool=(), rng=0):
        self.calls += 1
        return (
            super().verify(question, answers, materials)
            if self.calls == 1
            else RejectAll().verify(question, answers, materials)
        )


def _selfplay(world, verifier, games):
    env = KGSelfPlayEnv(world, pool=[tiny_subgraph()], group_size=3, verifier=verifier)
    return [info for game in range(games) for info in _infos(env, ScriptedSelfPlayAgent(world=world), seed=game)]


def _episodes(world) -> dict[str, list[dict]]:
    tasks = SubgraphTaskSource([tiny_subgraph()], world)
    nav = KGNavigateEnv(world, tasks=[tiny_subgraph()])
    nav_infos = [nav.reset(seed=0)[1]]
    done = False
    while not done:  # walk, then answer on the last step
        action = nav.answer_action if len(nav_infos) == 3 else 0
        _, _, term, trunc, info = nav.step(action)
        nav_infos.append(info)
        done = term or trunc
    return {
        "KGSolver-v0": _infos(KGSolverEnv(world, tasks), PathFollowingSolver(world), seed=0),
        "KGProposer-v0": _infos(KGProposerEnv(world, tasks, verifier=AcceptAll()), ScriptedProposer(), seed=0)
        + _infos(KGProposerEnv(world, tasks, verifier=AcceptAll()), LeakyProposer(), seed=0),
        "KGSolverGroup-v0": _infos(
            KGSolverGroupEnv(world, tasks, group_size=3), ScriptedSelfPlayAgent(world=world), seed=0
        ),
        "KGSelfPlay-v0": _selfplay(world, _AcceptOnce(), 2)  # a valid question, then an invalid one: replayed
        + _selfplay(world, RejectAll(), 1),  # an invalid question with an empty buffer: the dummy task
        "KGNavigate-v0": nav_infos,
    }


@pytest.fixture(scope="module")
def episodes(tiny_world):
    return _episodes(tiny_world)


def test_every_registered_env_has_one_documented_info_table():
    assert set(ENV_IDS) == {"KGSolver-v0", "KGProposer-v0", "KGSolverGroup-v0", "KGSelfPlay-v0", "KGNavigate-v0"}
    for env_id in ENV_IDS:
        rows = _table(env_id)
        kinds = [t for key, t, _ in rows if key == "kind"]
        assert len(kinds) == 1 and kinds[0].strip('"') in INFO_KINDS, env_id
    assert _table(EVENTS)


@pytest.mark.parametrize(
    "env_id", ["KGSolver-v0", "KGProposer-v0", "KGSolverGroup-v0", "KGSelfPlay-v0", "KGNavigate-v0"]
)
def test_info_of_reset_and_every_step_matches_docs(episodes, env_id):
    infos = episodes[env_id]
    assert len(infos) > 2
    for info in infos:
        check_info(env_id, info)
    assert any(info.get("rewards") for info in infos) or env_id == "KGNavigate-v0"  # events were checked too


def test_selfplay_games_cover_both_phases_and_every_task_source(episodes):
    infos = episodes["KGSelfPlay-v0"]
    assert {info["role"] for info in infos} == {"proposer", "solver"}
    assert {info["replay"] for info in infos} == {"proposed", "replayed", "dummy"}


def test_gym_make_envs_return_the_same_schema():
    for env_id in ENV_IDS:
        env = gym.make(env_id, **({"num_tasks": 20} if env_id == "KGNavigate-v0" else {}))
        _, info = env.reset(seed=0)
        check_info(env_id, info)
        env.close()


def test_kind_names_the_family_and_has_slots_follows_it(episodes):
    expected = {
        "KGSolver-v0": "single",
        "KGProposer-v0": "single",
        "KGSolverGroup-v0": "group",
        "KGSelfPlay-v0": "selfplay",
        "KGNavigate-v0": "navigate",
    }
    for env_id, infos in episodes.items():
        for info in infos:
            assert info_kind(info) == expected[env_id]
            assert has_slots(info) == (expected[env_id] in ("group", "selfplay"))
            legacy = {k: v for k, v in info.items() if k != "kind"}  # an info from before the key: inferred
            assert info_kind(legacy) == expected[env_id]
            assert has_slots(legacy) == has_slots(info)


def test_info_kind_rejects_what_no_env_returns():
    with pytest.raises(InvalidArgumentError, match="kind"):
        info_kind({"kind": "pair"})
    with pytest.raises(InvalidArgumentError, match="not from a searchgym env"):
        info_kind({"obs": 1})
    assert not has_slots({"obs": 1})


def test_matches_reads_the_documented_types():
    assert matches([None, 1], "list[int | None]")
    assert not matches([True], "list[int]")  # a bool is not an int here
    assert matches({"a": 1.0}, "dict[str, float]") and not matches({"a": "x"}, "dict[str, float]")
    assert matches("dummy", 'bool | "dummy"') and not matches("other", 'bool | "dummy"')
    with pytest.raises(AssertionError, match="not one this test knows"):
        matches(1, "Whatever")
