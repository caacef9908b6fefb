"""The agents ``searchgym eval`` can score, behind one small interface.

* ``scripted`` -- :class:`~searchgym.agents.scripted.PathFollowingSolver` (a baseline that searches
  the KG path hop by hop and reads its answer from the retrieved text; one search for plain QA);
* ``random`` -- :class:`~searchgym.agents.scripted.RandomAgent` (the floor);
* every LLM backend of :mod:`searchgym.llm.registry` that can evaluate (``evaluates=True``), built by its
  registered factory: ``transformers`` (a local Hugging Face model folder, a trainer or SFT checkpoint
  (``runs/x/checkpoints/step_00000010``, a LoRA one too), a LoRA adapter folder merged into its base on
  load, as ``train --init`` does, or the bundled ``smollm2``, run in-process), ``vllm`` (the same with vLLM,
  when installed, on a GPU, LoRA adapters excepted), ``openai`` (any OpenAI-compatible endpoint: ``vllm
  serve``, SGLang, llama.cpp..., with concurrent requests, a per-request timeout and bounded retries).
  A backend registered with :func:`~searchgym.llm.registry.register_backend` is an agent kind here too.

LLM agents decode greedily by default (``temperature=0``), like the papers' evaluations.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

from ..core.arg_checks import check_count, check_number
from ..core.llm import GenerationConfig
from ..core.moved import moved_getattr
from ..errors import InvalidArgumentError
from ..llm.registry import BackendRequest, BackendSpec, backend_names, get_backend

logger = logging.getLogger(__name__)

__all__ = [
    "SCRIPTED_AGENTS",
    "agent_kinds",
    "AgentSpec",
    "EvalAgent",
    "ScriptedEvalAgent",
    "LLMEvalAgent",
    "make_agent",
]

#: the model-free agent kinds (the LLM ones are the backends of searchgym.llm.registry that can evaluate)
SCRIPTED_AGENTS = ("scripted", "random")
#: the AgentSpec fields (None unless given) each kind of agent reads: given to an agent that does not read them,
#: they would be silently ignored (``eval --model DIR`` scoring the scripted expert), so they are refused instead
_READS = {None: (), "model": ("model", "device"), "server": ("model", "endpoint", "api_key")}
_OPTIONAL_SETTINGS = tuple(dict.fromkeys(name for names in _READS.values() for name in names))


def agent_kinds() -> tuple[str, ...]:
    """Every kind ``searchgym eval --agent`` accepts: the scripted ones, then the registered backends that
    can evaluate."""
    return SCRIPTED_AGENTS + backend_names(evaluates=True)


@dataclass
class AgentSpec:
    """What to evaluate. ``model``: a model folder / checkpoint / ``smollm2`` (transformers, vllm) or
    the served model's name (openai). ``endpoint``: the server URL (openai). ``concurrency``: rollouts
    in flight, i.e. concurrent requests for an endpoint; ``timeout`` (s) and ``retries`` per request."""

    kind: str = field(
        default="scripted",
        metadata={
            "help": (
                "Agent kind: scripted, random, or an LLM backend of searchgym.llm.registry that can evaluate "
                "(built in: transformers, vllm, openai)."
            )
        },
    )
    model: Optional[str] = field(
        default=None,
        metadata={
            "help": (
                "transformers/vllm: a model folder, checkpoint folder or 'smollm2'; openai: the served model's name."
            )
        },
    )
    endpoint: Optional[str] = field(
        default=None,
        metadata={"help": "Base URL of the OpenAI-compatible server (kind openai), e.g. http://127.0.0.1:8000/v1."},
    )
    api_key: Optional[str] = field(default=None, metadata={"help": "Bearer token for the endpoint (null: none)."})
    concurrency: int = field(
        default=16,
        metadata={
            "help": "Rollouts in flight, i.e. concurrent requests to an endpoint or rows of one generation batch."
        },
    )
    timeout: float = field(default=60.0, metadata={"help": "Seconds per endpoint request before it counts as failed."})
    retries: int = field(default=2, metadata={"help": "Retries of a failed endpoint request."})
    max_new_tokens: int = field(default=512, metadata={"help": "Most tokens the agent generates in one turn."})
    temperature: float = field(default=0.0, metadata={"help": "Sampling temperature (0: greedy)."})
    dtype: str = field(
        default="float32",
        metadata={"help": "Weights dtype of a transformers/vllm agent: float32, bfloat16 or float16."},
    )
    device: Optional[str] = field(
        default=None, metadata={"help": "Device of a transformers agent, e.g. cuda (null: the model's default)."}
    )
    seed: int = field(default=0, metadata={"help": "Seed of the agent's sampling."})
    engine: str = field(
        default="auto",
        metadata={
            "help": (
                "Decoding loop of a transformers agent: auto (the static rollout engine on CPU for Llama-family "
                "models), static or hf."
            )
        },
    )
    rollout_dtype: str = field(
        default="auto",
        metadata={
            "help": (
                "Weights and KV cache of the static engine: auto (= dtype), float32 or bfloat16 (half the bytes per "
                "decode step)."
            )
        },
    )

    def __post_init__(self) -> None:
        if self.kind not in agent_kinds():
            raise InvalidArgumentError(f"unknown agent {self.kind!r}; choose one of {', '.join(agent_kinds())}")
        backend = self.backend
        self._refuse_ignored_settings(backend)
        if backend is not None and backend.needs == "server" and not self.endpoint:
            raise InvalidArgumentError(f"agent {self.kind!r} needs --endpoint URL (e.g. http://127.0.0.1:8000/v1)")
        if backend is not None and backend.needs == "model" and not self.model:
            raise InvalidArgumentError(
                f"agent {self.kind!r} needs --model (a model folder, a checkpoint folder or 'smollm2')"
            )
        check_count("concurrency", self.concurrency)
        check_number("timeout", self.timeout, above=0, hint="seconds per request")
        check_count("retries", self.retries, least=0)
        check_count("max_new_tokens", self.max_new_tokens)
        check_number("temperature", self.temperature, least=0, hint="0: greedy")
        check_count("seed", self.seed, least=None)
        from ..llm.transformers_backend import ENGINES

        if self.engine not in ENGINES:
            raise InvalidArgumentError(f"--engine {self.engine}: use one of {', '.join(ENGINES)}")
        if self.rollout_dtype not in ("auto", "float32", "bfloat16"):
            raise InvalidArgumentError(f"--rollout-dtype {self.rollout_dtype}: use auto, float32 or bfloat16")
        if self.rollout_dtype != "auto" and (backend is None or not backend.engine_options or self.engine == "hf"):
            raise InvalidArgumentError(
                "--rollout-dtype runs in the static rollout engine of --agent transformers; use --engine auto or static"
            )

    def _refuse_ignored_settings(self, backend: Optional[BackendSpec]) -> None:
        """One line naming the flags this kind of agent would ignore, and the agent that reads them."""
        reads = _READS[backend.needs if backend is not None else None]
        given = [
            f"--{name.replace('_', '-')}"
            for name in _OPTIONAL_SETTINGS
            if name not in reads and getattr(self, name) is not None
        ]
        if not given:
            return
        said = f"{' and '.join(given)} {'is' if len(given) == 1 else 'are'}"
        if backend is None:
            raise InvalidArgumentError(
                f"{said} for an LLM agent, but --agent is {self.kind!r} (model-free); add --agent transformers "
                "(a local model or 'smollm2') or --agent openai (a served one)"
            )
        where = (
            "a served model (--agent openai)" if backend.needs == "model" else "a local model (--agent transformers)"
        )
        raise InvalidArgumentError(
            f"{said} for {where}; --agent {self.kind} does not read {'it' if len(given) == 1 else 'them'}"
        )

    @property
    def backend(self) -> Optional[BackendSpec]:
        """The LLM backend of this kind (``None``: a scripted agent)."""
        return None if self.kind in SCRIPTED_AGENTS else get_backend(self.kind, purpose="eval", key="agent")

    def backend_request(self) -> BackendRequest:
        """What this spec asks of its LLM backend's factory."""
        return BackendRequest(
            purpose="eval",
            model=self.model,
            endpoint=self.endpoint,
            api_key=self.api_key,
            dtype=self.dtype,
            device=self.device,
            seed=self.seed,
            concurrency=self.concurrency,
            timeout=self.timeout,
            retries=self.retries,
            engine=self.engine,
            rollout_dtype=self.rollout_dtype,
        )

    def record_settings(self) -> dict:
        """The settings that can change what this agent answers -- model identity, sampling, seed -- for
        ``searchgym eval``'s resume fingerprint (not concurrency, timeout or retries, which never do)."""
        if self.kind == "scripted":
            return {}
        if self.kind == "random":
            return {"seed": self.seed}
        backend = self.backend
        served = backend is not None and backend.needs == "server"
        model = self.model or "default"
        local = Path(model).expanduser()
        if not served and local.exists():
            model = str(local.resolve())
        settings: dict = {
            "model": model,
            "temperature": self.temperature,
            "max_new_tokens": self.max_new_tokens,
            "seed": self.seed,
        }
        if served:
            settings["endpoint"] = self.endpoint
        else:
            settings["dtype"] = self.dtype
        if backend is not None and backend.engine_options:  # recorded only where they change answers
            if self.temperature > 0:  # greedy ids are the same in either loop; seeded draws are not
                settings["engine"] = self.engine
            if self.rollout_dtype != "auto":
                settings["rollout_dtype"] = self.rollout_dtype
        return settings


