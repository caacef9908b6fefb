"""One searchgym Solver rollout played text in, text out: the engine-neutral half of the adapters whose
framework tokenizes the conversation itself (SkyRL-Gym, GEM, verifiers).

The verl and TRL adapters hand searchgym the sampled token ids, and
:class:`~searchgym.integrations.episode.EnvEpisode` builds the token streams and loss masks. SkyRL,
GEM and verifiers hand an env the model's *text* and tokenize on their side. :class:`TextRollout`
drives the same :class:`EnvEpisode` state machine over the same env (built once per process from an
:class:`~searchgym.integrations.environments.EnvSpec`, reward wrappers included): the reward of a step
is the sum of the env's reward events for the rollout on that step, and the named components
(``outcome``, ``wcr_bonus``, ...) are the events' components, exactly as verl's and TRL's adapters report
them. Only the token bookkeeping is left to the framework (:class:`TextOnlyEncoder`).

What a framework must tokenize to get searchgym's own streams (what verl and TRL train on), by protocol:

* ``tags``: the prompt as one user message, chat-templated with the generation prompt; then each turn's
  sampled ids (loss mask 1) followed by the step's ``observation`` tokenized on its own without special
  tokens (mask 0) — :class:`~searchgym.llm.sequences.TagEncoder`. SkyRL's generator does exactly
  this with ``generator.use_conversation_multi_turn=false`` (tested in tests/test_integration_skyrl.py).
* ``function_calling``: the prompt rendered with the env's tool schemas, then the chat template's tokens
  for each step's ``messages`` (``role: tool``, with the ``tool_call_id`` of the call they answer) —
  :class:`~searchgym.llm.sequences.ToolEncoder`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from searchgym.core.types import Task, Trajectory

from ..errors import InvalidArgumentError, SearchGymRuntimeError
from .environments import EnvSpec, cached_env
from .episode import EnvEpisode, TokenStream

__all__ = ["TEXT_ENV_ID", "TextOnlyEncoder", "TextStep", "TextRollout"]

#: The env a text adapter plays: one Solver rollout per episode (groups and self-play: verl or TRL).
TEXT_ENV_ID = "KGSolver-v0"


class TextOnlyEncoder:
    """The encoder :class:`EnvEpisode` gets when the framework tokenizes: it contributes no token ids, so
    the episode keeps the env's state, rewards and components and the framework keeps the tokens."""

    def __init__(self, protocol: str) -> None:
        self.protocol = protocol

    def prompt_ids(self, prompt: str) -> list[int]:
        """No ids: the framework chat-templates the prompt itself."""
        return []

    def env_ids(self, inserted: str, turn: Any, previous_ids: Sequence[int] = ()) -> list[int]:
        """No ids: the framework tokenizes the step's observation itself."""
        return []


@dataclass
class TextStep:
    """What one agent turn gave back.

    ``observation``: the text the env inserted after the turn (tags: ``<information>…</information>`` or a
    corrective message; function calling: the tool replies' contents, blank-line separated; ``""`` once the
    rollout ended). ``messages``: the same as chat messages (tags: one ``user`` message; function calling:
    the env's ``tool`` messages; ``[]`` once the rollout ended). ``reward``: this step's reward (the sum of
    the env's reward events for the rollout on this step, after its reward wrappers). ``components``: the
    reward components so far."""

    observation: str
    messages: list[dict]
    reward: float
    terminated: bool
    truncated: bool
    components: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)

    @property
    def done(self) -> bool:
        """The env ended the rollout (an answer, or the turn limit)."""
        return self.terminated or self.truncated


