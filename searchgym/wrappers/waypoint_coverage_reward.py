"""Waypoint Coverage Reward (WCR; kg-paths-wcr §3.3, docs/rewards.md, WCR).

For Solver rollout i of a question built from the KG path ``v0 -r1-> … -rK-> vK`` the waypoints are
``W = {v0 … v(K-1)}``. A waypoint is *matched* when its canonical title is an exact substring of the
concatenated ``<think>`` text T_i (Eq. 5; the spans are joined by ``THINK_SEPARATOR``, a line
break no waypoint name may contain, so ``look for New`` + ``port`` never matches ``Newport``)::

    g_i  = |matched(W, T_i)| / |W|
    g̃_i  = g_i / max_j g_j          (over the G rollouts of the question; 0 when all are 0)
    R_i  = c_i + α (1 − c_i) z_i g̃_i,   α = 0.3          (Eq. 6)

Correct answers get exactly 1, invalid rollouts (z_i = 0: format broken or no parseable answer) get
no partial credit, and the Proposer keeps its binary-correctness reward.

``waypoint_answer_credit=False`` (a deviation from Eq. 6; docs/fidelity.md) also withholds the partial
credit from a rollout whose answer *is* a waypoint (the seed or a bridge, by title or alias, SQuAD exact
match): it stopped on the path before the answer, and Eq. 6 pays it as much as a rollout that went on.

A lone rollout (``KGSolver-v0``, G = 1) has no group to normalise over; ``lone`` picks what to do
(:data:`LONE_MODES`): ``"raw"`` (default) uses g_i itself, ``"group"`` applies the group formula
literally (g̃ = 1 whenever g > 0), ``"binary"`` gives no partial credit.

Matching is done by :class:`WaypointMatcher`, built once per waypoint set and cached. Its default
strategy is ``"native"``: a small C extension (``_substring_scan``, built at install) that reads the
str's own buffer and, per pattern, memchr-scans for the pattern's rarest byte in this text before
comparing the whole pattern, so an absent title costs about one memory scan instead of CPython's
character-by-character substring search. Where the extension could not be built the pure-Python
strategies are used: a per-pattern ``str.__contains__`` scan below :data:`AUTOMATON_THRESHOLD`
patterns, one Aho–Corasick pass (``pyahocorasick``) from there on (``benchmarks/bench_wcr.py``).
Every strategy gives identical results.
"""

from __future__ import annotations

import logging
from functools import lru_cache
from typing import Mapping, Optional, Sequence

import gymnasium as gym

from ..core.answers import exact_match
from ..core.arg_checks import check_choice, check_flag, check_number
from ..core.types import THINK_SEPARATOR, Task, Trajectory
from ..errors import InvalidArgumentError, InvalidTypeError, SearchGymRuntimeError
from .base import Event, MissingTaskDataError, RewardShapingWrapper, event_trajectory

try:
    from ._substring_scan import contains_each as _native_contains_each
except ImportError:  # built without a C compiler: the pure-Python strategies serve
    _native_contains_each = None

logger = logging.getLogger(__name__)

LONE_MODES = ("raw", "group", "binary")
# Without the extension: pattern count from which one Aho–Corasick pass beats a per-pattern ``in``
# scan (measured by benchmarks/bench_wcr.py on 5 × 8k-token rollouts; see docs/wrappers.md).
AUTOMATON_THRESHOLD = 40
STRATEGIES = ("auto", "native", "scan", "automaton")
#: Whether the compiled matcher was built for this interpreter (``strategy="native"`` needs it).
NATIVE_AVAILABLE = _native_contains_each is not None


