"""Graph-Distance Contribution Reward (GDCR; gdcr-sapo §3.2–3.3, docs/rewards.md, GDCR and SAPO).

The ER graph of a question is its subgraph (target path + distractors), **undirected and
unweighted** (a decision: docs/rewards.md). ``d(v)`` is the BFS hop count from ``v`` to the answer node and
``c(v) = k^(−d(v))`` (k = 2; unreachable nodes contribute 0, Eq. 4–5).

Each step t of a trajectory is one agent turn (its ``<think>`` text, then the ``<information>`` the
env inserted). With O (observed) and T (cited) starting empty (Eq. 7), in order:

- cite:     ΔC_t = entities named in this step's think that are in O and not yet in T;
            r_cite = Σ_{v∈ΔC_t} c(v)   (Eq. 8–9), then T ← T ∪ ΔC_t;
- retrieve: ΔO_t = entities named in this step's information not yet in O;
            r_ret  = Σ_{v∈ΔO_t} c(v)   (Eq. 10–11), then O ← O ∪ ΔO_t;
- r_t = r_cite + r_ret (Eq. 12).

Entity linking (a decision: docs/rewards.md): case-insensitive, word-boundary match of a node's title or any
alias; one Aho–Corasick automaton per subgraph finds every (also overlapping) name occurrence and a
boundary check keeps whole-word ones. Step rewards feed SAPO (:mod:`searchgym.core.advantages`).
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Optional

import gymnasium as gym

from ..core.arg_checks import check_number
from ..core.info import has_slots
from ..core.subgraph import Subgraph
from ..core.types import Task, Trajectory
from ..errors import InvalidArgumentError
from .base import Event, MissingTaskDataError, RewardShapingWrapper, event_trajectory

logger = logging.getLogger(__name__)


def answer_distances(subgraph: Subgraph) -> dict[str, int]:
    """Undirected BFS hop count from every node that can reach the answer node (answer: 0).

    Nodes that cannot reach the answer are absent (their contribution is 0).
    """
    adjacency: dict[str, set[str]] = {}
    for e in subgraph.edges():
        adjacency.setdefault(e.head, set()).add(e.tail)
        adjacency.setdefault(e.tail, set()).add(e.head)
    start = subgraph.path[-1]
    dist = {start: 0}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for nxt in adjacency.get(node, ()):
            if nxt not in dist:
                dist[nxt] = dist[node] + 1
                queue.append(nxt)
    return dist


def contribution(d: Optional[int], k: float = 2) -> float:
    """c(v) = k^(−d); ``None`` (unreachable) → 0."""
    if k <= 0:
        raise InvalidArgumentError(f"the decay factor k must be positive (paper: 2); got {k}")
    if d is None:
        return 0.0
    if d < 0:
        raise InvalidArgumentError(f"a graph distance cannot be negative; got {d}")
    return float(k) ** (-d)


def _is_word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


class EntityLinker:
    """Finds which subgraph nodes a text names (case-insensitive, whole words, title or alias)."""

    def __init__(self, subgraph: Subgraph):
        import ahocorasick

        self._automaton = ahocorasick.Automaton()
        owners: dict[str, set[str]] = {}
        for node_id, node in subgraph.nodes.items():
            for name in node.names:
                key = name.strip().lower()
                if key:
                    owners.setdefault(key, set()).add(node_id)
        for key, ids in owners.items():
            self._automaton.add_word(key, (len(key), tuple(sorted(ids))))
        self._empty = not owners
        if not self._empty:
            self._automaton.make_automaton()

    def link(self, text: str) -> set[str]:
        """Node ids named in ``text``."""
        if self._empty or not text:
            return set()
        low = text.lower()
        # lower() may change length for a few non-ASCII characters; then boundaries are read on
        # the lowered text itself, which is what the automaton matched against.
        found: set[str] = set()
        n = len(low)
        for end, (length, ids) in self._automaton.iter(low):
            start = end - length + 1
            if start > 0 and _is_word_char(low[start - 1]) and _is_word_char(low[start]):
                continue
            if end + 1 < n and _is_word_char(low[end + 1]) and _is_word_char(low[end]):
                continue
            found.update(ids)
        return found


class GDCRTracker:
    """Incremental GDCR over one trajectory: call :meth:`step` once per turn, in order."""

    def __init__(self, subgraph: Subgraph, k: float = 2):
        contribution(0, k)  # validates k
        self.k = k
        self.distances = answer_distances(subgraph)
        self.linker = _linker_for(subgraph)
        self.observed: set[str] = set()
        self.cited: set[str] = set()
        self.steps: list[float] = []

    def score(self, node_id: str) -> float:
        """c(v) for a node id."""
        return contribution(self.distances.get(node_id), self.k)

    def step(self, think: str, information: str) -> tuple[float, float]:
        """Process one turn (cite first, then retrieve); returns ``(r_cite, r_ret)``."""
        new_cited = (self.linker.link(think) & self.observed) - self.cited
        r_cite = float(sum(self.score(v) for v in new_cited))
        self.cited |= new_cited
        new_observed = self.linker.link(information) - self.observed
        r_ret = float(sum(self.score(v) for v in new_observed))
        self.observed |= new_observed
        self.steps.append(r_cite + r_ret)
        return r_cite, r_ret


_LINKERS: dict[str, tuple[Subgraph, EntityLinker]] = {}
_LINKER_CACHE_SIZE = 1024


def _linker_for(subgraph: Subgraph) -> EntityLinker:
    """One linker per subgraph object (cached by id, checked by identity)."""
    key = subgraph.id
    hit = _LINKERS.get(key)
    if hit is not None and hit[0] is subgraph:
        return hit[1]
    linker = EntityLinker(subgraph)
    if len(_LINKERS) >= _LINKER_CACHE_SIZE:
        _LINKERS.pop(next(iter(_LINKERS)))
    _LINKERS[key] = (subgraph, linker)
    return linker


def require_subgraph(task: Task) -> Subgraph:
    """The task's subgraph, or :class:`MissingTaskDataError` naming the task."""
    if task.subgraph is None:
        raise MissingTaskDataError(
            f"task {task.id!r} has no subgraph; GDCR needs the question's ER graph "
            "(use KG-grounded tasks with a Subgraph, or drop GraphDistanceReward)"
        )
    return task.subgraph


