"""Play a searchgym env against an async token generator, keeping token ids and an exact loss mask.

This is the engine-neutral half of the verl agent loops (:mod:`.agent_loop`): nothing here imports
verl. A *generator* is ``async (prompt_ids, max_tokens, rollout_id) -> (token_ids, log_probs or None)``; the
loops adapt verl's ``server_manager.generate`` to it, tests pass a local tiny model.

Tokens follow searchgym's own encoding (:mod:`searchgym.agents.sequences`): the prompt is
``chat_template(user: env prompt)``; each agent turn contributes exactly the ids the generator
sampled (mask 1), each text the env inserts (``<information>`` blocks, corrective messages) its own
tokenisation (mask 0). Rewards are the env's reward events — with whatever shaping wrappers wrap it
(WCR, GDCR, ...) — summed per slot, with their components.

A rollout whose ``response_length`` budget runs out before the env ends it is *cut*: it is reported
with ``cut=True`` and reward 0 (the env never judged it); a generator error fails the whole episode
(:class:`GenerationFailed`), never a silent 0.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Optional, Sequence
from uuid import uuid4

from searchgym.agents.sequences import render_prompt

from ...errors import SearchGymError

logger = logging.getLogger(__name__)

__all__ = [
    "Generator",
    "TokenStream",
    "GenerationFailed",
    "SolverEpisode",
    "GameEpisode",
    "play_solver_episode",
    "play_selfplay_game",
]

#: ``async (prompt_ids, max_tokens, rollout_id) -> (token_ids, log_probs or None)``; ``rollout_id`` is
#: the same for every turn of one rollout (verl's sticky sessions keep its prefix cache on one server).
Generator = Callable[[list[int], int, str], Awaitable[tuple[list[int], Optional[list[float]]]]]


class GenerationFailed(SearchGymError, RuntimeError):
    """The token generator (verl's server_manager) raised mid-rollout; ``stream`` is the rollout so far."""

    def __init__(self, message: str, stream: "TokenStream") -> None:
        super().__init__(message)
        self.stream = stream


@dataclass
class TokenStream:
    """One rollout's tokens: ``prompt_ids`` then ``response_ids`` with ``response_mask`` (1 = sampled)."""

    prompt_ids: list[int]
    response_ids: list[int] = field(default_factory=list)
    response_mask: list[int] = field(default_factory=list)
    response_logprobs: list[float] = field(default_factory=list)
    turns: int = 0
    cut: bool = False  # the response budget ran out before the env ended the rollout
    logprobs_complete: bool = True  # every sampled turn came with its log-probs
    rollout_id: str = field(default_factory=lambda: uuid4().hex)  # a request id, not a random choice
    reward: float = 0.0
    components: dict = field(default_factory=dict)

    def add_sampled(self, ids: Sequence[int], logprobs: Optional[Sequence[float]]) -> None:
        """Append the ids the generator sampled for one turn (mask 1)."""
        self.response_ids += list(ids)
        self.response_mask += [1] * len(ids)
        if logprobs is None or len(logprobs) != len(ids):
            self.logprobs_complete = False
            logprobs = [0.0] * len(ids)
        self.response_logprobs += list(logprobs)
        self.turns += 1

    def add_env(self, ids: Sequence[int], budget: int) -> None:
        """Append env-inserted ids (mask 0), cut to the response budget (then the stream is cut)."""
        room = budget - len(self.response_ids)
        if len(ids) > room:
            ids, self.cut = list(ids)[: max(room, 0)], True
        self.response_ids += list(ids)
        self.response_mask += [0] * len(ids)
        self.response_logprobs += [0.0] * len(ids)


@dataclass
class SolverEpisode:
    """A finished single-rollout episode: its tokens, reward, components and the env's ``info``."""

    stream: TokenStream
    info: dict


@dataclass
class GameEpisode:
    """A finished self-play game: the Proposer's stream, the G Solver streams and the validation."""

    proposer: TokenStream
    solvers: list[TokenStream]
    validation: Optional[dict]
    replay: Any


def _encode(tokenizer, text: str) -> list[int]:
    return list(tokenizer.encode(text, add_special_tokens=False)) if text else []


def _prompt_ids(tokenizer, prompt: str) -> list[int]:
    return _encode(tokenizer, render_prompt(tokenizer, prompt))


async def _turn(stream: TokenStream, generate: Generator, tokenizer, budget: int) -> Optional[str]:
    """Sample one turn into ``stream``; the decoded text, or ``None`` when no budget is left."""
    room = budget - len(stream.response_ids)
    if room <= 0:
        stream.cut = True
        return None
    try:
        ids, logprobs = await generate(stream.prompt_ids + stream.response_ids, room, stream.rollout_id)
    except Exception as exc:  # noqa: BLE001 - re-raised as GenerationFailed with the cause
        raise GenerationFailed(
            f"the generator failed mid-rollout after {stream.turns} turns: {type(exc).__name__}: {exc}", stream
        ) from exc
    ids = list(ids)[:room]
    stream.add_sampled(ids, None if logprobs is None else list(logprobs)[:room])
    return tokenizer.decode(ids, skip_special_tokens=True)


def _apply_events(streams: dict[tuple[str, int], TokenStream], events: Sequence[dict]) -> None:
    """Add each reward event's reward and components to the stream of its role and slot."""
    for ev in events:
        stream = streams.get((ev["role"], int(ev["slot"])))
        if stream is not None:
            stream.reward += float(ev["reward"])
            stream.components.update(ev.get("components") or {})


async def play_solver_episode(
    env,
    generate: Generator,
    tokenizer,
    *,
    response_length: int,
    seed: Optional[int] = None,
    options: Optional[dict] = None,
) -> SolverEpisode:
    """Play one rollout of a single-rollout env (``KGSolver-v0``, possibly reward-wrapped)."""
    obs, info = env.reset(seed=seed, options=options)
    stream = TokenStream(_prompt_ids(tokenizer, obs))
    streams = {("solver", 0): stream}
    while True:
        text = await _turn(stream, generate, tokenizer, response_length)
        if text is None:
            break
        obs, _, terminated, truncated, info = env.step(text)
        _apply_events(streams, info["rewards"])
        if terminated or truncated:
            break
        stream.add_env(_encode(tokenizer, info["inserted"]), response_length)
        if stream.cut:
            break
    if stream.cut:
        stream.reward, stream.components = 0.0, {"cut_by_response_length": 1.0}
    return SolverEpisode(stream, info)


async def play_selfplay_game(
    env,
    generate: Generator,
    tokenizer,
    *,
    response_length: int,
    seed: Optional[int] = None,
    options: Optional[dict] = None,
) -> GameEpisode:
    """Play one ``KGSelfPlay-v0`` game: the Proposer's turns, verification, then the G Solvers,
    whose turns are generated concurrently (one ``generate`` call per active slot per step)."""
    obs, info = env.reset(seed=seed, options=options)
    group = len(obs["texts"])
    proposer = TokenStream(_prompt_ids(tokenizer, obs["texts"][0]))
    streams: dict[tuple[str, int], TokenStream] = {("proposer", 0): proposer}
    solvers: list[TokenStream] = []
    done = False
    while not done and info["role"] == "proposer":
        text = await _turn(proposer, generate, tokenizer, response_length)
        if text is None:  # cut Proposer: end it with an empty turn until the env gives up on it
            text = ""
        obs, _, terminated, truncated, info = env.step((text,) + ("",) * (group - 1))
        _apply_events(streams, info["rewards"])
        done = terminated or truncated
        if info["role"] == "proposer":
            proposer.add_env(_encode(tokenizer, info["inserted"][0]), response_length)
    solvers = [TokenStream(_prompt_ids(tokenizer, t)) for t in obs["texts"]]
    streams.update({("solver", i): s for i, s in enumerate(solvers)})
    while not done:
        active = [bool(a) for a in obs["active"]]
        texts = await asyncio.gather(
            *[_turn(s, generate, tokenizer, response_length) if active[i] else _none() for i, s in enumerate(solvers)]
        )
        obs, _, terminated, truncated, info = env.step(tuple(t or "" for t in texts))
        _apply_events(streams, info["rewards"])
        done = terminated or truncated
        for i, s in enumerate(solvers):
            if not done and obs["active"][i]:
                s.add_env(_encode(tokenizer, info["inserted"][i]), response_length)
    for s in solvers:
        if s.cut:
            s.reward, s.components = 0.0, {"cut_by_response_length": 1.0}
    return GameEpisode(proposer, solvers, info.get("validation"), info.get("replay"))


async def _none() -> None:
    return None