class EvalAgent:
    """``act_batch([(obs, info), ...]) -> [action, ...]`` for single-role Solver envs, plus token counting.

    ``settings``: what can change its answers besides its name (see :meth:`AgentSpec.record_settings`);
    :func:`~searchgym.evaluation.runner.evaluate` puts them in a run's resume fingerprint."""

    name = "agent"
    settings: dict

    def act_batch(self, items: Sequence[tuple[Any, dict]]) -> list[str]:
        """One action per (observation, info) pair."""
        raise NotImplementedError

    def count_tokens(self, text: str) -> int:
        """Tokens in ``text`` (the model's tokenizer where there is one; else ~4 characters per token)."""
        return math.ceil(len(text) / 4)

    def close(self) -> None:
        """Release the backend."""


class ScriptedEvalAgent(EvalAgent):
    """A scripted agent (stateless, model-free) as an :class:`EvalAgent`."""

    def __init__(self, agent: Any, name: str) -> None:
        self.agent = agent
        self.name = name

    def act_batch(self, items):
        return [self.agent.act(obs, info) for obs, info in items]


class LLMEvalAgent(EvalAgent):
    """An :class:`~searchgym.agents.llm_agent.LLMAgent` over any generator, sampling with ``config``
    (greedy by default); every pending rollout goes to the generator in one call."""

    def __init__(self, generator: Any, name: str, config: GenerationConfig, *, agent: Any = None) -> None:
        from .llm_agent import STOP_STRINGS, LLMAgent

        self.generator = generator
        self.name = name
        self.config = config if config.stop else config.with_(stop=STOP_STRINGS)
        self.agent = agent or LLMAgent(generator)
        self._encode = getattr(generator, "encode", None)
        if self._encode is None and getattr(generator, "tokenizer", None) is not None:
            self._encode = lambda t: generator.tokenizer(t, add_special_tokens=False)["input_ids"]

    def act_batch(self, items):
        return self.agent.act_batch(list(items), config=self.config)

    def count_tokens(self, text: str) -> int:
        if not text:
            return 0
        return len(self._encode(text)) if callable(self._encode) else super().count_tokens(text)

    def close(self) -> None:
        self.generator.close()


