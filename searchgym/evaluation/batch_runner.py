"""The one lock-step batch runner: every loop that plays episodes of searchgym envs with an agent runs here.

A :class:`BatchRunner` owns a list of env clones. :meth:`BatchRunner.play` starts one episode per free env
from a stream of :class:`EpisodeStart` (reset seed, reset options, a caller's key), asks the agent for the
actions of **every pending episode in one call** (``agent.act_batch``; an agent with only ``act(obs, info)``
is asked once per episode), steps each env, and starts the next episode on an env as soon as its episode
ends. It returns typed records: each finished :class:`Episode` and every reward event in the order the envs
reported it (:class:`ReportedEvent`), with the time spent in the agent and in the envs.

Self-play training plays a *batch* of games that share state (SSP): one replay buffer for the batch's
clones, cleared by training step, and RAG-verification noise from the batch's other Proposer rollouts. With
``share_batch_state=True`` the runner owns that state -- :attr:`BatchRunner.replay` (a
:class:`~searchgym.envs.replay.ReplayBuffer` with no per-game reset) and :attr:`BatchRunner.batch_noise`
(a :class:`~searchgym.envs.proposer.BatchNoise`) -- and hands it to each env through the reset options the
envs document (``options={"replay": ..., "batch_noise": ...}``), so nothing assigns an env's attributes from
outside. Without it (evaluation, demonstrations, ``searchgym play``) every env keeps its own.

Used by the trainer's rollouts, ``searchgym eval`` and validation
(:func:`~searchgym.evaluation.task_rollouts.play_tasks`), :func:`~searchgym.evaluation.games.play_games`
(``searchgym play``, the demo, rejection sampling) and the cold-start demonstrations.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Optional, Sequence

from ..envs.proposer import BatchNoise, ProposerValidation
from ..envs.replay import ReplayBuffer
from ..errors import InvalidArgumentError, SearchGymRuntimeError

__all__ = ["BatchRunner", "BatchResult", "Episode", "EpisodeStart", "ReportedEvent", "PendingTurn", "batch_actor"]

#: one pending turn as the agent gets it: the env's last observation and info
PendingTurn = tuple[Any, dict]


@dataclass(frozen=True)
class EpisodeStart:
    """How to start one episode: ``env.reset(seed=seed, options=options)``; ``key`` tags the episode's records
    (a game number, a task key, a GRPO group id)."""

    key: Any = None
    seed: Optional[int] = None
    options: Optional[dict] = None


@dataclass
class Episode:
    """One finished episode: its key, the env that played it, its reward events in the order its steps reported
    them, the last step's info and scalar reward, and how many steps it took."""

    key: Any
    env_index: int
    events: list = field(default_factory=list)
    info: dict = field(default_factory=dict)
    reward: float = 0.0
    steps: int = 0

    @property
    def trajectory(self) -> Any:
        """The finished rollout of a single-role env (``info["trajectory"]``; ``None`` for group envs)."""
        return self.info.get("trajectory")


@dataclass(frozen=True)
class ReportedEvent:
    """One reward event (``info["rewards"]`` item) with the key of its episode and the env that reported it."""

    key: Any
    env_index: int
    event: Any


@dataclass
class BatchResult:
    """What one :meth:`BatchRunner.play` produced: the finished episodes (in the order they ended; empty with
    ``keep=False``), every reward event in the order the envs reported it, and the seconds spent in the agent
    (``agent_s``) and in env resets and steps (``env_s``)."""

    episodes: list[Episode] = field(default_factory=list)
    events: list[ReportedEvent] = field(default_factory=list)
    agent_s: float = 0.0
    env_s: float = 0.0


def batch_actor(agent: Any) -> Callable[[list[PendingTurn]], list]:
    """``turns -> actions`` for ``agent``: its ``act_batch`` (one call for every pending turn), else its
    ``act(obs, info)`` once per turn (scripted agents)."""
    act_batch = getattr(agent, "act_batch", None)
    if callable(act_batch):
        return act_batch
    act = getattr(agent, "act", None)
    if not callable(act):
        raise InvalidArgumentError(f"{type(agent).__name__} has neither act_batch(turns) nor act(obs, info)")
    return lambda turns: [act(obs, info) for obs, info in turns]


@dataclass
class _Live:
    """An episode in progress on one env."""

    key: Any
    obs: Any
    info: dict
    events: list = field(default_factory=list)
    steps: int = 0


