"""Common ground of the text envs: resources, seeding, task picking, rollout construction, export, rendering.

:class:`TextEnvBase` holds what every text env needs — the world, a
:class:`~searchgym.envs.episode.SearchEngine` (retriever + optional KG tool), the answer judge,
the rollout limits, the seeded ``random.Random`` every random choice is drawn from, and an
optional :class:`~searchgym.envs.export.TrajectoryWriter` — so the solver, proposer, group and
self-play envs only describe their episode logic.

Export (``export_path=``): an env that is not wrapped writes each finished game itself. Reward wrappers
change the events after the env, so a wrapped env hands its writer to the
:class:`~searchgym.wrappers.recording.RecordGames` wrapper outside them (:meth:`TextEnvBase.hand_over_export`;
``wrap_rewards`` does it), and the file holds the events the caller sees.
"""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence, TypeVar, Union

import gymnasium as gym

from ..core.arg_checks import check_choice, check_count, check_flag
from ..core.prompts import check_protocol, render_proposer, render_solver
from ..core.rng_state import numpy_generator_from_state, random_state_from_data
from ..core.types import Task, Trajectory
from ..errors import InvalidArgumentError, InvalidTypeError
from ..retrieval.base import DEFAULT_TOP_K, Retriever
from ..tasks.sources import JsonlTaskSource, ListTaskSource, SubgraphTaskSource, TaskSource
from ..world import World
from . import resources
from .episode import (
    DEFAULT_DOC_MAX_CHARS,
    DEFAULT_MAX_ACTION_CHARS,
    DEFAULT_MAX_TURNS,
    TOO_MANY_ANSWERS,
    Rollout,
    SearchEngine,
)
from .export import GameRecorder, TrajectoryWriter
from .function_calling import tool_schemas

logger = logging.getLogger(__name__)

__all__ = ["TextEnvBase", "resolve_tasks", "pick_task", "proposer_search_count", "DEFAULT_PROPOSER_SEARCHES"]

DEFAULT_PROPOSER_SEARCHES = 3  # n shown to the Proposer when the task has no subgraph


def proposer_search_count(task: Task) -> int:
    """The search count ``n`` the Proposer's prompt asks for: the task's hop count, else the default."""
    return task.hops or DEFAULT_PROPOSER_SEARCHES


InfoT = TypeVar("InfoT", bound=Mapping[str, Any])


def resolve_tasks(
    world: World,
    tasks: Any,
    pool: Any = None,
    order: str = "curriculum",
    seed: int = 0,
    hops: Optional[Sequence[int]] = None,
) -> TaskSource:
    """A task source: given; a JSONL path → :class:`JsonlTaskSource`; a list of Tasks →
    :class:`ListTaskSource`; ``None`` → :class:`SubgraphTaskSource` over ``pool`` (default pool; ``hops``:
    the training-side pool of those path lengths, as :func:`~searchgym.envs.resources.resolve_pool`)."""
    if tasks is None:
        return SubgraphTaskSource(resources.resolve_pool(world, pool, order, seed, hops=hops), world)
    if isinstance(tasks, (str, Path)):
        return JsonlTaskSource(tasks)
    if isinstance(tasks, (list, tuple)):
        return ListTaskSource(tasks)
    if isinstance(tasks, TaskSource):
        return tasks
    raise InvalidTypeError(
        f"tasks must be a TaskSource, a JSONL path, a list of Task or None, got {type(tasks).__name__}"
    )


def pick_task(tasks: TaskSource, options: Optional[dict], rng: random.Random) -> Task:
    """The task of an episode: ``options["task"]`` (a Task), else task ``options["index"]`` of ``tasks``,
    else a draw from ``tasks`` with ``rng``."""
    options = options or {}
    if options.get("task") is not None:
        task = options["task"]
        if not isinstance(task, Task):
            raise InvalidTypeError(f"options['task'] must be a searchgym Task, got {type(task).__name__}")
        return task
    if options.get("index") is not None:
        return tasks[int(options["index"]) % len(tasks)]
    return tasks.sample(rng)


