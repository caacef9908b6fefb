"""``KGSelfPlay-v0``: the full Search Self-Play game, KG-grounded (SSP §3, kg-paths-wcr §3.2).

One game = one episode:

1. **Proposer phase** (``role`` 0, only slot 0 active): the next subgraph of the pool (curriculum
   order) is the task; the Proposer searches and emits ``<question>`` (KG-grounded prompt by
   default, ``proposer_mode="vanilla"`` for SSP's answer-only prompt).
2. **Verification** (on the step the Proposer finishes): rule filters + RAG verification with
   4 noise documents; fails closed. Driven alone, the env draws them from its ``noise_window``
   (default 4) most recent proposer rollouts, so its first game has none; under the trainer they
   come from the other Proposer rollouts of the same batch, as in SSP
   (:class:`~searchgym.envs.proposer.BatchNoise`). A valid question is stored in the replay buffer. An invalid one
   gets the Proposer's
   reward event **now** (reward 0, ``components["valid"] = 0``; never negative) and the Solvers get
   a question from the :class:`~searchgym.envs.replay.ReplayBuffer` instead (``info["replay"] =
   "replayed"``), or — when the buffer is empty — the *dummy task*: the subgraph's own template question
   (:func:`~searchgym.construction.question_templates.path_question`), a real answerable question
   (``info["replay"] = "dummy"``). The Proposer's own question: ``info["replay"] = "proposed"``
   (:data:`~searchgym.core.info.ReplaySource`).
3. **Solver phase** (``role`` 1, all G = ``group_size`` slots active): G rollouts of that question
   stepped together. On the step the last one finishes, all G solver events (c_i ∈ {0, 1}) arrive
   together with — for a valid question — the Proposer's event ``R_p = 1 − mean_i c_i``.

The scalar reward of a step is the sum of that step's events (Proposer and Solver rewards both
count; read ``info["rewards"]`` to train each role on its own events). Driven alone, the env's
replay buffer is cleared every ``replay_reset_every`` games (default 10); the trainer instead shares
one buffer across its env clones and clears it every ``replay_reset_steps`` training steps (SSP).

**Solver-only games** (``solver_only_hops``, or ``reset(options={"solver_only": True})``): the game has no
Proposer phase; it starts in the Solver phase with the subgraph's own template question
(``info["replay"] = "solver_only"``, ``info["proposer"] = None``) and reports only the G Solver events. They
give the Solvers practice on hop counts the Proposer is not trained to write (an ablation, off by default:
docs/fidelity.md).

Seeding: ``reset(seed=s)`` plays subgraph ``s mod len(pool)`` and seeds every random choice of the
game; ``reset()`` without a seed moves to the next subgraph in order.
"""

from __future__ import annotations

import copy
import logging
from typing import Any, Optional, Sequence

from ..core.arg_checks import MAX_INDEX, check_choice, check_count, check_counts
from ..core.info import KIND_SELFPLAY, ReplaySource, SelfPlayInfo
from ..core.rewards import RewardEvent
from ..core.types import Task, Trajectory
from ..core.validation import VERIFIER_DEFAULT, ValidationResult
from ..errors import InvalidArgumentError, SearchGymRuntimeError
from ..scoring.outcomes import reward_event
from ..tasks.sources import task_from_subgraph
from .base import TextEnvBase
from .episode import Rollout, advance
from .group import (
    ROLE_PROPOSER,
    ROLE_SOLVER,
    SolverGroup,
    check_group_action,
    check_group_size,
    group_action_space,
    group_obs,
    group_observation_space,
)
from .proposer import PROPOSER_MODES, ProposerValidation, VerifierArg, batch_noise, verifier_setting_of
from .replay import ReplayBuffer, batch_replay
from .resources import resolve_pool

logger = logging.getLogger(__name__)

__all__ = ["KGSelfPlayEnv"]


