"""One registry of LLM backends: each name → its factory and what it needs, can and cannot do.

The trainer (``TrainConfig.rollout_backend``: its validation and the rollout generator it builds),
``searchgym eval`` (``--agent``: :func:`searchgym.agents.eval_agents.make_agent`) and the CLI's help text all
read this table, so a backend registered once with :func:`register_backend` is a choice everywhere it fits.

What each :class:`BackendSpec` declares:

* ``factory``: :class:`BackendRequest` → :class:`~searchgym.core.llm.TextGenerator`; imports its heavy
  dependencies (torch, vLLM) inside, so registering costs nothing;
* ``needs``: ``"model"`` (a local model: a folder, a checkpoint, ``smollm2``, or the trainer's in-memory policy)
  or ``"server"`` (a server URL: ``vllm_server_url`` under the trainer, ``--endpoint`` for eval);
* ``trains`` / ``evaluates``: whether the trainer may roll out with it, and ``searchgym eval`` score it;
* ``weights``: under the trainer, where its weights come from: ``"policy"`` (it decodes the trainer's
  in-memory policy), ``"model"`` (it loads ``model`` itself: the trainer pushes the policy's weights when the
  run started elsewhere, ``init=``) or ``"server"`` (the server's own checkpoint: pushed at the start);
  after every update the trainer pushes the weights to any backend with ``load_weights``;
* ``lora``: it can roll out a LoRA policy; ``engine_options``: it takes ``rollout_engine`` / ``rollout_dtype``
  (the static rollout engine of :mod:`.transformers_backend`);
* ``help``: one line for the CLI.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Literal, Optional, get_args

from ..core.llm import TextGenerator
from ..errors import InvalidArgumentError

logger = logging.getLogger(__name__)

__all__ = [
    "BackendNeeds",
    "BackendRequest",
    "BackendSpec",
    "Purpose",
    "WeightSource",
    "backend_help",
    "backend_names",
    "get_backend",
    "register_backend",
]

#: what a backend needs to run: a local model or a server URL
BackendNeeds = Literal["model", "server"]
#: where a training backend's weights come from (see the module docstring)
WeightSource = Literal["policy", "model", "server"]
#: who asks: the trainer's rollouts or an evaluation
Purpose = Literal["train", "eval"]


@dataclass(frozen=True)
class BackendRequest:
    """What a caller asks of a backend factory; each backend reads the fields it uses.

    ``purpose``: ``"train"`` (the trainer's rollouts: sampled token ids, and per-token log-probs when they run
    in another dtype than the policy) or ``"eval"``. ``model``: a model folder, checkpoint, ``smollm2`` or a
    served model's name; ``policy`` / ``tokenizer``: the trainer's in-memory model (a ``"model"`` backend that
    decodes it uses it instead of loading ``model``). ``endpoint``: a server URL. ``concurrency``: rows
    decoded together or requests in flight. ``max_context_tokens``: prompt + response budget (``None``: the
    model's). ``engine`` / ``rollout_dtype`` / ``cache``: the transformers decoding loop, its weights' dtype and
    its KV cache kind (``None``: the default)."""

    purpose: Purpose = "eval"
    model: Optional[str] = None
    policy: Any = None
    tokenizer: Any = None
    endpoint: Optional[str] = None
    api_key: Optional[str] = None
    dtype: str = "float32"
    device: Optional[str] = None
    seed: int = 0
    concurrency: int = 16
    max_context_tokens: Optional[int] = None
    timeout: float = 60.0
    retries: int = 2
    engine: str = "auto"
    rollout_dtype: str = "auto"
    cache: Optional[str] = None
    model_cache_dir: Optional[str] = None


@dataclass(frozen=True)
class BackendSpec:
    """A registered LLM backend (see the module docstring for each field)."""

    name: str
    factory: Callable[[BackendRequest], TextGenerator]
    needs: BackendNeeds
    help: str
    trains: bool = True
    evaluates: bool = True
    weights: WeightSource = "model"
    lora: bool = True
    engine_options: bool = False

    def __post_init__(self) -> None:
        if not self.name or "," in self.name or ":" in self.name:
            raise InvalidArgumentError(f"backend name {self.name!r}: use a plain word (no ',' or ':')")
        if self.needs not in get_args(BackendNeeds):
            raise InvalidArgumentError(f"backend {self.name!r}: needs={self.needs!r}; use 'model' or 'server'")
        if self.weights not in get_args(WeightSource):
            raise InvalidArgumentError(
                f"backend {self.name!r}: weights={self.weights!r}; use 'policy', 'model' or 'server'"
            )

    def make(self, request: BackendRequest) -> TextGenerator:
        """The backend's generator for ``request``; a missing model or URL is refused by name first."""
        given = request.endpoint if self.needs == "server" else (request.model or request.policy is not None)
        if not given:
            what = "a server URL (endpoint)" if self.needs == "server" else "a model (folder, checkpoint or 'smollm2')"
            raise InvalidArgumentError(f"backend {self.name!r} needs {what}")
        return self.factory(request)


_REGISTRY: dict[str, BackendSpec] = {}


def register_backend(spec: BackendSpec, *, overwrite: bool = False) -> BackendSpec:
    """Add ``spec`` under ``spec.name`` (refused if taken, unless ``overwrite``)."""
    if spec.name in _REGISTRY and not overwrite:
        raise InvalidArgumentError(f"backend {spec.name!r} is already registered; pass overwrite=True to replace it")
    _REGISTRY[spec.name] = spec
    return spec


def backend_names(
    *,
    trains: Optional[bool] = None,
    evaluates: Optional[bool] = None,
    needs: Optional[BackendNeeds] = None,
    lora: Optional[bool] = None,
) -> tuple[str, ...]:
    """The registered backend names, in registration order, matching every filter given."""
    return tuple(
        s.name
        for s in _REGISTRY.values()
        if (trains is None or s.trains == trains)
        and (evaluates is None or s.evaluates == evaluates)
        and (needs is None or s.needs == needs)
        and (lora is None or s.lora == lora)
    )


def get_backend(name: str, *, purpose: Optional[Purpose] = None, key: str = "backend") -> BackendSpec:
    """The spec registered under ``name``; with ``purpose``, refused when the backend cannot serve it. The error
    names ``key`` (e.g. ``rollout_backend``) and the valid choices."""
    spec = _REGISTRY.get(name)
    if purpose == "train":
        choices = backend_names(trains=True)
    elif purpose == "eval":
        choices = backend_names(evaluates=True)
    else:
        choices = backend_names()
    if spec is None or spec.name not in choices:
        what = "is not a registered backend" if spec is None else f"cannot be used to {purpose}"
        raise InvalidArgumentError(f"{key}={name!r} {what}; use one of {', '.join(choices)}")
    return spec


def backend_help(*, trains: Optional[bool] = None, evaluates: Optional[bool] = None) -> str:
    """``"name (help), ..."`` for the backends matching the filters: the CLI's help text."""
    return ", ".join(f"{n} ({_REGISTRY[n].help})" for n in backend_names(trains=trains, evaluates=evaluates))


def _transformers(request: BackendRequest) -> TextGenerator:
    """A local Hugging Face model decoded in-process: the trainer's policy, or ``model`` opened (a folder, a
    checkpoint, a LoRA adapter merged into its base, ``smollm2``)."""
    from .decoding import DecodingConfig
    from .pretrained import open_model
    from .transformers_backend import TransformersGenerator

    if request.policy is not None:
        policy, tokenizer = request.policy, request.tokenizer
    else:
        policy, tokenizer = open_model(str(request.model), dtype=request.dtype)
    policy_dtype = str(next(policy.parameters()).dtype).removeprefix("torch.")
    rollout_dtype = "auto" if request.rollout_dtype in ("auto", policy_dtype) else request.rollout_dtype
    generator = TransformersGenerator(
        policy,
        tokenizer,
        device=request.device,
        max_batch_size=request.concurrency,
        max_context_tokens=request.max_context_tokens,
        seed=request.seed,
        decoding=DecodingConfig(cache=request.cache) if request.cache is not None else None,
        engine=request.engine,
        rollout_dtype=rollout_dtype,
        logprobs=request.purpose == "train" and rollout_dtype != "auto",
    )
    if request.purpose == "train" and rollout_dtype != "auto" and generator.engine is None:
        logger.warning(
            "rollout_dtype=%s is not used: rollout_engine=auto decodes with transformers' loop on %s, "
            "in the policy's %s",
            rollout_dtype,
            generator.device,
            policy_dtype,
        )
    return generator


def _vllm(request: BackendRequest) -> TextGenerator:
    """vLLM in-process on a GPU, from ``model`` (a checkpoint's policy folder; no LoRA adapters). An evaluation's
    ``float32`` (eval's CPU default) runs in ``bfloat16``."""
    from .bundled_model import resolve_model_path
    from .pretrained import resolve_checkpoint
    from .vllm_backend import VLLMGenerator

    path = resolve_model_path(resolve_checkpoint(str(request.model)), cache_dir=request.model_cache_dir)
    dtype = "bfloat16" if request.purpose == "eval" and request.dtype == "float32" else request.dtype
    if request.max_context_tokens:
        return VLLMGenerator(path, dtype=dtype, seed=request.seed, max_model_len=request.max_context_tokens)
    return VLLMGenerator(path, dtype=dtype, seed=request.seed)


def _vllm_server(request: BackendRequest) -> TextGenerator:
    """A ``vllm serve`` endpoint that takes the trainer's weights after every update."""
    from .vllm_server import VLLMServerGenerator

    return VLLMServerGenerator(str(request.endpoint), seed=request.seed, concurrency=request.concurrency)


def _openai(request: BackendRequest) -> TextGenerator:
    """Any OpenAI-compatible endpoint (``vllm serve``, SGLang, llama.cpp...), with concurrent requests, a
    per-request timeout and bounded retries."""
    from .openai_client import OpenAICompatibleGenerator

    return OpenAICompatibleGenerator(
        str(request.endpoint),
        request.model or "default",
        api_key=request.api_key,
        timeout=request.timeout,
        max_retries=request.retries,
        concurrency=request.concurrency,
    )


register_backend(
    BackendSpec(
        "transformers",
        _transformers,
        "model",
        "a local Hugging Face model, checkpoint or LoRA adapter, or 'smollm2', run in-process",
        weights="policy",
        engine_options=True,
    )
)
register_backend(BackendSpec("vllm", _vllm, "model", "the same with vLLM on a GPU, LoRA adapters excepted", lora=False))
register_backend(
    BackendSpec(
        "vllm-server",
        _vllm_server,
        "server",
        "a `vllm serve` endpoint that takes the policy's weights after each update",
        evaluates=False,
        weights="server",
        lora=False,
    )
)
register_backend(
    BackendSpec(
        "openai",
        _openai,
        "server",
        "any OpenAI-compatible endpoint (vllm serve, SGLang, llama.cpp...)",
        trains=False,
    )
)