class TextEnvBase(gym.Env):
    """Shared constructor arguments and helpers of the searchgym text envs.

    ``world``: a :class:`World`, a saved-world path, or ``None`` for the default synthetic world.
    ``retriever``: a :class:`Retriever`, an ``http://`` URL of a retrieval server, a backend name or
    ``None`` (BM25 over the world, cached). ``kg_tool``: expose the KG look-up to JSON searches (and
    mention it in the Solver prompt). ``judge``: answer judge (default exact match). ``max_turns``,
    ``top_k``, ``doc_max_chars`` (per-document cap in observations), ``max_action_chars`` (longer
    agent turns are cut). ``export_path``: write every finished game as one JSONL line (a path, or a
    :class:`TrajectoryWriter` to share; once reward wrappers are applied the outermost
    :class:`~searchgym.wrappers.recording.RecordGames` writes it, see the module docstring).
    ``observation_layout``: ``"searchgym"`` (default) or ``"search-r1"`` (Search-R1's exact
    ``\\n\\n<information>Doc 1(Title: ...) ...`` text). ``protocol``: ``"tags"`` (default; the agent
    writes ``<search>``/``<answer>`` tags, :mod:`.protocol`) or ``"function_calling"`` (the agent calls
    the tools of :meth:`tool_schemas` in assistant messages and gets ``role: tool`` messages back,
    :mod:`.function_calling`). ``too_many_answers``: what a rollout with more than 10 ``<answer>`` tags
    gets — ``"invalid"`` (default, docs/game.md: against answer spraying) or ``"ssp"`` (SSP's code: a
    correct answer earns 0.25). ``proposer_evidence``: the Proposer prompt also asks for a verbatim
    ``<evidence>`` span (EVE).
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(
        self,
        world: Union[World, str, Path, None] = None,
        *,
        retriever: Union[Retriever, str, None] = None,
        judge: Any = None,
        kg_tool: Any = False,
        max_turns: int = DEFAULT_MAX_TURNS,
        top_k: int = DEFAULT_TOP_K,
        doc_max_chars: Optional[int] = DEFAULT_DOC_MAX_CHARS,
        max_action_chars: int = DEFAULT_MAX_ACTION_CHARS,
        export_path: Union[str, Path, TrajectoryWriter, None] = None,
        render_mode: Optional[str] = None,
        observation_layout: str = "searchgym",
        protocol: str = "tags",
        too_many_answers: str = "invalid",
        proposer_evidence: bool = False,
    ) -> None:
        check_choice("too_many_answers", too_many_answers, TOO_MANY_ANSWERS)
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise InvalidArgumentError(
                f"render_mode must be None or one of {self.metadata['render_modes']}, got {render_mode!r}"
            )
        max_turns = check_count("max_turns", max_turns)
        top_k = check_count("top_k", top_k)
        doc_max_chars = check_count("doc_max_chars", doc_max_chars, optional=True, hint="None: no cap")
        max_action_chars = check_count("max_action_chars", max_action_chars)
        proposer_evidence = check_flag("proposer_evidence", proposer_evidence)
        self.render_mode = render_mode
        self.protocol = check_protocol(protocol)
        self.world = resources.resolve_world(world)
        self.retriever = resources.resolve_retriever(self.world, retriever)
        self.kg = resources.resolve_kg(self.world, kg_tool)
        self.engine = SearchEngine(
            self.retriever, self.kg, top_k=top_k, doc_max_chars=doc_max_chars, layout=observation_layout
        )
        self.judge = resources.resolve_judge(judge)
        self.max_turns = max_turns
        self.max_action_chars = max_action_chars
        # a TrajectoryWriter is shared as is (clones of one env export into one file, one lock)
        self.writer = (
            export_path
            if isinstance(export_path, TrajectoryWriter)
            else (TrajectoryWriter(export_path) if export_path is not None else None)
        )
        self._recorder = GameRecorder(self.writer) if self.writer is not None else None
        self.games_finished = 0
        self._rng = random.Random(0)
        self.too_many_answers = too_many_answers
        self.proposer_evidence = bool(proposer_evidence)
        self._limits = {
            "max_turns": max_turns,
            "top_k": top_k,
            "doc_max_chars": doc_max_chars,
            "max_action_chars": max_action_chars,
            "render_mode": render_mode,
            "observation_layout": observation_layout,
            "protocol": protocol,
            "too_many_answers": too_many_answers,
            "proposer_evidence": bool(proposer_evidence),
        }

    def _shared_resources(self) -> list:
        """Read-only resources a deep copy references instead of copying (task sources and pools
        are read-only: draws use the env's own RNG)."""
        return [
            self.world,
            self.retriever,
            self.kg,
            self.judge,
            self.writer,
            getattr(self, "tasks", None),
            getattr(self, "pool", None),
        ]

    def __deepcopy__(self, memo: dict) -> "TextEnvBase":
        """An independent env in the same state (RNGs, rollouts, replay buffer, cursor) that shares
        this one's world, index, KG tool, judge and export writer: it continues exactly like the
        original for the same actions. ``pickle`` works too (cached resources re-attach on load)."""
        return resources.deepcopy_sharing(self, memo, self._shared_resources())

    def shared_kwargs(self) -> dict:
        """Constructor arguments that make a sibling env share this one's world, index, KG tool and
        judge, and export into the same file through the same writer (so every clone of a trainer's batch
        exports its games, not only the first)."""
        return {
            "retriever": self.retriever,
            "judge": self.judge,
            "kg_tool": self.kg if self.kg is not None else False,
            "export_path": self.writer,
            **self._limits,
        }

    # ------------------------------------------------------------- export
    @property
    def records_games(self) -> bool:
        """Whether this env writes its finished games itself (made with ``export_path=`` and not handed over)."""
        return self._recorder is not None

    def hand_over_export(self) -> Optional[TrajectoryWriter]:
        """Stop writing finished games here and return the writer (``None`` without ``export_path=``), for the
        :class:`~searchgym.wrappers.recording.RecordGames` wrapper that writes them outside the reward wrappers."""
        self._recorder = None
        return self.writer

    def _record(self, info: InfoT, *, reset: bool = False, done: bool = False) -> InfoT:
        """Pass a reset's or step's ``info`` to this env's own recorder (when it records itself); returns it."""
        if self._recorder is not None:
            if reset:
                self._recorder.start()
            else:
                self._recorder.observe(info, done)
        return info

    # ------------------------------------------------------------- checkpointing
    def state_dict(self) -> dict:
        """Plain-data (JSON-serialisable) state that continues the env's game stream after
        :meth:`load_state_dict` (RNGs, finished-game count; subclasses add replay buffer, noise
        window, pool cursor). Tuples come back as lists after JSON; loading accepts both."""
        return {
            "np_random": self._np_random.bit_generator.state if self._np_random is not None else None,
            "rng": self._rng.getstate(),
            "games_finished": self.games_finished,
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` output (the episode in progress is not restored: call reset)."""
        if state.get("np_random") is not None:
            self._np_random = numpy_generator_from_state(state["np_random"])
        self._rng.setstate(random_state_from_data(state["rng"]))
        self.games_finished = int(state["games_finished"])

    # ------------------------------------------------------------- helpers
    def _reseed(self, seed: Optional[int]) -> None:
        """Seed ``np_random`` (gymnasium) and derive this episode's ``random.Random`` from it."""
        super().reset(seed=seed)
        self._rng = random.Random(int(self.np_random.integers(0, 2**63 - 1)))

    def tool_schemas(self, role: str = "solver") -> list[dict]:
        """The JSON tool schemas offered to ``role`` in the function-calling protocol (``search``,
        ``kg_lookup`` when the KG tool is on, ``answer`` for the Solver); render prompts with
        ``tokenizer.apply_chat_template(messages, tools=env.tool_schemas())``."""
        return tool_schemas(kg=self.kg is not None, answer=role == "solver")

    def _rollout(self, role: str, task: Task, prompt: str) -> Rollout:
        return Rollout(
            role,  # type: ignore[arg-type]
            task,
            prompt,
            max_turns=self.max_turns,
            max_action_chars=self.max_action_chars,
            protocol=self.protocol,
            kg=self.kg is not None,
            too_many_answers=self.too_many_answers,
        )

    def start_solver_rollout(self, task: Task) -> Rollout:
        """A Solver rollout; a task's ``metadata["solver_prompt"]`` (e.g. a Search-R1 dataset's own
        prompt text) replaces the rendered Solver prompt."""
        prompt = task.metadata.get("solver_prompt") or render_solver(
            task.question, kg_tool=self.kg is not None, protocol=self.protocol
        )
        return self._rollout("solver", task, prompt)

    def _proposer_rollout(self, task: Task, mode: str) -> Rollout:
        n = proposer_search_count(task)
        subgraph_text = task.subgraph.describe() if (mode == "kg" and task.subgraph is not None) else None
        if mode == "kg" and subgraph_text is None:
            raise InvalidArgumentError(
                f"task {task.id!r} has no subgraph; the KG-grounded proposer needs one (or use mode='vanilla')"
            )
        return self._rollout(
            "proposer",
            task,
            render_proposer(
                task.answer,
                n,
                subgraph_text=subgraph_text,
                evidence=self.proposer_evidence,
                protocol=self.protocol,
            ),
        )

    def _render_trajectories(self) -> list[Trajectory]:
        return []

    def render(self) -> Optional[str]:
        """``"ansi"``: the full text of the live rollout(s) (prompt, agent turns, env insertions)."""
        if self.render_mode != "ansi":
            return None
        parts = []
        for i, t in enumerate(self._render_trajectories()):
            parts.append(f"=== {t.role} slot {i} ===\n{t.text}")
        return "\n".join(parts)

    def close(self) -> None:
        """Close the export file (the shared world, pool and index stay cached)."""
        if self.writer is not None:
            self.writer.close()
        super().close()
