"""The base class every reward-shaping wrapper derives from.

The envs (``KGSolver-v0``, ``KGSolverGroup-v0``, ``KGSelfPlay-v0``) report rewards as *events* in
``info["rewards"]`` (:class:`~searchgym.core.rewards.RewardEvent`: ``role``, ``slot``, ``reward``,
``components``, ``trajectory``) and return the sum of a step's event rewards as the scalar reward. A shaping
wrapper rewrites those events:

1. :meth:`RewardShapingWrapper.reset` checks the task carries what the wrapper needs
   (:meth:`~RewardShapingWrapper.check_task`) and raises :class:`MissingTaskDataError` if not;
2. :meth:`~RewardShapingWrapper.step` calls :meth:`~RewardShapingWrapper.observe_step` (for per-step
   signals such as GDCR), then hands copies of the events to
   :meth:`~RewardShapingWrapper.shape_events`, which by default calls
   :meth:`~RewardShapingWrapper.shape_solver_group` once per group of solver events of the same task
   (all G rollouts of a question arrive together) and :meth:`~RewardShapingWrapper.shape_proposer`
   for each proposer event; a term goes in with :meth:`RewardEvent.add_term
   <searchgym.core.rewards.RewardEvent.add_term>` (or :meth:`~RewardShapingWrapper.set_reward`);
3. the scalar reward is recomputed as the sum of the event rewards and ``info["reward_components"]``
   (and each trajectory's ``reward`` / ``reward_components``) is brought in line with the events.

Stacking: ``Outer(Inner(env))`` — the inner wrapper shapes first, the outer wrapper sees the inner
wrapper's rewritten events and applies last. Wrappers that *replace* the reward with a full reward
definition (:class:`~searchgym.wrappers.DynaSearcherReward`,
:class:`~searchgym.wrappers.EvidenceVerifierReward`) belong innermost; additive terms
(:class:`~searchgym.wrappers.WaypointCoverageReward`'s bonus, a format penalty,
:class:`~searchgym.wrappers.GraphDistanceReward` with a weight) go outside them. Recording goes outside
everything (:mod:`searchgym.wrappers.recording`): a shaping wrapper refuses to go over a stack whose games are
already written below it.
"""

from __future__ import annotations

import logging
from typing import Any, Iterable, Optional

import gymnasium as gym

from ..core.info import has_slots
from ..core.rewards import RewardEvent
from ..core.types import Task, Trajectory
from ..errors import InvalidArgumentError, SearchGymError
from .recording import check_recording_outside

logger = logging.getLogger(__name__)

#: what a shaping hook receives: the typed reward event (hooks mutate it in place)
Event = RewardEvent


class MissingTaskDataError(SearchGymError, ValueError):
    """A wrapper needs data (waypoints, subgraph, gold titles, evidence) that the task lacks."""


def solver_groups(events: Iterable[Event]) -> list[list[Event]]:
    """Group the solver events of one step by task: the G rollouts of one question form a group.

    Events keep their order inside a group; groups come in order of first appearance. Events
    whose trajectory has no task are grouped by their task id ``None``.
    """
    groups: dict[Any, list[Event]] = {}
    for ev in events:
        if ev.get("role") != "solver":
            continue
        traj = ev.get("trajectory")
        key = traj.task.id if traj is not None and traj.task is not None else None
        groups.setdefault(key, []).append(ev)
    return list(groups.values())


def event_trajectory(event: Event) -> Trajectory:
    """The trajectory of an event, or a clear error when the env did not attach one."""
    traj = event.get("trajectory")
    if traj is None:
        raise InvalidArgumentError(
            f"reward event for role {event.get('role')!r} slot {event.get('slot')!r} has no 'trajectory'; "
            "reward wrappers need the env contract's live Trajectory in every event"
        )
    return traj