class WaypointMatcher:
    """Finds which waypoints occur (exact substring, or case-insensitively) in a text.

    ``aliases`` optionally lists extra surface forms per waypoint (parallel to ``waypoints``, or a
    mapping title → aliases); a waypoint matches when its title or any alias occurs. Duplicate
    titles are separate waypoints (both match together). ``strategy``: ``"native"`` (the compiled
    rare-byte scan; needs :data:`NATIVE_AVAILABLE`), ``"scan"`` (one ``in`` per pattern),
    ``"automaton"`` (one Aho–Corasick pass, stops once every waypoint is found) or ``"auto"``
    (native when built, else scan below :data:`AUTOMATON_THRESHOLD` patterns and automaton above).
    """

    def __init__(
        self,
        waypoints: Sequence[str],
        *,
        aliases: Optional[Sequence[Sequence[str]] | Mapping[str, Sequence[str]]] = None,
        case_insensitive: bool = False,
        strategy: str = "auto",
    ):
        if isinstance(waypoints, str):
            raise InvalidTypeError("waypoints must be a sequence of titles, not a single string")
        if not waypoints:
            raise InvalidArgumentError("no waypoints to match: WCR needs at least one waypoint title (v0 … v(K-1))")
        if strategy not in STRATEGIES:
            raise InvalidArgumentError(f"unknown strategy {strategy!r}; choose one of {STRATEGIES}")
        if strategy == "native" and not NATIVE_AVAILABLE:
            raise SearchGymRuntimeError(
                "strategy='native' needs searchgym's compiled extension searchgym.wrappers._substring_scan, "
                "which this install lacks (it is skipped when no C compiler is found); reinstall with a C "
                "compiler available (`pip install -e .` with gcc/clang), or use strategy='auto'"
            )
        alias_lists = _alias_lists(waypoints, aliases)
        self.waypoints = tuple(waypoints)
        self.case_insensitive = case_insensitive
        owners: dict[str, list[int]] = {}
        for i, (title, extra) in enumerate(zip(waypoints, alias_lists)):
            for name in (title, *extra):
                if not isinstance(name, str) or not name.strip():
                    raise InvalidArgumentError(f"waypoint {i} ({title!r}) has an empty or non-string name {name!r}")
                if THINK_SEPARATOR in name:
                    raise InvalidArgumentError(
                        f"waypoint {i} name {name!r} contains the think-span separator {THINK_SEPARATOR!r}, so it "
                        "could match across two <think> spans; give titles and aliases on one line"
                    )
                key = name.lower() if case_insensitive else name
                if i not in owners.setdefault(key, []):
                    owners[key].append(i)
        self._patterns = tuple((p, tuple(ix)) for p, ix in owners.items())
        self._pattern_texts = tuple(p for p, _ in self._patterns)
        # One pattern per waypoint, in order (no aliases, no repeated titles): hits are the answer.
        self._one_to_one = [ix for _, ix in self._patterns] == [(i,) for i in range(len(self.waypoints))]
        if strategy == "auto":
            if NATIVE_AVAILABLE:
                strategy = "native"
            else:
                strategy = "automaton" if len(self._patterns) >= AUTOMATON_THRESHOLD else "scan"
        self.strategy = strategy
        self._automaton = self._build_automaton() if strategy == "automaton" else None

    def _build_automaton(self):
        import ahocorasick

        automaton = ahocorasick.Automaton()
        for pattern, owners in self._patterns:
            automaton.add_word(pattern, owners)
        automaton.make_automaton()
        return automaton

    def match(self, text: str) -> list[bool]:
        """One flag per waypoint: does it (title or alias) occur in ``text``?"""
        if not isinstance(text, str):
            raise InvalidTypeError(f"text must be str, got {type(text).__name__}")
        if self.case_insensitive:
            text = text.lower()
        if self.strategy == "native":
            hits = _native_contains_each(text, self._pattern_texts)
            if self._one_to_one:
                return hits
            found = [False] * len(self.waypoints)
            for hit, (_pattern, owners) in zip(hits, self._patterns):
                if hit:
                    for i in owners:
                        found[i] = True
            return found
        found = [False] * len(self.waypoints)
        if self._automaton is None:
            for pattern, owners in self._patterns:
                if pattern in text:
                    for i in owners:
                        found[i] = True
            return found
        remaining = len(found)
        for _end, owners in self._automaton.iter(text):
            for i in owners:
                if not found[i]:
                    found[i] = True
                    remaining -= 1
            if remaining == 0:
                break
        return found

    def coverage(self, text: str) -> tuple[float, list[str]]:
        """Raw coverage g and the matched waypoint titles (in waypoint order)."""
        flags = self.match(text)
        matched = [w for w, f in zip(self.waypoints, flags) if f]
        return len(matched) / len(self.waypoints), matched


def _alias_lists(waypoints, aliases) -> list[tuple[str, ...]]:
    if aliases is None:
        return [()] * len(waypoints)
    if isinstance(aliases, Mapping):
        return [tuple(aliases.get(w, ())) for w in waypoints]
    if len(aliases) != len(waypoints):
        raise InvalidArgumentError(
            f"aliases has {len(aliases)} entries for {len(waypoints)} waypoints; pass one list per waypoint"
        )
    return [tuple(a) for a in aliases]


