"""``KGNavigate-v0``: a discrete-action, numeric-observation view of the world for classic RL.

The same tasks the text envs use — a subgraph's target path ``v0 -r1-> v1 … -rK-> vK`` from the
construction pool — become a navigation game that stable-baselines3 PPO/DQN can train on with no
LLM. The "question" the agent holds is the path's relation sequence ``(r1 … rK)`` (what a
multi-hop question asks, without the words); the agent starts at the seed ``v0`` and must stop
on the answer ``vK``.

Actions (``Discrete(N + 2)``, ``N = max_candidates``, default 8):

* ``0 … N-1`` — follow candidate edge ``i`` of the current node (a padding slot stays put but still
  counts as a move, so it leaves the target path);
* ``N`` — *search*: BM25 over the corpus with ``"<current title> <next relation label>"`` and jump
  to the entity of the best hit other than the current node (stay if there is none);
* ``N + 1`` — *answer* with the current node; ends the episode.

Candidates: the current node's out-edges (plus in-edges with ``inverse_edges=True``). The ``N``
most relevant are kept (relation equals the expected next relation, then label-word overlap,
then a stable id order). ``candidate_order="relevance"`` (default) shows them in that order;
``"stable"`` shows them in a task-independent order (relation, then target), a harder variant in
which the agent must find the right slot from the features alone.

Observation (``Box[0, 1]``, ``N × 7 + 7`` float32): per slot — valid, relation matches the
expected next relation (and direction), label-word Jaccard with it, forward direction, target is
a literal, target already visited, log-degree of the target; global — hops taken, hops remaining,
"no hops remaining", current node's type equals the answer type, steps used, some slot matches,
last action was a search (all scaled to [0, 1] by ``max_hops`` / ``max_steps``).

Reward: ``+1`` for answering on the answer node (title match, like exact-match judging), ``0`` for a
wrong answer, ``-step_cost`` (default 0.01) for every non-answer step; ``max_steps`` (default
``max_hops + 3``) truncates. ``progress_reward`` (default 0.5) adds a dense progress bonus — the
step-level analogue of GDCR's graph-distance reward: each move along the target path (from
``v_i`` to ``v_{i+1}`` having taken exactly the path's first ``i`` hops) earns
``progress_reward / K``; any other move leaves the path for good and earns nothing more. The bonus
is never taken back (taking it back made "never step onto the path" a local optimum PPO got
stuck in), so a solved episode returns ``1 + progress_reward − steps × step_cost`` and the best
policy is unchanged: walk the path, then answer. Set it to 0 for the pure outcome reward. ``info`` has ``success``,
``task_id``, ``hops``, ``node`` (current
title) and ``target``.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Optional, Sequence

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from ..construction.extract import answer_type
from ..core.arg_checks import check_choice, check_count, check_flag, check_number
from ..core.info import KIND_NAVIGATE
from ..errors import InvalidArgumentError, InvalidTypeError, SearchGymRuntimeError
from . import resources

logger = logging.getLogger(__name__)

SLOT_FEATURES = 7
GLOBAL_FEATURES = 7
#: the most candidate slots an observation holds (its size is ``max_candidates * SLOT_FEATURES + GLOBAL_FEATURES``
#: floats, allocated at construction)
MAX_CANDIDATES = 65_536
_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class NavTask:
    """A resolved navigation task: node codes along the path (world tail codes: entity index
    ``>= 0``, literal ``< 0``), relation rows, directions, and the answer's title and type."""

    id: str
    codes: tuple[int, ...]
    relations: tuple[int, ...]
    forward: tuple[bool, ...]
    answer: str
    answer_type: str

    @property
    def hops(self) -> int:
        """Number of edges on the path."""
        return len(self.relations)


