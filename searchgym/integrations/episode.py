"""Play a searchgym env against an external token generator, keeping token ids and an exact loss mask.

The engine-neutral half of the training-framework adapters: nothing here imports verl or TRL. Tokens
follow searchgym's own encoding (:mod:`searchgym.llm.sequences`): the prompt comes from the
protocol's encoder (the chat-templated prompt; with the tool schemas in the function-calling
protocol), each agent turn contributes exactly the ids the generator sampled (mask 1), and each
insertion of the env (``<information>`` blocks and corrective messages, or the chat template's
tool-message tokens) the encoder's ids for it (mask 0). Rewards are the env's reward events — with
whatever shaping wrappers wrap it (WCR, GDCR, ...) — summed per role and slot, with their components.

:class:`EnvEpisode` is the state machine of one episode of any text env (one rollout, a Solver group,
a self-play game): :meth:`EnvEpisode.pending` says which streams must sample a turn now and
:meth:`EnvEpisode.step` takes their texts. The verl agent loops drive it with an async generator
(:func:`play_solver_episode`, :func:`play_selfplay_game`: one ``generate`` call per stream), the TRL
``rollout_func`` drives many episodes in lock-step with one batched generation per turn.

A rollout whose ``response_length`` budget runs out before the env ends it is *cut*: it is reported
with ``cut=True`` and reward 0 (the env never judged it); a generator error fails the whole episode
(:class:`GenerationFailed`), never a silent 0.

The async drivers run the env's resets and steps (retrieval, judging) off the event loop, through
``run_env`` (default: :func:`searchgym.integrations.env_threads.env_runner`'s thread pool), so concurrent
rollouts wait on a slow retriever together instead of one after another.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Optional, Sequence
from uuid import uuid4

from searchgym.llm.sequences import TagEncoder

from ..errors import InvalidArgumentError, SearchGymError
from .env_threads import EnvRunner, env_runner

logger = logging.getLogger(__name__)

__all__ = [
    "TURN_STOPS",
    "Generator",
    "TokenStream",
    "GenerationFailed",
    "EnvEpisode",
    "SolverEpisode",
    "GameEpisode",
    "play_episode",
    "play_solver_episode",
    "play_selfplay_game",
    "sample_into",
]

#: ``async (prompt_ids, max_tokens, rollout_id) -> (token_ids, log_probs or None)``; ``rollout_id`` is
#: the same for every turn of one rollout (verl's sticky sessions keep its prefix cache on one server).
Generator = Callable[[list[int], int, str], Awaitable[tuple[list[int], Optional[list[float]]]]]

#: Stop strings that end an agent turn of the tag protocol (vLLM / SGLang sampling params).
TURN_STOPS = ["</search>", "</answer>", "</question>", "</tool_call>"]

#: Reward components of a rollout cut by the response budget (the env never judged it).
CUT_COMPONENTS = {"cut_by_response_length": 1.0}


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

    def room(self, budget: int) -> int:
        """Tokens left in the response budget."""
        return budget - len(self.response_ids)

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
        room = self.room(budget)
        if len(ids) > room:
            ids, self.cut = list(ids)[: max(room, 0)], True
        self.response_ids += list(ids)
        self.response_mask += [0] * len(ids)
        self.response_logprobs += [0.0] * len(ids)


def sample_into(
    stream: TokenStream, ids: Sequence[int], logprobs: Optional[Sequence[float]], tokenizer, budget: int
) -> str:
    """Record one sampled turn (cut to the budget) on ``stream``; its decoded text (special tokens skipped)."""
    room = stream.room(budget)
    ids = list(ids)[:room]
    stream.add_sampled(ids, None if logprobs is None else list(logprobs)[:room])
    return tokenizer.decode(ids, skip_special_tokens=True)


class EnvEpisode:
    """The token streams of one episode of a text env, turn by turn (see the module docstring).

    ``encoder``: the protocol's :class:`~searchgym.llm.sequences.TagEncoder` /
    :class:`~searchgym.llm.sequences.ToolEncoder` (default: tags), or a ``{role: encoder}`` mapping
    when the roles see different tools (self-play in the function-calling protocol). Streams are keyed
    ``(role, slot)``. A single-rollout env's episode ends when its one stream is cut; in a group or
    self-play game a cut slot sends empty turns until the env ends it.
    """

    def __init__(self, env, tokenizer, *, response_length: int, encoder=None) -> None:
        self.env = env
        self.tokenizer = tokenizer
        self.encoders = encoder if isinstance(encoder, dict) else None
        self.encoder = (encoder if encoder is not None else TagEncoder(tokenizer)) if self.encoders is None else None
        self.budget = int(response_length)
        self.streams: dict[tuple[str, int], TokenStream] = {}
        self.multi = False
        self.done = False
        self.obs: Any = None
        self.info: dict = {}

    def encoder_of(self, role: str):
        """The encoder of ``role``'s streams."""
        return self.encoders[role] if self.encoders is not None else self.encoder

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None) -> "EnvEpisode":
        """Reset the env and open the streams of its first phase."""
        self.obs, self.info = self.env.reset(seed=seed, options=options)
        self.multi = isinstance(self.obs, dict)
        if not self.multi:
            role = self.info["trajectory"].role
            self.streams[(role, 0)] = TokenStream(self.encoder_of(role).prompt_ids(self.obs))
        elif self.info["role"] == "proposer":
            self.streams[("proposer", 0)] = TokenStream(self.encoder_of("proposer").prompt_ids(self.obs["texts"][0]))
        else:
            self._open_solvers()
        return self

    def _open_solvers(self) -> None:
        encoder = self.encoder_of("solver")
        for i, text in enumerate(self.obs["texts"]):
            self.streams[("solver", i)] = TokenStream(encoder.prompt_ids(text))

    @property
    def stream(self) -> TokenStream:
        """The stream of a single-rollout env."""
        return next(iter(self.streams.values()))

    def slots(self, role: str) -> list[TokenStream]:
        """The streams of ``role`` by slot."""
        return [s for (r, _), s in sorted(self.streams.items(), key=lambda kv: kv[0][1]) if r == role]

    def pending(self) -> list[tuple[tuple[str, int], TokenStream]]:
        """The streams that must sample a turn now: ``[((role, slot), stream)]``."""
        if self.done:
            return []
        if not self.multi:
            return list(self.streams.items())
        role = self.info["role"]
        if role == "proposer":
            return [(("proposer", 0), self.streams[("proposer", 0)])]
        return [(("solver", i), self.streams[("solver", i)]) for i, a in enumerate(self.obs["active"]) if a]

    def step(self, texts: dict) -> None:
        """Step the env with the sampled texts of :meth:`pending` (``None``: no budget left: cut)."""
        if self.multi:
            self._step_group(texts)
        else:
            self._step_single(texts)
        if self.done:
            for s in self.streams.values():
                if s.cut:
                    s.reward, s.components = 0.0, dict(CUT_COMPONENTS)

    def _apply(self, events: Sequence[dict]) -> None:
        """Add each reward event's reward and components to the stream of its role and slot."""
        for ev in events:
            stream = self.streams.get((ev["role"], int(ev["slot"])))
            if stream is not None:
                stream.reward += float(ev["reward"])
                stream.components.update(ev.get("components") or {})

    def _step_single(self, texts: dict) -> None:
        (key, stream), *_ = self.streams.items()
        text = texts.get(key)
        if text is None:  # no budget left: the env never ends this rollout
            stream.cut = self.done = True
            return
        self.obs, _, terminated, truncated, self.info = self.env.step(text)
        self._apply(self.info["rewards"])
        if terminated or truncated:
            self.done = True
            return
        encoder = self.encoder_of(key[0])
        stream.add_env(encoder.env_ids(self.info["inserted"], self.info["turn"], stream.response_ids), self.budget)
        self.done = stream.cut

    def _step_group(self, texts: dict) -> None:
        role = self.info["role"]
        group = len(self.obs["texts"])
        for key, stream in self.pending():
            if texts.get(key) is None:
                stream.cut = True
        action = tuple(texts.get((role, i)) or "" for i in range(group))
        self.obs, _, terminated, truncated, self.info = self.env.step(action)
        self._apply(self.info["rewards"])
        self.done = bool(terminated or truncated)
        if role == "proposer":
            if self.info["role"] == "proposer":
                proposer = self.streams[("proposer", 0)]
                proposer.add_env(self._env_ids("proposer", 0, proposer), self.budget)
            else:
                self._open_solvers()
            return
        for i, active in enumerate(self.obs["active"]):
            if not self.done and active:
                s = self.streams[("solver", i)]
                s.add_env(self._env_ids("solver", i, s), self.budget)

    def _env_ids(self, role: str, slot: int, stream: TokenStream) -> list[int]:
        inserted, turn = self.info["inserted"][slot], self.info["turn"][slot]
        return self.encoder_of(role).env_ids(inserted, turn, stream.response_ids)

    def trajectories(self) -> list:
        """Every trajectory of the episode so far (the Proposer's first in self-play)."""
        if not self.multi:
            return [self.info["trajectory"]]
        out = [t for t in self.info["trajectories"] if t is not None]
        proposer = self.info.get("proposer")
        return ([proposer] if proposer is not None and proposer not in out else []) + out


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