@lru_cache(maxsize=4096)
def _cached_matcher(
    waypoints: tuple, aliases: Optional[tuple], case_insensitive: bool, strategy: str
) -> WaypointMatcher:
    return WaypointMatcher(list(waypoints), aliases=aliases, case_insensitive=case_insensitive, strategy=strategy)


def get_matcher(
    waypoints: Sequence[str],
    *,
    aliases: Optional[Sequence[Sequence[str]]] = None,
    case_insensitive: bool = False,
    strategy: str = "auto",
) -> WaypointMatcher:
    """A :class:`WaypointMatcher` for this waypoint set, built once and cached (LRU, 4096 sets)."""
    alias_key = None if aliases is None else tuple(tuple(a) for a in _alias_lists(waypoints, aliases))
    return _cached_matcher(tuple(waypoints), alias_key, bool(case_insensitive), strategy)


def waypoint_coverage(
    think_text: str,
    waypoints: Sequence[str],
    *,
    case_insensitive: bool = False,
    aliases: Optional[Sequence[Sequence[str]]] = None,
) -> tuple[float, list[str]]:
    """Raw waypoint coverage g (Eq. 5) of ``think_text`` and the matched titles.

    Default = the paper: exact, case-sensitive substring match of the canonical titles.
    """
    return get_matcher(waypoints, aliases=aliases, case_insensitive=case_insensitive).coverage(think_text)


def normalised_coverages(coverages: Sequence[float], lone: str = "raw") -> list[float]:
    """g̃_i = g_i / max_j g_j over the group (0 if all zero); a group of one follows ``lone``."""
    if lone not in LONE_MODES:
        raise InvalidArgumentError(f"unknown lone-rollout normalisation {lone!r}; choose one of {LONE_MODES}")
    gs = [float(g) for g in coverages]
    for g in gs:
        if not 0.0 <= g <= 1.0:
            raise InvalidArgumentError(f"coverage {g} outside [0, 1]")
    if len(gs) == 1 and lone != "group":
        return [gs[0]] if lone == "raw" else [0.0]
    g_max = max(gs, default=0.0)
    return [g / g_max if g_max > 0 else 0.0 for g in gs]


def wcr_group_terms(
    correct: Sequence[bool],
    valid: Sequence[bool],
    coverages: Sequence[float],
    alpha: float = 0.3,
    lone: str = "raw",
    *,
    answered_waypoint: Optional[Sequence[bool]] = None,
) -> list[dict]:
    """Eq. 6's terms for each rollout of one group, as reward components.

    ``wcr_coverage`` (g_i), ``wcr_normalised_coverage`` (g̃_i), ``wcr_bonus`` (α (1 − c_i) z_i g̃_i)
    and ``correct`` (c_i); the reward is R_i = c_i + bonus. ``answered_waypoint`` (one flag per rollout;
    ``None``: Eq. 6 as written) withholds the bonus from the rollouts flagged, and is reported as a component.
    """
    if not len(correct) == len(valid) == len(coverages):
        raise InvalidArgumentError(
            f"correct/valid/coverages lengths differ: {len(correct)}, {len(valid)}, {len(coverages)}"
        )
    if answered_waypoint is not None and len(answered_waypoint) != len(correct):
        raise InvalidArgumentError(
            f"answered_waypoint has {len(answered_waypoint)} flags for {len(correct)} rollouts; give one per rollout"
        )
    if not correct:
        raise InvalidArgumentError("an empty group has no WCR rewards")
    if not 0.0 <= alpha <= 1.0:
        raise InvalidArgumentError(f"alpha must lie in [0, 1] (paper: (0, 1), default 0.3); got {alpha}")
    g_tilde = normalised_coverages(coverages, lone)
    stopped = [False] * len(correct) if answered_waypoint is None else [bool(a) for a in answered_waypoint]
    terms = []
    for c, z, g, gt, w in zip(correct, valid, coverages, g_tilde, stopped):
        term = {
            "wcr_coverage": g,
            "wcr_normalised_coverage": gt,
            "wcr_bonus": 0.0 if c or not z or w else alpha * gt,
            "correct": int(bool(c)),
        }
        if answered_waypoint is not None:
            term["wcr_answered_waypoint"] = int(w)
        terms.append(term)
    return terms