class TextRollout:
    """One ``KGSolver-v0`` rollout at a time on a copy of the process's env for ``spec`` (see the module
    docstring): :meth:`reset` on a task, then :meth:`step` with each turn the model wrote — a string, or in
    the function-calling protocol an assistant message dict (``content`` + ``tool_calls``) as well."""

    def __init__(self, spec: EnvSpec) -> None:
        if spec.env_id != TEXT_ENV_ID:
            raise InvalidArgumentError(
                f"the text adapters play one Solver rollout per episode ({TEXT_ENV_ID}), not {spec.env_id}; "
                "Solver groups and self-play are trained through the verl agent loops or TRL's rollout_func"
            )
        self.spec = spec
        self.env = cached_env(spec)
        self.protocol: str = self.env.unwrapped.protocol
        self._episode: Optional[EnvEpisode] = None

    # ------------------------------------------------------------------ the episode
    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None) -> str:
        """Start a rollout (``options``: ``{"task": Task}`` or ``{"index": i}``; none: a seeded draw from the
        env's tasks); the prompt text."""
        encoder = TextOnlyEncoder(self.protocol)
        # the framework bounds the response; the episode itself is never cut here
        self._episode = EnvEpisode(self.env, None, response_length=sys.maxsize, encoder=encoder)
        self._episode.reset(seed=seed, options=options)
        return str(self._episode.obs)

    def step(self, action: Any) -> TextStep:
        """Play one agent turn; what the env gave back (see :class:`TextStep`)."""
        episode = self.episode
        if episode.done:
            raise SearchGymRuntimeError("the rollout has ended; reset() starts the next one")
        ((key, stream),) = episode.pending()
        before = stream.reward
        episode.step({key: action if action is not None else ""})
        info = episode.info
        traj: Trajectory = info["trajectory"]
        terminated = bool(traj.terminated)
        messages = [] if episode.done else self._messages(info)
        return TextStep(
            observation="" if episode.done else "\n\n".join(str(m["content"]) for m in messages),
            messages=messages,
            reward=stream.reward - before,
            terminated=terminated,
            truncated=bool(traj.truncated) and not terminated,
            components=dict(stream.components),
            info=info,
        )

    def _messages(self, info: dict) -> list[dict]:
        if self.protocol == "tags":
            return [{"role": "user", "content": info["inserted"]}] if info["inserted"] else []
        turn = info["turn"]
        return [dict(m) for m in (turn.messages if turn is not None else [])]

    # ------------------------------------------------------------------ state
    @property
    def episode(self) -> EnvEpisode:
        """The episode in play; raises before the first :meth:`reset`."""
        if self._episode is None:
            raise SearchGymRuntimeError("call reset() before step()")
        return self._episode

    @property
    def stream(self) -> TokenStream:
        """The rollout's stream (reward and components; no token ids: see :class:`TextOnlyEncoder`)."""
        return self.episode.stream

    @property
    def done(self) -> bool:
        """The env ended the rollout."""
        return self.episode.done

    @property
    def reward(self) -> float:
        """The rollout's reward so far (its whole reward once :attr:`done`)."""
        return float(self.stream.reward)

    @property
    def components(self) -> dict:
        """The rollout's reward components so far."""
        return dict(self.stream.components)

    @property
    def trajectory(self) -> Trajectory:
        """The env's trajectory of the rollout (turns, answer, correctness)."""
        return self.episode.info["trajectory"]

    @property
    def task(self) -> Task:
        """The task the rollout plays."""
        return self.trajectory.task

    @property
    def prompt(self) -> str:
        """The rollout's prompt (the env's Solver prompt for the task)."""
        return self.trajectory.prompt

    def prompt_messages(self) -> list[dict]:
        """The prompt as chat messages: one user message, as searchgym's encoders render it."""
        return [{"role": "user", "content": self.prompt}]

    def tools(self) -> list[dict]:
        """The env's tool schemas (OpenAI ``tools`` format) in the function-calling protocol; ``[]`` for tags."""
        return list(self.env.unwrapped.tool_schemas("solver")) if self.protocol == "function_calling" else []

    def metrics(self) -> dict[str, float]:
        """The numbers a framework logs for the rollout: ``reward``, every numeric reward component, the
        turns played and whether it ended on an answer."""
        out = {k: float(v) for k, v in self.components.items() if isinstance(v, (int, float))}
        traj = self.trajectory
        out.update(reward=self.reward, turns=float(len(traj.turns)), answered=float(traj.answer is not None))
        return out