class RewardShapingWrapper(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Rewrites the env's reward events; subclasses implement the shaping and name their terms.

    Subclasses override :meth:`shape_solver_group` and/or :meth:`shape_proposer` (or
    :meth:`shape_events` for full control), use :meth:`set_reward` to write the new reward and the
    named terms, and may override :meth:`check_task` to fail fast on tasks lacking their data.
    ``name`` (class attribute, or the ``name=`` argument) identifies the wrapper in logs.
    ``replaces_reward`` marks wrappers that overwrite the reward with a full definition of their
    own; they belong innermost in a stack (:func:`~searchgym.wrappers.wrap_rewards`).
    """

    name = "shaping"
    replaces_reward = False
    #: how a trainer turns this reward into advantages (searchgym.wrappers.registry): "outcome" or "step"
    advantage = "outcome"
    #: with advantage "step": the reward component holding a Solver rollout's per-step rewards
    step_rewards_key: Optional[str] = None

    def __init__(self, env: gym.Env, *, name: Optional[str] = None):
        gym.utils.RecordConstructorArgs.__init__(self, name=name)  # a subclass records its own arguments first
        check_recording_outside(env, type(self).__name__)
        super().__init__(env)
        if name is not None:
            self.name = name

    # ----------------------------------------------------------------- hooks
    def check_task(self, task: Optional[Task]) -> None:
        """Raise :class:`MissingTaskDataError` if ``task`` lacks what this wrapper needs."""

    def on_reset(self, info: dict) -> None:
        """Called after every reset (clear per-episode state here)."""

    def observe_step(self, info: dict) -> None:
        """Called on every step before the events are shaped (per-step signals go here)."""

    def shape_solver_group(self, events: list[Event], info: dict) -> None:
        """Shape the events of the G solver rollouts of one question (in place). Default: unchanged."""

    def shape_proposer(self, event: Event, events: list[Event], info: dict) -> None:
        """Shape one proposer event (in place); ``events`` are all events of this step. Default: unchanged."""

    def shape_events(self, events: list[Event], info: dict) -> list[Event]:
        """Shape one step's events (copies, safe to mutate) and return them.

        Solver groups are shaped before proposer events, so a proposer term may read the solvers'
        shaped values in the same step.
        """
        for group in solver_groups(events):
            self.shape_solver_group(group, info)
        for ev in events:
            if ev.role == "proposer":
                self.shape_proposer(ev, events, info)
        return events

    # --------------------------------------------------------------- helpers
    @staticmethod
    def set_reward(event: Event, reward: float, **terms: Any) -> None:
        """Set an event's reward and record ``terms`` under their names in its components
        (:meth:`RewardEvent.set_reward <searchgym.core.rewards.RewardEvent.set_reward>`)."""
        event.set_reward(reward, **terms)

    # ------------------------------------------------------------- gym API
    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        """Reset the wrapped env, then check the task and clear per-episode state."""
        obs, info = self.env.reset(seed=seed, options=options)
        self.check_task(info.get("task"))
        self.on_reset(info)
        return obs, info

    def step(self, action):
        """Step the wrapped env and rewrite this step's reward events."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.observe_step(info)
        events = info.get("rewards") or []
        if events:
            shaped = self.shape_events([RewardEvent.coerce(ev) for ev in events], info)
            info["rewards"] = shaped
            reward = float(sum(ev.reward for ev in shaped))
            _sync_components(info, shaped)
        return obs, reward, terminated, truncated, info


def _sync_components(info: dict, events: list[Event]) -> None:
    """Make ``info["reward_components"]`` and the trajectories agree with the shaped events."""
    for ev in events:
        if ev.trajectory is not None:
            ev.trajectory.reward = ev.reward
            ev.trajectory.reward_components = dict(ev.components)
    if not has_slots(info):  # single-role env: components of the finished trajectory
        info["reward_components"] = dict(events[-1].components)
        return
    size = len(info["trajectories"])
    rc = info.get("reward_components") or {}
    solver = {k: list(v) if isinstance(v, (list, tuple)) else v for k, v in (rc.get("solver") or {}).items()}
    proposer = dict(rc.get("proposer") or {})
    for ev in events:
        values = ev.components
        if ev.role == "proposer":
            proposer.update(values)
            continue
        slot = ev.slot
        if not 0 <= slot < size:
            raise InvalidArgumentError(f"solver reward event has slot {slot!r}; expected an int in [0, {size})")
        for name, value in values.items():
            column = solver.get(name)
            if not isinstance(column, list) or len(column) != size:
                column = [None] * size
                solver[name] = column
            column[slot] = value
    info["reward_components"] = {**rc, "solver": solver, "proposer": proposer}