def wcr_rewards(
    correct: Sequence[bool],
    valid: Sequence[bool],
    coverages: Sequence[float],
    alpha: float = 0.3,
    lone: str = "raw",
    *,
    answered_waypoint: Optional[Sequence[bool]] = None,
) -> list[float]:
    """R_i = c_i + α (1 − c_i) z_i g̃_i for one group (Eq. 6). Correct → exactly 1; invalid → c_i; a rollout
    flagged in ``answered_waypoint`` → c_i (the ``waypoint_answer_credit=False`` deviation)."""
    terms = wcr_group_terms(correct, valid, coverages, alpha, lone, answered_waypoint=answered_waypoint)
    return [t["correct"] + t["wcr_bonus"] for t in terms]


def rollout_is_valid(trajectory: Trajectory) -> bool:
    """z_i: the rollout followed the format and produced a parseable answer."""
    return bool(trajectory.valid) and trajectory.answer is not None


def task_waypoint_aliases(task: Task) -> list[tuple[str, ...]]:
    """Aliases of each waypoint from the task's subgraph node table (for ``match_aliases``)."""
    sg = _waypoint_subgraph(task)
    if sg is None:
        raise MissingTaskDataError(
            f"task {task.id!r}: alias matching needs the subgraph whose path gives the waypoints; "
            "construct the task with its Subgraph or use match_aliases=False"
        )
    return [sg.nodes[n].aliases for n in sg.waypoint_ids]


def answers_a_waypoint(trajectory: Trajectory) -> bool:
    """Whether an incorrect rollout's answer names one of its task's waypoints (the seed or a bridge; by
    title, or by alias where the task carries its subgraph), SQuAD exact match as answers are judged: the
    rollout stopped on the construction path before the answer. A correct rollout is never flagged."""
    if trajectory.correct or trajectory.answer is None:
        return False
    task = trajectory.task
    _require_waypoints(task)
    names = list(task.waypoints)
    sg = _waypoint_subgraph(task)
    if sg is not None:
        names += [alias for n in sg.waypoint_ids for alias in sg.nodes[n].aliases]
    return exact_match(trajectory.answer, names)


def _waypoint_subgraph(task: Task):
    """The task's subgraph when its path gives the task's waypoints (so its nodes' aliases are theirs), else None."""
    sg = task.subgraph
    if sg is None or [sg.nodes[n].title for n in sg.waypoint_ids] != list(task.waypoints):
        return None
    return sg


def _require_waypoints(task: Task) -> None:
    if not task.waypoints:
        raise MissingTaskDataError(
            f"task {task.id!r} has no waypoints; WCR needs the KG construction path "
            "(give the Task a subgraph or waypoints, or drop WaypointCoverageReward)"
        )


def trajectory_coverage(
    trajectory: Trajectory, *, case_insensitive: bool = False, match_aliases: bool = False
) -> tuple[float, list[str]]:
    """Raw coverage g_i of one rollout's think text against its task's waypoints."""
    task = trajectory.task
    _require_waypoints(task)
    aliases = task_waypoint_aliases(task) if match_aliases else None
    return waypoint_coverage(trajectory.think_text, task.waypoints, case_insensitive=case_insensitive, aliases=aliases)


def rollout_group_terms(
    trajectories: Sequence[Trajectory],
    alpha: float,
    *,
    case_insensitive: bool,
    match_aliases: bool,
    lone: str,
    waypoint_answer_credit: bool,
) -> list[dict]:
    """:func:`wcr_group_terms` of one group's finished rollouts: their coverage, correctness, validity and (with
    ``waypoint_answer_credit=False``) whether each answered a waypoint, read from the trajectories."""
    coverages = [
        trajectory_coverage(t, case_insensitive=case_insensitive, match_aliases=match_aliases)[0] for t in trajectories
    ]
    correct = [bool(t.correct) for t in trajectories]
    valid = [rollout_is_valid(t) for t in trajectories]
    stopped = None if waypoint_answer_credit else [answers_a_waypoint(t) for t in trajectories]
    return wcr_group_terms(correct, valid, coverages, alpha, lone, answered_waypoint=stopped)