async def _turn(stream: TokenStream, generate: Generator, tokenizer, budget: int) -> Optional[str]:
    """Sample one turn into ``stream``; the decoded text, or ``None`` when no budget is left."""
    room = stream.room(budget)
    if room <= 0:
        return None
    try:
        ids, logprobs = await generate(stream.prompt_ids + stream.response_ids, room, stream.rollout_id)
    except Exception as exc:  # noqa: BLE001 - re-raised as GenerationFailed with the cause
        raise GenerationFailed(
            f"the generator failed mid-rollout after {stream.turns} turns: {type(exc).__name__}: {exc}", stream
        ) from exc
    return sample_into(stream, ids, logprobs, tokenizer, budget)


async def play_episode(episode: EnvEpisode, generate: Generator, run_env: Optional[EnvRunner] = None) -> EnvEpisode:
    """Drive a reset :class:`EnvEpisode` to its end, the turns of concurrent streams generated concurrently
    and each env step run by ``run_env`` (default: the env thread pool), off the event loop."""
    run = run_env or env_runner()
    while not episode.done:
        pending = episode.pending()
        texts = await asyncio.gather(*[_turn(s, generate, episode.tokenizer, episode.budget) for _, s in pending])
        await run(episode.step, {key: text for (key, _), text in zip(pending, texts)})
    return episode