def resolve_subgraph(world, subgraph, rel_index: dict[str, int]) -> NavTask:
    """Map a :class:`~searchgym.core.subgraph.Subgraph`'s target path onto world codes.

    Raises ValueError naming the hop when the path does not exist in ``world`` (a pool built on
    another world).
    """
    T = world.triple_array
    try:
        cur = world.entity_index(subgraph.path[0])
    except KeyError:
        raise InvalidArgumentError(
            f"subgraph {subgraph.id}: seed {subgraph.path[0]!r} is not in world {world.name!r}"
        ) from None
    codes, rels = [cur], []
    for i, rid in enumerate(subgraph.relation_ids):
        nxt_id, fwd = subgraph.path[i + 1], subgraph.forward[i]
        if rid not in rel_index:
            raise InvalidArgumentError(
                f"subgraph {subgraph.id}: relation {rid!r} (hop {i + 1}) is not in world {world.name!r}"
            )
        r = rel_index[rid]
        node = subgraph.nodes[nxt_id]
        found = None
        if cur >= 0 and fwd:
            for row in world.out_rows(cur):
                if T[row, 1] != r:
                    continue
                tail = int(T[row, 2])
                if node.is_literal:
                    if tail < 0 and world.node_at(tail).title == node.title:
                        found = tail
                        break
                elif tail >= 0 and world.entity_at(tail).id == nxt_id:
                    found = tail
                    break
        elif cur >= 0 and not node.is_literal:
            for row in world.in_rows(cur):
                if T[row, 1] == r and world.entity_at(int(T[row, 0])).id == nxt_id:
                    found = int(T[row, 0])
                    break
        if found is None:
            raise InvalidArgumentError(
                f"subgraph {subgraph.id}: hop {i + 1} ({subgraph.relations[i]!r} to {node.title!r}) "
                f"is not an edge of world {world.name!r}; was the pool built on another world?"
            )
        codes.append(found)
        rels.append(r)
        cur = found
    return NavTask(
        subgraph.id, tuple(codes), tuple(rels), tuple(subgraph.forward), subgraph.answer, subgraph.answer_type
    )


def _label_words(label: str) -> frozenset:
    return frozenset(_WORD.findall(label.lower())) - {"of", "the", "in", "a", "an", "by", "for", "to"}


