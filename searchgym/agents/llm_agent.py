"""The reference LLM agent: plays every searchgym env through any :class:`TextGenerator`.

For each active slot the agent continues the slot's rollout: context = the chat-templated prompt
(``trajectory.prompt`` as a user message) followed by the completion so far (its own turns and the
env's insertions). With a backend that takes token ids (the transformers backend) the context is
exactly :func:`~searchgym.llm.sequences.encode_trajectory`'s ids -- the ids it sampled on earlier
turns, never a re-tokenisation -- and the ids it samples now are recorded on the trajectory
(:func:`~searchgym.llm.sequences.record_sampled`) for the trainer. All pending
rollouts of a step -- across the G slots and across several envs with :meth:`LLMAgent.act_batch` --
go to the generator in ONE ``generate`` call. Generation stops at ``</search>``, ``</answer>`` or
``</question>``; a generation that never closes a tag is passed to the env unchanged (the env
decides what that means).
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from ..core.arg_checks import check_count, check_number
from ..core.llm import GenerationConfig, Prompt, TextGenerator
from ..core.rng_state import random_state_from_data
from ..errors import InvalidArgumentError
from ..llm.sequences import encode_trajectory, record_sampled

if TYPE_CHECKING:
    from ..core.types import Trajectory

logger = logging.getLogger(__name__)

STOP_STRINGS = ("</search>", "</answer>", "</question>")


@dataclass
class AgentConfig:
    """Sampling settings of :class:`LLMAgent` (``seed`` seeds the per-call sampling seeds)."""

    max_new_tokens: int = field(default=512, metadata={"help": "Most tokens generated in one turn."})
    temperature: float = field(default=1.0, metadata={"help": "Sampling temperature (0: greedy)."})
    top_p: float = field(default=1.0, metadata={"help": "Nucleus sampling mass, in (0, 1] (1.0: off)."})
    stop: tuple[str, ...] = field(
        default=STOP_STRINGS, metadata={"help": "Strings that end a turn (the protocol's closing tags)."}
    )
    seed: int | None = field(default=0, metadata={"help": "Seed of the per-call sampling seeds (null: unseeded)."})

    def __post_init__(self) -> None:
        """Refuse a setting the generator would fail on, or sample wrongly with, at the first turn (NaN, a bool,
        a string), naming it."""
        check_count("max_new_tokens", self.max_new_tokens)
        check_number("temperature", self.temperature, least=0, hint="0: greedy")
        check_number("top_p", self.top_p, above=0, most=1, hint="1.0: off")
        check_count("seed", self.seed, least=None, optional=True, hint="None: unseeded")


@dataclass
class AgentStats:
    """Counters the trainer reads for tokens/s."""

    calls: int = 0
    prompts: int = 0
    new_tokens: int = 0


class LLMAgent:
    """``act(obs, info) -> action`` for single-role envs (a str) and group/self-play envs (a tuple of G str).

    ``config`` is an :class:`AgentConfig` (a :class:`GenerationConfig` is accepted too; an empty
    ``stop`` means the protocol's closing tags).
    """

    def __init__(self, generator: TextGenerator, *, config: AgentConfig | GenerationConfig | None = None) -> None:
        if isinstance(config, GenerationConfig):  # accepted for convenience: same fields
            config = AgentConfig(
                max_new_tokens=config.max_new_tokens,
                temperature=config.temperature,
                top_p=config.top_p,
                stop=tuple(config.stop) or STOP_STRINGS,
                seed=config.seed,
            )
        self.generator = generator
        self.config = config or AgentConfig()
        self._rng = random.Random(self.config.seed)
        self.stats = AgentStats()

    def reseed(self, seed: int | None) -> None:
        """Restart the stream of per-call sampling seeds."""
        self._rng = random.Random(seed)

    def get_rng_state(self) -> Any:
        """State of the seed stream (for checkpoints)."""
        return self._rng.getstate()

    def set_rng_state(self, state: Any) -> None:
        """Restore :meth:`get_rng_state`."""
        self._rng.setstate(random_state_from_data(state))

    # ---------------------------------------------------------------- contexts
    def context(self, trajectory) -> Prompt:
        """What the generator continues for one rollout.

        With a backend that takes token ids it is the trajectory's token ids (sampled ids for the
        agent's own turns). With another in-process backend (one that exposes ``render``) it is the
        rendered chat prompt plus the completion as one raw string. With a server backend it is chat
        messages; a partial assistant turn is continued with vLLM's ``continue_final_message`` extension.
        """
        tokenizer = getattr(self.generator, "tokenizer", None)
        if getattr(self.generator, "accepts_token_ids", False) and tokenizer is not None:
            return encode_trajectory(tokenizer, trajectory, for_generation=True).input_ids
        user = [{"role": "user", "content": trajectory.prompt}]
        completion = trajectory.completion
        render = getattr(self.generator, "render", None)
        if callable(render):
            return render(user) + completion
        if not completion:
            return user
        return user + [{"role": "assistant", "content": completion}]

    def _pending(self, obs, info) -> tuple[list[int], list, int | None]:
        """(active slots, trajectories, group size or None for single-role envs)."""
        if isinstance(obs, dict) and "active" in obs:
            trajs = info.get("trajectories")
            if trajs is None:
                raise InvalidArgumentError(
                    "a group/self-play observation needs info['trajectories'] (pass the info from reset/step)"
                )
            active = [i for i, a in enumerate(obs["active"]) if int(a)]
            return active, [trajs[i] for i in active], len(obs["active"])
        traj = info.get("trajectory")
        if traj is None:
            raise InvalidArgumentError(
                "LLMAgent needs info['trajectory'] from a searchgym single-role env (pass the info from reset/step)"
            )
        return [0], [traj], None

    # ------------------------------------------------------------------ acting
    def act(self, obs, info: dict, *, config: GenerationConfig | None = None):
        """One action for one env (all its active slots generated in one call)."""
        return self.act_batch([(obs, info)], config=config)[0]

    def act_batch(self, items: Sequence[tuple[Any, dict]], *, config: GenerationConfig | None = None) -> list:
        """Actions for several envs at once: every pending rollout goes into a single generate call."""
        plan: list[tuple[list[int], int | None, int]] = []  # (active slots, group size or None, first context)
        contexts: list[Any] = []
        rollouts: list[Trajectory] = []
        for obs, info in items:
            slots, trajs, g = self._pending(obs, info)
            plan.append((slots, g, len(contexts)))
            contexts.extend(self.context(t) for t in trajs)
            rollouts.extend(trajs)
        texts, sampled, logprobs = self._generate_by_role(contexts, rollouts, config)
        for traj, ids, lps in zip(rollouts, sampled, logprobs):
            record_sampled(traj, ids, lps)
        actions: list[str | tuple[str, ...]] = []
        for slots, g, start in plan:
            if g is None:
                actions.append(texts[start])
            else:
                out = [""] * g
                for k, slot in enumerate(slots):
                    out[slot] = texts[start + k]
                actions.append(tuple(out))
        return actions

    def _generate_by_role(
        self, contexts: list, rollouts: Sequence["Trajectory"], config: GenerationConfig | None
    ) -> tuple[list[str], list, list]:
        """:meth:`_generate` of ``contexts``; with a generator whose model holds adapters per role
        (``proposer_adapter``), one call per role, each in :meth:`playing` that role."""
        if not contexts:
            return [], [], []
        apart = getattr(self.generator, "role_adapters", None)
        playing = getattr(self.generator, "playing", None)
        if not (callable(apart) and callable(playing) and apart()):
            return self._generate(contexts, config)
        texts: list[str] = [""] * len(contexts)
        sampled: list = [None] * len(contexts)
        logprobs: list = [None] * len(contexts)
        for role in sorted({t.role for t in rollouts}):
            idx = [i for i, t in enumerate(rollouts) if t.role == role]
            with playing(role):
                part = self._generate([contexts[i] for i in idx], config)
            for k, i in enumerate(idx):
                texts[i], sampled[i], logprobs[i] = part[0][k], part[1][k], part[2][k]
        return texts, sampled, logprobs

    def generation_config(self) -> GenerationConfig:
        """The agent's sampling settings with the next seed of its stream."""
        c = self.config
        return GenerationConfig(
            max_new_tokens=c.max_new_tokens,
            temperature=c.temperature,
            top_p=c.top_p,
            stop=tuple(c.stop),
            seed=self._rng.randrange(2**31),
        )

    def generate(self, contexts: Sequence[Prompt], config: GenerationConfig | None = None) -> list[str]:
        """One generate call over ``contexts`` (a fresh seed from the agent's stream unless ``config`` has one)."""
        return self._generate(contexts, config)[0]

    def _generate(self, contexts: Sequence[Prompt], config: GenerationConfig | None) -> tuple[list[str], list, list]:
        """Texts, the sampled token ids of each context (``None`` where the backend gave text only) and
        their log-probabilities (``None`` where the backend gave none)."""
        cfg = config if config is not None else self.generation_config()
        if cfg.seed is None:
            cfg = cfg.with_(seed=self._rng.randrange(2**31))
        if not cfg.stop:
            cfg = cfg.with_(stop=tuple(self.config.stop))
        # Server backends continue a partial assistant turn with vLLM's ``continue_final_message``;
        # those requests need different template flags, so they go in their own call -- run at the
        # same time as the fresh-turn call, so a server sees every request of the step at once.
        cont = [
            isinstance(c, list) and bool(c) and isinstance(c[-1], dict) and c[-1].get("role") == "assistant"
            for c in contexts
        ]
        texts: list[str] = [""] * len(contexts)
        sampled: list = [None] * len(contexts)
        logprobs: list = [None] * len(contexts)
        calls = []
        for flag in (False, True):
            idx = [i for i, f in enumerate(cont) if f == flag]
            if idx:
                sub_cfg = (
                    cfg.with_(extra={"continue_final_message": True, "add_generation_prompt": False, **cfg.extra})
                    if flag
                    else cfg
                )
                calls.append((idx, [contexts[i] for i in idx], sub_cfg))
        if len(calls) == 2:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=2) as pool:
                results = list(pool.map(lambda c: self._call(c[1], c[2]), calls))
        else:
            results = [self._call(c[1], c[2]) for c in calls]
        for (idx, _, _), (texts_k, ids_k, new_tokens, lps_k) in zip(calls, results):
            self.stats.new_tokens += new_tokens
            for i, t, ids, lps in zip(idx, texts_k, ids_k, lps_k):
                texts[i], sampled[i], logprobs[i] = t, ids, lps
        self.stats.calls += 1
        self.stats.prompts += len(contexts)
        return texts, sampled, logprobs

    def _call(self, contexts: list, cfg: GenerationConfig) -> tuple[list[str], list, int, list]:
        """Texts, sampled token ids (``None`` each for text-only backends), the number of new tokens
        (estimated at ~4 characters each for text-only backends) and the ids' log-probabilities (``None``
        each unless the backend returned them)."""
        with_stats = getattr(self.generator, "generate_with_stats", None)
        if callable(with_stats):
            res = with_stats(contexts, cfg)
            ids = list(res.token_ids) if res.token_ids is not None else [None] * len(res.texts)
            lps = getattr(res, "logprobs", None)
            return res.texts, ids, res.new_tokens, list(lps) if lps is not None else [None] * len(res.texts)
        texts = self.generator.generate(contexts, cfg)
        return texts, [None] * len(texts), sum(max(1, len(t) // 4) for t in texts), [None] * len(texts)