def make_agent(spec: AgentSpec, *, world: Any = None) -> EvalAgent:
    """Build the agent ``spec`` names (``world`` lets the scripted agent read with the world's names), its
    ``settings`` set from :meth:`AgentSpec.record_settings`."""
    agent = _build_agent(spec, world)
    agent.settings = spec.record_settings()
    return agent


def _build_agent(spec: AgentSpec, world: Any) -> EvalAgent:
    """A scripted agent, or an LLM agent over the generator its registered backend's factory builds."""
    from . import scripted

    if spec.kind == "scripted":
        return ScriptedEvalAgent(scripted.PathFollowingSolver(world), "scripted")
    if spec.kind == "random":
        return ScriptedEvalAgent(scripted.RandomAgent(seed=spec.seed), "random")
    backend = get_backend(spec.kind, purpose="eval", key="agent")
    gen_cfg = GenerationConfig(
        max_new_tokens=spec.max_new_tokens, temperature=spec.temperature, top_p=1.0, seed=spec.seed
    )
    generator = backend.make(spec.backend_request())  # a missing --model / --endpoint is refused by name
    where = f"{spec.model or 'default'}@{spec.endpoint}" if backend.needs == "server" else f"{spec.model}"
    return LLMEvalAgent(generator, f"{backend.name}:{where}", gen_cfg)


__getattr__ = moved_getattr(__name__)  # a moved name (AGENTS, resolve_checkpoint) raises naming its new home