def gdcr_step_rewards(trajectory: Trajectory, subgraph: Optional[Subgraph] = None, k: float = 2) -> list[float]:
    """r_t for every turn of ``trajectory`` (Eq. 12); ``subgraph`` defaults to the task's."""
    tracker = GDCRTracker(subgraph if subgraph is not None else require_subgraph(trajectory.task), k)
    for turn in trajectory.turns:
        tracker.step(turn.think, turn.information)
    return list(tracker.steps)


class GraphDistanceReward(RewardShapingWrapper):
    """GDCR as a wrapper: per-step values while the episode runs, the sequence at the end.

    After each step, ``info["gdcr_step"]`` holds r_t of the turn just taken: a float for a
    single-role env, a list per slot (``None`` for slots that took no turn) for group/self-play envs.
    Solver events get ``gdcr_steps`` (the list r_1 … r_T) and ``gdcr_total`` (its sum) in their
    components, and their reward gains ``weight · gdcr_total`` (``weight`` defaults to 0: GDCR is a
    step signal for SAPO, :func:`~searchgym.wrappers.sapo_step_advantages`, not an outcome bonus).
    Proposer events are untouched. A task without a subgraph raises
    :class:`~searchgym.wrappers.MissingTaskDataError`.
    """

    name = "gdcr"
    advantage = "step"  # the trainer uses SAPO on the per-step rewards below
    step_rewards_key = "gdcr_steps"

    def __init__(self, env, k: float = 2, weight: float = 0.0):
        gym.utils.RecordConstructorArgs.__init__(self, k=k, weight=weight)  # gym.make(env.spec) rebuilds it
        super().__init__(env)
        check_number("k", k, hint="the decay factor, paper: 2")
        contribution(0, k)
        self.k = k
        self.weight = float(check_number("weight", weight, hint="0: GDCR is a step signal only"))
        self._trackers: dict[int, tuple[Trajectory, GDCRTracker]] = {}

    def check_task(self, task: Optional[Task]) -> None:
        """Every task must carry its subgraph."""
        if task is not None:
            require_subgraph(task)

    def on_reset(self, info: dict) -> None:
        """Forget the previous episode's trajectories."""
        self._trackers.clear()

    def _tracker(self, traj: Trajectory) -> GDCRTracker:
        hit = self._trackers.get(id(traj))
        if hit is None or hit[0] is not traj:
            hit = (traj, GDCRTracker(require_subgraph(traj.task), self.k))
            self._trackers[id(traj)] = hit
        return hit[1]

    def _advance(self, traj: Trajectory) -> Optional[float]:
        """Score turns not yet seen; returns the newest step's r_t or None if no new turn."""
        if traj.role != "solver":
            return None
        tracker = self._tracker(traj)
        last = None
        for turn in traj.turns[len(tracker.steps) :]:
            last = sum(tracker.step(turn.think, turn.information))
        return last

    def observe_step(self, info: dict) -> None:
        """Write this step's r_t into ``info["gdcr_step"]``."""
        if has_slots(info):
            info["gdcr_step"] = [self._advance(t) if t is not None else None for t in info["trajectories"]]
        elif info.get("trajectory") is not None:
            info["gdcr_step"] = self._advance(info["trajectory"])

    def shape_solver_group(self, events: list[Event], info: dict) -> None:
        """Attach the finished sequence and total to every solver event."""
        for ev in events:
            traj = event_trajectory(ev)
            self._advance(traj)
            steps = list(self._tracker(traj).steps)
            total = float(sum(steps))
            ev.set_reward(ev.reward + self.weight * total, gdcr_steps=steps, gdcr_total=total)