class KGNavigateEnv(gym.Env):
    """Navigate the knowledge graph from a task's seed to its answer (see the module docstring).

    ``world`` is a :class:`~searchgym.world.World` or a saved world's path (``gymnasium.make``
    deep-copies its kwargs, so pass a path there) and defaults to
    :func:`searchgym.world.synthetic.default_world`; ``tasks`` is a list of
    :class:`~searchgym.core.subgraph.Subgraph` (default: ``build_pool(world, num_tasks,
    seed=task_seed)``). ``search`` is ``"bm25"`` (default; index built on the first search) or
    ``"none"`` (the search action just stays). ``retriever`` may be any
    :class:`~searchgym.retrieval.base.Retriever` over the world's documents.
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}

    def __init__(
        self,
        world=None,
        tasks: Optional[Sequence] = None,
        *,
        num_tasks: int = 300,
        task_seed: int = 0,
        max_candidates: int = 8,
        max_hops: Optional[int] = None,
        max_steps: Optional[int] = None,
        step_cost: float = 0.01,
        progress_reward: float = 0.5,
        search: str = "bm25",
        retriever=None,
        inverse_edges: bool = False,
        candidate_order: str = "relevance",
        render_mode: Optional[str] = None,
    ) -> None:
        max_candidates = check_count("max_candidates", max_candidates, most=MAX_CANDIDATES)
        check_choice("search", search, ("bm25", "none"))
        check_choice("candidate_order", candidate_order, ("relevance", "stable"))
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise InvalidArgumentError(
                f"render_mode must be None or one of {self.metadata['render_modes']}, got {render_mode!r}"
            )
        step_cost = check_number("step_cost", step_cost, least=0)
        progress_reward = check_number("progress_reward", progress_reward, least=0)
        max_hops = check_count("max_hops", max_hops, optional=True, hint="None: the longest task's hops")
        max_steps = check_count("max_steps", max_steps, optional=True, hint="None: max_hops + 3")
        inverse_edges = check_flag("inverse_edges", inverse_edges)
        if tasks is None:
            num_tasks = check_count("num_tasks", num_tasks)
            task_seed = check_count("task_seed", task_seed, least=0)
        self.world = world = resources.resolve_world(world)
        self.render_mode = render_mode
        self.N = max_candidates
        self.step_cost = float(step_cost)
        self.progress_reward = float(progress_reward)
        self.search_mode = search
        self._retriever = retriever
        self.inverse_edges = inverse_edges
        self.candidate_order = candidate_order
        relations = world.relations()
        self._rel_index = {r.id: i for i, r in enumerate(relations)}
        self._rel_labels = [r.label for r in relations]
        self._rel_words = [_label_words(lab) for lab in self._rel_labels]
        if tasks is None:
            from ..construction.pool import build_pool

            tasks = build_pool(world, num_tasks, seed=task_seed, progress=False).subgraphs
        resolved = []
        for sg in tasks:
            if not inverse_edges and not all(sg.forward):
                raise InvalidArgumentError(
                    f"subgraph {sg.id} walks an edge backwards; pass inverse_edges=True to navigate it"
                )
            resolved.append(resolve_subgraph(world, sg, self._rel_index))
        if not resolved:
            raise InvalidArgumentError("KGNavigateEnv needs at least one task (the subgraph pool is empty)")
        self.tasks = resolved
        self.max_hops = max_hops or max(t.hops for t in resolved)
        if any(t.hops > self.max_hops for t in resolved):
            raise InvalidArgumentError(f"a task has more than max_hops={self.max_hops} hops")
        self.max_steps = max_steps or self.max_hops + 3
        T = world.triple_array
        n = world.num_entities
        deg = np.bincount(T[:, 0], minlength=n) if len(T) else np.zeros(n, np.int64)
        ent_tails = T[T[:, 2] >= 0, 2] if len(T) else np.zeros(0, np.int64)
        deg = deg + np.bincount(ent_tails, minlength=n)
        self._deg = deg
        self._log_max_deg = float(np.log1p(max(1, int(deg.max(initial=1)))))
        self._types = [world.entity_at(i).type for i in range(n)]
        self._jaccard_cache: dict[int, np.ndarray] = {}

        self.action_space = spaces.Discrete(self.N + 2)
        self._obs_size = self.N * SLOT_FEATURES + GLOBAL_FEATURES
        self.observation_space = spaces.Box(0.0, 1.0, shape=(self._obs_size,), dtype=np.float32)
        self.task: Optional[NavTask] = None
        self._node = 0
        self._hops = 0
        self._steps = 0
        self._visited: set[int] = set()
        self._last_search = False
        self._on_path = True
        self._cands = np.zeros((0, 3), np.int64)
        self._ended = False
        self._last_obs = np.zeros(self._obs_size, np.float32)

    # ------------------------------------------------------------------ helpers
    @property
    def search_action(self) -> int:
        """Index of the search action."""
        return self.N

    @property
    def answer_action(self) -> int:
        """Index of the answer action."""
        return self.N + 1

    def _expected(self) -> tuple[int, bool]:
        """(relation row, forward) the question asks next, or (-1, True) when no hops remain."""
        assert self.task is not None
        if self._hops < self.task.hops:
            return self.task.relations[self._hops], self.task.forward[self._hops]
        return -1, True

    def _jaccard(self, rel: int) -> np.ndarray:
        if rel not in self._jaccard_cache:
            a = self._rel_words[rel]
            self._jaccard_cache[rel] = np.array(
                [len(a & b) / len(a | b) if (a | b) else 0.0 for b in self._rel_words], dtype=np.float32
            )
        return self._jaccard_cache[rel]

    def _candidates(self) -> np.ndarray:
        """``(k, 3)`` rows of (relation, target code, forward) for the shown slots, k <= N."""
        if self._node < 0:
            return np.zeros((0, 3), np.int64)
        T = self.world.triple_array
        out = self.world.out_rows(self._node)
        parts = [np.stack([T[out, 1], T[out, 2], np.ones(len(out), np.int64)], axis=1)]
        if self.inverse_edges:
            inn = self.world.in_rows(self._node)
            parts.append(np.stack([T[inn, 1], T[inn, 0], np.zeros(len(inn), np.int64)], axis=1))
        cands = np.concatenate(parts)
        rel, fwd = self._expected()
        match = (cands[:, 0] == rel) & (cands[:, 2] == int(fwd))
        overlap = self._jaccard(rel)[cands[:, 0]] if rel >= 0 else np.zeros(len(cands), np.float32)
        order = np.lexsort((cands[:, 2], cands[:, 1], cands[:, 0], -overlap, -match.astype(np.int64)))
        cands = cands[order[: self.N]]
        if self.candidate_order == "stable":
            cands = cands[np.lexsort((cands[:, 2], cands[:, 1], cands[:, 0]))]  # task-independent order
        return cands

    def _potential(self) -> float:
        """Shaping potential: progress along the target path while still on it."""
        assert self.task is not None
        if not self._on_path or self._hops > self.task.hops:
            return 0.0
        return self.progress_reward * self._hops / self.task.hops

    def _title(self, code: int) -> str:
        return self.world.node_at(code).title

    def _obs(self) -> np.ndarray:
        assert self.task is not None
        self._cands = self._candidates()
        obs = np.zeros(self._obs_size, np.float32)
        rel, fwd = self._expected()
        k = len(self._cands)
        any_match = 0.0
        if k:
            slots = obs[: self.N * SLOT_FEATURES].reshape(self.N, SLOT_FEATURES)
            r, tgt, f = self._cands[:, 0], self._cands[:, 1], self._cands[:, 2]
            match = ((r == rel) & (f == int(fwd))).astype(np.float32)
            any_match = float(match.max())
            slots[:k, 0] = 1.0
            slots[:k, 1] = match
            slots[:k, 2] = self._jaccard(rel)[r] if rel >= 0 else 0.0
            slots[:k, 3] = f
            slots[:k, 4] = tgt < 0
            slots[:k, 5] = [float(int(t) in self._visited) for t in tgt]
            ent = np.where(tgt >= 0, tgt, 0)
            slots[:k, 6] = np.where(tgt >= 0, np.log1p(self._deg[ent]) / self._log_max_deg, 0.0)
        g = obs[self.N * SLOT_FEATURES :]
        remaining = max(0, self.task.hops - self._hops)
        g[0] = min(1.0, self._hops / self.max_hops)
        g[1] = remaining / self.max_hops
        g[2] = float(remaining == 0)
        g[3] = float(self._node_type(self._node) == self.task.answer_type)
        g[4] = min(1.0, self._steps / self.max_steps)
        g[5] = any_match
        g[6] = float(self._last_search)
        return np.clip(obs, 0.0, 1.0)

    def _node_type(self, code: int) -> str:
        """Answer type of a node, with the construction pool's mapping."""
        if code >= 0:
            return answer_type(self._types[code], is_literal=False)
        return answer_type(self.world.literal_at(code).kind, is_literal=True)

    def _search(self) -> int:
        """The node a search from the current node jumps to (the current node if none)."""
        if self.search_mode == "none" or self._node < 0:
            return self._node
        if self._retriever is None:
            self._retriever = resources.default_retriever(self.world)
        rel, _ = self._expected()
        query = self._title(self._node) + (" " + self._rel_labels[rel] if rel >= 0 else "")
        for hit in self._retriever.search(query, 3):
            doc = self.world.document(hit.doc_id)
            if doc.entity is not None:
                idx = self.world.entity_index(doc.entity)
                if idx != self._node:
                    return idx
        return self._node

    def _info(self, success: bool = False) -> dict:
        assert self.task is not None
        return {
            "kind": KIND_NAVIGATE,
            "success": success,
            "task_id": self.task.id,
            "hops": self.task.hops,
            "node": self._title(self._node),
            "target": self.task.answer,
            "steps": self._steps,
        }

    def __deepcopy__(self, memo: dict) -> "KGNavigateEnv":
        """An independent env in the same state (RNG, position, episode) sharing this one's world,
        retriever, tasks and read-only per-world tables; ``pickle`` works too."""
        shared = [
            self.world,
            self._retriever,
            self.tasks,
            self._types,
            self._deg,
            self._rel_index,
            self._rel_labels,
            self._rel_words,
            self._jaccard_cache,
        ]
        return resources.deepcopy_sharing(self, memo, shared)

    # ------------------------------------------------------------------ gym API
    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        """Start an episode on a task drawn with the env's RNG, or ``options={"task_index": i}``."""
        super().reset(seed=seed)
        options = options or {}
        if "task_index" in options:
            i = int(options["task_index"])
            if not 0 <= i < len(self.tasks):
                raise InvalidArgumentError(f"task_index {i} is outside 0..{len(self.tasks) - 1}")
        else:
            i = int(self.np_random.integers(len(self.tasks)))
        self.task = self.tasks[i]
        self._node = self.task.codes[0]
        self._hops = 0
        self._steps = 0
        self._visited = {self._node}
        self._last_search = False
        self._on_path = True
        self._ended = False
        return self._observe(), self._info()

    def step(self, action):
        """Apply one discrete action; see the module docstring for the dynamics and reward."""
        if self.task is None:
            raise SearchGymRuntimeError("call reset() before step()")
        if self._ended:
            raise SearchGymRuntimeError("the episode has ended; call reset() to start a new one")
        a = self._check_action(action)
        self._steps += 1
        self._last_search = False
        if a == self.answer_action:
            from ..scoring.judge import exact_match

            success = exact_match(self._title(self._node), [self.task.answer])
            self._ended = True
            return self._observe(), float(success), True, False, self._info(success)
        before = self._potential()
        if a == self.search_action:
            self._node = self._search()
            self._last_search = True
        elif a < len(self._cands):
            self._node = int(self._cands[a, 1])
        self._hops += 1  # every non-answer step is a move; a padding slot is a move to nowhere
        self._visited.add(self._node)
        self._on_path = self._on_path and self._hops <= self.task.hops and self._node == self.task.codes[self._hops]
        truncated = self._steps >= self.max_steps
        self._ended = truncated
        reward = max(0.0, self._potential() - before) - self.step_cost  # progress is paid once, never taken back
        return self._observe(), reward, False, truncated, self._info()

    def _check_action(self, action) -> int:
        """The action as an int; only integers of ``Discrete(N + 2)`` (Python or numpy, a 0-d integer
        array included) are actions: ``1.7``, ``"3"`` and ``True`` raise like the text envs do."""
        if isinstance(action, (bool, np.bool_)) or not (
            isinstance(action, (int, np.integer))
            or (isinstance(action, np.ndarray) and action.shape == () and action.dtype.kind in "iu")
        ):
            raise InvalidTypeError(
                f"an action must be an integer in 0..{self.N + 1} (Discrete({self.N + 2})), "
                f"got {type(action).__name__} {action!r}"
            )
        if not self.action_space.contains(action):
            raise InvalidArgumentError(f"action {action!r} is outside Discrete({self.N + 2})")
        return int(action)

    def _observe(self) -> np.ndarray:
        """The observation of the current state (kept for ``render_mode="rgb_array"``)."""
        self._last_obs = self._obs()
        return self._last_obs

    def render(self):
        """``"ansi"``: the task's relation sequence, progress and the current candidates.
        ``"rgb_array"``: the observation as a ``uint8`` image, one row of 8×8-pixel cells per
        candidate slot (features as columns) plus one row of global features, grey level = value."""
        if self.render_mode == "rgb_array":
            return self._render_rgb()
        if self.task is None:
            return "(not reset)"
        rels = " -> ".join(self._rel_labels[r] for r in self.task.relations)
        lines = [
            f"task {self.task.id}: {self._title(self.task.codes[0])} | {rels} | target {self.task.answer}",
            f"step {self._steps}, hop {self._hops}, at {self._title(self._node)}",
        ]
        for i, (r, t, f) in enumerate(self._cands):
            lines.append(f"  [{i}] {'-' if f else '<-'}{self._rel_labels[int(r)]}-> {self._title(int(t))}")
        return "\n".join(lines)

    def _render_rgb(self) -> np.ndarray:
        cell = 8
        width = max(SLOT_FEATURES, GLOBAL_FEATURES)
        grid = np.zeros((self.N + 1, width), np.float32)
        grid[: self.N, :SLOT_FEATURES] = self._last_obs[: self.N * SLOT_FEATURES].reshape(self.N, SLOT_FEATURES)
        grid[self.N, :GLOBAL_FEATURES] = self._last_obs[self.N * SLOT_FEATURES :]
        img = np.kron(grid, np.ones((cell, cell), np.float32))
        return np.repeat((img * 255).round().astype(np.uint8)[:, :, None], 3, axis=2)

    # ------------------------------------------------------------------ baselines
    def oracle_action(self) -> int:
        """The action a perfect reader takes: first matching slot, answer when no hops remain.

        Used for the upper bound in ``examples/sb3_ppo.py``; with several matching edges it picks
        the first shown (ties make even the oracle fail sometimes).
        """
        assert self.task is not None
        if self._hops >= self.task.hops:
            return self.answer_action
        rel, fwd = self._expected()
        for i, (r, _, f) in enumerate(self._cands):
            if r == rel and f == int(fwd):
                return i
        return self.answer_action


def evaluate_policy(env: KGNavigateEnv, policy, episodes: int = 200, seed: int = 0) -> float:
    """Success rate of ``policy(obs, env) -> action`` over ``episodes`` seeded resets (seed+i)."""
    wins = 0
    for i in range(episodes):
        obs, info = env.reset(seed=seed + i)
        done = False
        while not done:
            obs, _, term, trunc, info = env.step(policy(obs, env))
            done = term or trunc
        wins += int(info["success"])
    return wins / episodes


__all__ = ["KGNavigateEnv", "NavTask", "resolve_subgraph", "evaluate_policy", "SLOT_FEATURES", "GLOBAL_FEATURES"]