class BatchRunner:
    """Plays episodes on ``envs`` in lock step; see the module docstring.

    ``share_batch_state``: own one replay buffer (no per-game reset; :meth:`clear_replay` clears it) and one
    :class:`~searchgym.envs.proposer.BatchNoise` for the envs that have them, and pass them to each env at every
    reset. ``max_steps``: refuse an episode still running after that many steps (an env that never ends).
    """

    def __init__(self, envs: Sequence[Any], *, share_batch_state: bool = False, max_steps: Optional[int] = None):
        self.envs = list(envs)
        if not self.envs:
            raise InvalidArgumentError("the batch runner needs at least one env")
        self.max_steps = max_steps
        bases = [getattr(e, "unwrapped", e) for e in self.envs]
        replays = [getattr(b, "replay", None) for b in bases]
        self._takes_replay = [share_batch_state and isinstance(r, ReplayBuffer) for r in replays]
        self._takes_noise = [
            share_batch_state and isinstance(getattr(b, "validation", None), ProposerValidation) for b in bases
        ]
        first = next((r for r, takes in zip(replays, self._takes_replay) if takes), None)
        #: the batch's replay buffer (``None`` when not shared or no env has one)
        self.replay: Optional[ReplayBuffer] = ReplayBuffer(first.capacity, None) if first is not None else None
        #: the batch's verification-noise source (``None`` when not shared or no env validates questions)
        self.batch_noise: Optional[BatchNoise] = BatchNoise() if any(self._takes_noise) else None

    # ------------------------------------------------------------------ the batch's shared state
    def begin_batch(self) -> None:
        """Start a new batch: verification noise comes only from the Proposer rollouts played from now on."""
        if self.batch_noise is not None:
            self.batch_noise.begin()

    def clear_replay(self) -> bool:
        """Empty the shared replay buffer and count the reset (SSP clears it every ``replay_reset_steps``
        training steps); False when there is none."""
        if self.replay is None:
            return False
        self.replay.clear()
        self.replay.resets += 1
        return True

    def state_dict(self) -> dict:
        """Plain-data state of what the runner owns (the shared replay buffer)."""
        return {"replay": self.replay.state_dict() if self.replay is not None else None}

    def load_state_dict(self, state: dict) -> None:
        """Inverse of :meth:`state_dict`."""
        if self.replay is not None and state.get("replay") is not None:
            self.replay.load_state_dict(state["replay"])

    def reset_options(self, j: int, options: Optional[dict]) -> Optional[dict]:
        """``options`` for a reset of env ``j``, with the shared batch state that env takes."""
        extra: dict[str, Any] = {}
        if self._takes_replay[j]:
            extra["replay"] = self.replay
        if self._takes_noise[j]:
            extra["batch_noise"] = self.batch_noise
        return {**(options or {}), **extra} if extra else options

    # ------------------------------------------------------------------ playing
    def play(
        self,
        agent: Any,
        starts: Iterable[EpisodeStart],
        *,
        on_finished: Optional[Callable[[list[Episode]], None]] = None,
        keep: bool = True,
    ) -> BatchResult:
        """Play every episode of ``starts`` (read lazily: one is taken when an env is free) to its end.

        ``on_finished`` gets the episodes that ended after each batched agent turn (before the next episode
        starts); ``keep=False`` leaves them out of the result (long evaluations hand them on instead). An agent
        or env error propagates with nothing half-reported.
        """
        act = batch_actor(agent)
        queue = iter(starts)
        live: list[Optional[_Live]] = [None] * len(self.envs)
        result = BatchResult()
        exhausted = False
        while True:
            if not exhausted:
                exhausted = self._start_free(queue, live, result)
            pend = [(j, x) for j, x in enumerate(live) if x is not None]
            if not pend:
                return result
            t0 = time.perf_counter()
            actions = act([(x.obs, x.info) for _, x in pend])
            result.agent_s += time.perf_counter() - t0
            finished = [ep for (j, _), action in zip(pend, actions) if (ep := self._step(j, action, live, result))]
            if finished:
                if keep:
                    result.episodes.extend(finished)
                if on_finished is not None:
                    on_finished(finished)

    def _start_free(self, queue, live: list[Optional[_Live]], result: BatchResult) -> bool:
        """Reset every free env on the next start, in env order; True once the starts are used up."""
        for j in range(len(self.envs)):
            if live[j] is not None:
                continue
            start = next(queue, None)
            if start is None:
                return True
            t0 = time.perf_counter()
            obs, info = self.envs[j].reset(seed=start.seed, options=self.reset_options(j, start.options))
            result.env_s += time.perf_counter() - t0
            live[j] = _Live(start.key, obs, info)
        return False

    def _step(self, j: int, action: Any, live: list[Optional[_Live]], result: BatchResult) -> Optional[Episode]:
        """Apply ``action`` to env ``j``; its :class:`Episode` when that ended the episode."""
        x = live[j]
        assert x is not None, "only pending envs are stepped"
        t0 = time.perf_counter()
        obs, reward, terminated, truncated, info = self.envs[j].step(action)
        result.env_s += time.perf_counter() - t0
        x.steps += 1
        for event in info.get("rewards", []):
            x.events.append(event)
            result.events.append(ReportedEvent(x.key, j, event))
        if terminated or truncated:
            live[j] = None
            return Episode(x.key, j, x.events, info, float(reward), x.steps)
        if self.max_steps is not None and x.steps >= self.max_steps:
            raise SearchGymRuntimeError(
                f"episode {x.key!r} did not end after {self.max_steps} steps; is the env's max_turns set?"
            )
        x.obs, x.info = obs, info
        return None