async def _play(
    env,
    generate: Generator,
    tokenizer,
    response_length: int,
    seed,
    options,
    encoder,
    run_env,
    check_start: Optional[Callable[[dict], None]] = None,
) -> EnvEpisode:
    """Reset an :class:`EnvEpisode` (off the event loop too), pass its reset ``info`` to ``check_start`` (which
    raises to refuse the episode before anything is generated), and play it to its end."""
    run = run_env or env_runner()
    episode = EnvEpisode(env, tokenizer, response_length=response_length, encoder=encoder)
    await run(functools.partial(episode.reset, seed=seed, options=options))
    if check_start is not None:
        check_start(episode.info)
    return await play_episode(episode, generate, run)


def _check_has_proposer(info: dict) -> None:
    """Refuse a self-play game that starts without a Proposer phase (a solver-only game)."""
    if info.get("proposer") is None:
        raise InvalidArgumentError(
            "this self-play game has no Proposer phase (a solver-only game: solver_only_hops or the solver_only "
            "reset option); a self-play agent loop trains both roles, so drop solver_only_hops from its env kwargs"
        )


async def play_solver_episode(
    env,
    generate: Generator,
    tokenizer,
    *,
    response_length: int,
    seed: Optional[int] = None,
    options: Optional[dict] = None,
    encoder=None,
    run_env: Optional[EnvRunner] = None,
) -> SolverEpisode:
    """Play one rollout of a single-rollout env (``KGSolver-v0``, possibly reward-wrapped)."""
    episode = await _play(env, generate, tokenizer, response_length, seed, options, encoder, run_env)
    return SolverEpisode(episode.stream, episode.info)


async def play_selfplay_game(
    env,
    generate: Generator,
    tokenizer,
    *,
    response_length: int,
    seed: Optional[int] = None,
    options: Optional[dict] = None,
    encoder=None,
    run_env: Optional[EnvRunner] = None,
) -> GameEpisode:
    """Play one ``KGSelfPlay-v0`` game: the Proposer's turns, verification, then the G Solvers,
    whose turns are generated concurrently (one ``generate`` call per active slot per step)."""
    episode = await _play(
        env, generate, tokenizer, response_length, seed, options, encoder, run_env, check_start=_check_has_proposer
    )
    (proposer,) = episode.slots("proposer")
    info = episode.info
    return GameEpisode(proposer, episode.slots("solver"), info.get("validation"), info.get("replay"))