def wcr_group_rewards(
    trajectories: Sequence[Trajectory],
    alpha: float = 0.3,
    *,
    case_insensitive: bool = False,
    match_aliases: bool = False,
    lone: str = "raw",
    waypoint_answer_credit: bool = True,
) -> list[dict]:
    """Score finished rollouts of one question (e.g. G ``KGSolver-v0`` episodes on one task).

    Returns one dict per rollout: ``reward`` (Eq. 6), ``wcr_coverage``, ``wcr_normalised_coverage``,
    ``wcr_bonus``, ``correct`` (and ``wcr_answered_waypoint`` with ``waypoint_answer_credit=False``, which
    withholds the bonus from a rollout whose answer is a waypoint). All rollouts must share one task id.
    """
    ids = {t.task.id for t in trajectories}
    if len(ids) > 1:
        raise InvalidArgumentError(f"a WCR group is the rollouts of one question; got task ids {sorted(ids)}")
    terms = rollout_group_terms(
        trajectories,
        alpha,
        case_insensitive=case_insensitive,
        match_aliases=match_aliases,
        lone=lone,
        waypoint_answer_credit=waypoint_answer_credit,
    )
    return [{"reward": t["correct"] + t["wcr_bonus"], **t} for t in terms]


class WaypointCoverageReward(RewardShapingWrapper):
    """WCR as a wrapper: adds α(1 − c_i) z_i g̃_i to each solver event; proposer events untouched.

    On the bare env (solver reward = c_i) the result is exactly Eq. 6. Components written per
    solver event: ``wcr_coverage`` (g_i), ``wcr_normalised_coverage`` (g̃_i), ``wcr_bonus`` and
    ``correct`` (c_i). Groups are the G solver events of one question arriving together
    (``KGSolverGroup-v0``, ``KGSelfPlay-v0``); a lone ``KGSolver-v0`` rollout uses
    ``lone_normalisation`` (:data:`LONE_MODES`). A task without waypoints raises
    :class:`MissingTaskDataError` at reset (or when its rollouts are scored).

    ``waypoint_answer_credit=False`` withholds the bonus from an incorrect rollout whose answer is itself a
    waypoint (:func:`answers_a_waypoint`; component ``wcr_answered_waypoint``): Eq. 6 pays a Solver that stops
    at the first hop of a 2-hop question as much as one that searches on, and on the CPU benchmark that taught
    the Solver to stop short (docs/fidelity.md). Default ``True``: Eq. 6 as written.
    """

    name = "wcr"

    def __init__(
        self,
        env,
        alpha: float = 0.3,
        *,
        case_insensitive: bool = False,
        match_aliases: bool = False,
        lone_normalisation: str = "raw",
        waypoint_answer_credit: bool = True,
    ):
        gym.utils.RecordConstructorArgs.__init__(  # gym.make(env.spec) rebuilds it
            self,
            alpha=alpha,
            case_insensitive=case_insensitive,
            match_aliases=match_aliases,
            lone_normalisation=lone_normalisation,
            waypoint_answer_credit=waypoint_answer_credit,
        )
        super().__init__(env)
        check_number("alpha", alpha, hint="paper default 0.3")
        if not 0.0 <= alpha <= 1.0:
            raise InvalidArgumentError(f"alpha must lie in [0, 1] (paper default 0.3); got {alpha}")
        self.alpha = alpha
        self.case_insensitive = check_flag("case_insensitive", case_insensitive)
        self.match_aliases = check_flag("match_aliases", match_aliases)
        self.lone_normalisation = check_choice("lone_normalisation", lone_normalisation, LONE_MODES)
        if not isinstance(waypoint_answer_credit, bool):
            raise InvalidTypeError(f"waypoint_answer_credit must be true or false, got {waypoint_answer_credit!r}")
        self.waypoint_answer_credit = waypoint_answer_credit

    def check_task(self, task: Optional[Task]) -> None:
        """Every task must carry waypoints (and a subgraph when aliases are matched)."""
        if task is None:
            return
        _require_waypoints(task)
        if self.match_aliases:
            task_waypoint_aliases(task)

    def coverage(self, trajectory: Trajectory) -> tuple[float, list[str]]:
        """Raw coverage g_i of one rollout's think text against its task's waypoints."""
        return trajectory_coverage(trajectory, case_insensitive=self.case_insensitive, match_aliases=self.match_aliases)

    def shape_solver_group(self, events: list[Event], info: dict) -> None:
        """Score one question's rollouts together and add each one's bonus."""
        group = rollout_group_terms(
            [event_trajectory(ev) for ev in events],
            self.alpha,
            case_insensitive=self.case_insensitive,
            match_aliases=self.match_aliases,
            lone=self.lone_normalisation,
            waypoint_answer_credit=self.waypoint_answer_credit,
        )
        for ev, terms in zip(events, group):
            bonus = terms.pop("wcr_bonus")
            ev.add_term("wcr_bonus", bonus, **terms)