class KGSelfPlayEnv(TextEnvBase):
    """The self-play game; one shared policy plays both roles (the observation says which).

    ``pool``: subgraphs (list, JSONL pool path, or ``None`` for the world's cached heuristic pool);
    ``order``: ``"curriculum"`` (default; descending node count), ``"shuffle"`` or ``"given"``.
    ``pool_hops`` (with ``pool=None``): play training-side subgraphs of these path lengths instead, mixed in
    every stretch of games (:func:`~searchgym.envs.resources.hop_curriculum_pool`; the recipes' ``cpu``/``gpu``
    sizes use 2 and 3).
    ``group_size``: Solver rollouts per question (G, default 5). ``proposer_mode``: ``"kg"`` or
    ``"vanilla"``. ``solver_only_hops``: the games on pool subgraphs of these path lengths are solver-only (no
    Proposer phase; see the module docstring). ``verifier``, ``filter_config``, ``n_noise``, ``noise_window``: see
    :class:`~searchgym.envs.proposer.ProposerValidation`. ``replay_capacity``,
    ``replay_reset_every``: see :class:`~searchgym.envs.replay.ReplayBuffer`. Other arguments as
    :class:`~searchgym.envs.base.TextEnvBase`.
    """

    def __init__(
        self,
        world=None,
        *,
        pool: Any = None,
        order: str = "curriculum",
        group_size: int = 5,
        proposer_mode: str = "kg",
        verifier: VerifierArg = VERIFIER_DEFAULT,
        filter_config: Any = None,
        n_noise: int = 4,
        noise_window: int = 4,
        replay_capacity: int = 256,
        replay_reset_every: Optional[int] = 10,
        pool_seed: int = 0,
        pool_hops: Optional[Sequence[int]] = None,
        solver_only_hops: Sequence[int] = (),
        **kwargs: Any,
    ) -> None:
        group_size = check_group_size(group_size)
        check_choice("proposer_mode", proposer_mode, PROPOSER_MODES)
        replay_capacity = check_count("replay_capacity", replay_capacity, most=MAX_INDEX)
        replay_reset_every = check_count("replay_reset_every", replay_reset_every, least=0, optional=True)
        pool_seed = check_count("pool_seed", pool_seed, least=None)
        self.solver_only_hops = _hop_counts(solver_only_hops)
        super().__init__(world, **kwargs)
        self.pool = resolve_pool(self.world, pool, order, pool_seed, hops=pool_hops)
        self.group_size = group_size
        self.proposer_mode = proposer_mode
        self.validation = ProposerValidation(
            self.world, verifier=verifier, filter_config=filter_config, n_noise=n_noise, noise_window=noise_window
        )
        self.own_replay = ReplayBuffer(replay_capacity, replay_reset_every)
        #: the buffer the current game stores to and draws from: :attr:`own_replay`, or the batch's shared one
        #: passed in the reset options
        self.replay = self.own_replay
        self.observation_space = group_observation_space(group_size)
        self.action_space = group_action_space(group_size)
        self._cursor = -1
        self._game = 0
        self.proposer: Optional[Rollout] = None
        self.group: Optional[SolverGroup] = None
        self.last_validation: Optional[ValidationResult] = None
        self.replay_source: ReplaySource = "proposed"

    # ------------------------------------------------------------------ siblings and checkpoints
    def clone(self) -> "KGSelfPlayEnv":
        """A new game env sharing world, pool (same order), index, judge and verifier, with its own
        replay buffer and noise window (exporting into the same file)."""
        v = self.validation
        return KGSelfPlayEnv(
            self.world,
            pool=self.pool,
            order="given",
            group_size=self.group_size,
            proposer_mode=self.proposer_mode,
            verifier=verifier_setting_of(v.verifier),
            filter_config=v.filter_config,
            noise_window=v.recent.maxlen or 0,
            replay_capacity=self.own_replay.capacity,
            replay_reset_every=self.own_replay.reset_every,
            solver_only_hops=self.solver_only_hops,
            **self.shared_kwargs(),
        )

    def state_dict(self) -> dict:
        """Base state plus pool cursor, replay buffer and noise window (continue training exactly)."""
        return {
            **super().state_dict(),
            "cursor": self._cursor,
            "replay": self.replay.state_dict(),
            "validation": self.validation.state_dict(),
        }

    def load_state_dict(self, state: dict) -> None:
        """Inverse of :meth:`state_dict` (the game in progress is not restored: call reset)."""
        super().load_state_dict(state)
        self._cursor = int(state["cursor"])
        self.replay.load_state_dict(state["replay"])
        self.validation.load_state_dict(state["validation"])

    # ------------------------------------------------------------------ gym API
    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        """Start a game: ``options={"subgraph": sg}`` or ``{"index": i}`` pick the subgraph;
        otherwise a seed picks subgraph ``seed mod len(pool)`` and no seed the next one.

        Batch play (SSP, :class:`~searchgym.evaluation.batch_runner.BatchRunner`): ``options["replay"]`` (a
        :class:`~searchgym.envs.replay.ReplayBuffer`) is the buffer this game stores valid questions to and draws
        replacements from instead of the env's own, and ``options["batch_noise"]`` (a
        :class:`~searchgym.envs.proposer.BatchNoise`) supplies the verification noise from the batch's other
        Proposer rollouts; a reset without them goes back to the env's own buffer and noise window.
        ``options["solver_only"]`` (bool) makes this game solver-only or not, whatever ``solver_only_hops`` says."""
        self._reseed(seed)
        options = options or {}
        self.replay = batch_replay(options, self.own_replay)
        self.validation.batch = batch_noise(options)
        sg = options.get("subgraph")
        if sg is None:
            if options.get("index") is not None:
                self._cursor = int(options["index"]) % len(self.pool)
            elif seed is not None:
                self._cursor = int(seed) % len(self.pool)
            else:
                self._cursor = (self._cursor + 1) % len(self.pool)
            sg = self.pool[self._cursor]
        task = task_from_subgraph(sg, self.world)
        self.last_validation = None
        self._game = self.games_finished
        solver_only = options.get("solver_only")
        if solver_only is None:
            solver_only = task.hops in self.solver_only_hops
        elif not isinstance(solver_only, bool):
            raise InvalidArgumentError(f"options['solver_only'] must be true or false, got {solver_only!r}")
        if solver_only:  # no Proposer phase: the Solvers play the subgraph's own question
            self.proposer, self.replay_source = None, "solver_only"
            self.group = SolverGroup(self, task, self.group_size)
            obs = group_obs(ROLE_SOLVER, self.group.active, self.group.prompts())
            return obs, self._record(self._info(None, self.group, [""] * self.group_size, []), reset=True)
        self.proposer = self._proposer_rollout(task, self.proposer_mode)
        self.validation.start(self.proposer.trajectory)
        self.group = None
        self.replay_source = "proposed"
        texts = [self.proposer.trajectory.prompt] + [""] * (self.group_size - 1)
        obs = group_obs(ROLE_PROPOSER, self._active(self.proposer, None), texts)
        return obs, self._record(self._info(self.proposer, None, [""] * self.group_size, []), reset=True)

    def step(self, action: Any):
        """Advance the current phase by one turn; see the module docstring."""
        proposer, group = self.proposer, self.group
        if proposer is None and group is None:
            raise SearchGymRuntimeError("call reset() before step()")
        if group is not None and group.done:
            raise SearchGymRuntimeError("the game has ended; call reset() to start a new one")
        texts = check_group_action(action, self.group_size)
        events: list[RewardEvent] = []
        if group is None:
            assert proposer is not None
            inserted = self._proposer_step(proposer, texts[0], events)
            group = self.group  # set when the proposer finished
        else:
            inserted = group.step(texts)
        terminated = truncated = False
        done = group is not None and group.done
        if group is not None and done:
            events.extend(self._finish_game(proposer, group))
            terminated, truncated = group.end_flags()
        role = ROLE_SOLVER if group is not None else ROLE_PROPOSER
        reward = float(sum(ev.reward for ev in events))
        obs = group_obs(role, self._active(proposer, group), inserted)
        info = self._record(self._info(proposer, group, inserted, events), done=done)
        if done:
            self.games_finished += 1
            self.replay.end_game()
        return obs, reward, terminated, truncated, info

    # ------------------------------------------------------------------ phases
    def _proposer_step(self, proposer: Rollout, text: Any, events: list[RewardEvent]) -> list[str]:
        """One proposer turn; when it ends the question, validate it and start the solver group."""
        (ins,) = advance([proposer], [text], self.engine)
        if not proposer.done:
            return [ins] + [""] * (self.group_size - 1)
        traj = proposer.trajectory
        self.last_validation = self.validation(traj, traj.task.answers, self._rng)
        if self.last_validation.valid and traj.question is not None:
            task = self._proposed_task(traj, traj.question)
            self.replay.add(task)
        else:
            traj.reward, traj.reward_components = 0.0, {"valid": 0.0, "outcome": 0.0}
            events.append(reward_event("proposer", 0, 0.0, traj.reward_components, traj))
            task = self._replacement_task(traj.task)
        self.group = SolverGroup(self, task, self.group_size)
        return self.group.prompts()

    def _proposed_task(self, traj: Trajectory, question: str) -> Task:
        """The solvers' task built from the proposer's valid question on its subgraph task."""
        sg_task = traj.task
        return Task(
            id=f"proposed:{self._game}:{sg_task.subgraph.id if sg_task.subgraph else sg_task.id}",
            question=question,
            answers=list(sg_task.answers),
            subgraph=sg_task.subgraph,
            waypoints=list(sg_task.waypoints),
            gold_titles=list(sg_task.gold_titles),
            evidence=traj.evidence,
            source="proposer",
            metadata=dict(sg_task.metadata),
        )

    def _replacement_task(self, sg_task: Task) -> Task:
        """For an invalid question: a replayed valid question, else the subgraph's template question
        (sets :attr:`replay_source` to ``"replayed"`` or ``"dummy"``)."""
        replayed = self.replay.sample(self._rng)
        if replayed is not None:
            self.replay_source = "replayed"
            return replayed
        self.replay_source = "dummy"
        return task_from_subgraph(sg_task.subgraph, self.world, source="dummy") if sg_task.subgraph else sg_task

    def _question_valid(self) -> bool:
        """Whether this game's proposer question passed validation (False before it is validated)."""
        return self.last_validation is not None and self.last_validation.valid

    def _finish_game(self, proposer: Optional[Rollout], group: SolverGroup) -> list[RewardEvent]:
        """Score the solvers and (for a valid question) the proposer; the game's final events."""
        events = group.score()
        if proposer is not None and self._question_valid():
            traj = proposer.trajectory
            solve_rate = sum(ev.reward for ev in events) / len(events)
            traj.reward = 1.0 - solve_rate
            traj.reward_components = {"valid": 1.0, "outcome": traj.reward, "solve_rate": solve_rate}
            events.append(reward_event("proposer", 0, traj.reward, traj.reward_components, traj))
        return events

    # ------------------------------------------------------------------ info
    def _active(self, proposer: Optional[Rollout], group: Optional[SolverGroup]) -> list[bool]:
        if group is None:
            assert proposer is not None
            return [not proposer.done] + [False] * (self.group_size - 1)
        return group.active

    def _info(
        self,
        proposer: Optional[Rollout],
        group: Optional[SolverGroup],
        inserted: Sequence[str],
        events: list[RewardEvent],
    ) -> SelfPlayInfo:
        ptraj = proposer.trajectory if proposer is not None else None
        trajs: list[Optional[Trajectory]]
        turns: list[Any]
        if group is None:
            assert ptraj is not None and proposer is not None
            trajs = [ptraj] + [None] * (self.group_size - 1)
            task, turns = ptraj.task, [proposer.last_turn] + [None] * (self.group_size - 1)
            solver_rc: dict = {"outcome": [None] * self.group_size}
        else:
            trajs, task = list(group.trajectories), group.task
            turns = [r.last_turn for r in group.rollouts]
            solver_rc = group.components()
        return {
            "kind": KIND_SELFPLAY,
            "role": "solver" if group is not None else "proposer",
            "trajectories": trajs,
            "proposer": ptraj,
            "task": task,
            "turn": turns,
            "inserted": list(inserted),
            "rewards": events,
            "reward_components": {
                "solver": solver_rc,
                "proposer": dict(ptraj.reward_components) if ptraj is not None else {},
            },
            "validation": copy.deepcopy(self.last_validation),
            "game": self._game,
            "replay": self.replay_source,
            "subgraph": ptraj.task.subgraph if ptraj is not None else task.subgraph,
        }

    def _render_trajectories(self):
        own = [self.proposer.trajectory] if self.proposer is not None else []
        return own + (self.group.trajectories if self.group is not None else [])


def _hop_counts(hops: Sequence[int]) -> tuple[int, ...]:
    """``solver_only_hops`` as a sorted tuple of path lengths >= 1; one line naming a bad value."""
    return tuple(sorted(set(check_counts("solver_only_hops", hops, example="[1]"))))
