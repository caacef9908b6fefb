"""Generation inside a TRL ``rollout_func``: the trainer's own backend, one batched call per turn.

:class:`TrainerGeneration` calls ``GRPOTrainer._generate_single_turn(prompt_ids, None, {}, 1)``, the
method TRL's own multi-turn tool loop calls after each tool result (read at TRL 1.16): it generates
with whatever the trainer was configured with — vLLM colocate, vLLM server or transformers — syncs
vLLM's weights, and returns the sampled ids (up to ``max_completion_length`` new tokens, stopping at
EOS) and, with vLLM, their log-probs. A TRL without that method is refused with a clear error.

**Per-turn cap and stop strings.** TRL sizes every generation call for a whole rollout
(``max_completion_length`` new tokens), so a turn of a model that never writes a closing tag would eat
the rollout's whole budget. Each call here takes ``max_new_tokens`` (the rollout's per-turn cap, at
most the room left): TRL's plain transformers path is called the way ``_generate_single_turn`` calls
it (same padding, model unwrapping, sampling settings) but with a copy of the trainer's
``GenerationConfig`` whose ``max_new_tokens`` is the cap and whose ``stop_strings`` are the protocol's
stop strings (transformers' ``StopStringCriteria``: each row stops at its own first closing tag); vLLM
and continuous batching get the cap by lending their generator the smaller ``max_tokens`` for the call
(pass vLLM's ``stop`` through ``generation_kwargs``). Every path's rows are cut to the cap afterwards,
so no turn is ever longer than it.

**The rollout engine.** On the plain transformers path a one-process CPU run of a Llama-family model
samples with searchgym's rollout engine (:mod:`searchgym.llm.rollout_engine`, ``engine="auto"``)
instead of ``model.generate``: every row stops inside generation at its own cap (``max_new_tokens`` may
be one cap per prompt), its first stop string or EOS and leaves the batch, prompts' keys/values are
reused across turns, and each row draws from its own stream seeded from torch's global generator (so
TRL's ``set_seed`` makes rollouts reproducible; the draws differ from ``generate``'s). It samples the
same distribution as TRL's generation config, so it is used only when that config is plain sampling
(temperature, top-p; no top-k, min-p, repetition penalty or extra ``generation_kwargs``) and the model's
``generate`` is transformers' own (a subclass that overrides it decides how it generates); otherwise,
with several processes, DeepSpeed/FSDP, on GPU or with ``engine="hf"``, ``model.generate`` runs as above.

With several processes (accelerate / DeepSpeed) generation is a collective call (vLLM server mode
gathers every process's prompts; ZeRO-3 gathers weights), so every process must call it the same
number of times: :meth:`TrainerGeneration.any_active` agrees across processes whether a turn is
still needed, and a process with nothing to generate calls :meth:`TrainerGeneration.idle` (a one-token
prompt whose output is dropped). Multi-process runs were not exercised in this project's tests (CPU,
one process).

:func:`cut_at_stop` ends a tag-protocol turn after its first ``</search>`` / ``</answer>`` /
``</question>`` / ``</tool_call>``: TRL's transformers path cannot stop on strings, so the ids after
the stop string are dropped (the kept ids are exactly the sampled prefix).
"""

from __future__ import annotations

import copy
import weakref
from contextlib import contextmanager
from typing import Any, Iterator, Optional, Sequence, Union

from ...errors import InvalidArgumentError, SearchGymRuntimeError

__all__ = ["TrainerGeneration", "cut_at_stop", "TRL_VERSION_READ"]

#: The TRL release whose GRPOTrainer internals this module was written and tested against.
TRL_VERSION_READ = "1.16.0"
#: ``TrainerGeneration(engine=...)``: the rollout engine where it applies (``auto``), always (``static``:
#: refused where it cannot run), never (``hf``: ``model.generate``)
ENGINES = ("auto", "static", "hf")
#: the keys of TRL's own transformers ``generation_kwargs`` (read at TRL 1.16); any other key (from
#: ``GRPOConfig.generation_kwargs``) changes sampling in a way the engine does not reproduce
_PLAIN_KWARGS = frozenset(
    {
        "max_new_tokens",
        "do_sample",
        "pad_token_id",
        "bos_token_id",
        "eos_token_id",
        "temperature",
        "top_p",
        "top_k",
        "min_p",
        "repetition_penalty",
        "cache_implementation",
    }
)
#: per trainer: ``(id of the unwrapped model, RolloutEngine)``, kept across steps (TRL makes a new
#: ``rollout_func`` call per step; the engine's weight copies and prefix store outlive it)
_ENGINES: "weakref.WeakKeyDictionary[Any, tuple[int, Any]]" = weakref.WeakKeyDictionary()


def cut_at_stop(ids: Sequence[int], tokenizer, stops: Sequence[str]) -> int:
    """How many of ``ids`` to keep: the shortest prefix whose text contains a stop string (all if none)."""
    if not stops or not ids:
        return len(ids)

    def hit(n: int) -> bool:
        text = tokenizer.decode(list(ids[:n]), skip_special_tokens=True)
        return any(s in text for s in stops)

    if not hit(len(ids)):
        return len(ids)
    lo, hi = 1, len(ids)
    while lo < hi:  # the text of a longer prefix extends the shorter one's, so "contains a stop" is monotone
        mid = (lo + hi) // 2
        if hit(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


@contextmanager
def _lent(obj: Any, attr: str, value: Any) -> Iterator[None]:
    """Set ``obj.attr`` to ``value`` for the block, then put the old value back."""
    old = getattr(obj, attr)
    setattr(obj, attr, value)
    try:
        yield
    finally:
        setattr(obj, attr, old)


class TrainerGeneration:
    """Batched generation with a ``GRPOTrainer``'s backend (see the module docstring).

    ``stops``: strings that end a turn (the tag protocol's closing tags; empty: EOS only); ``engine``: see
    :data:`ENGINES` and the module docstring. :attr:`engine_used` says whether the last transformers-path
    call sampled with the rollout engine."""

    def __init__(self, trainer, stops: Sequence[str] = (), *, engine: str = "auto") -> None:
        if engine not in ENGINES:
            raise InvalidArgumentError(f"engine={engine!r}: use one of {', '.join(ENGINES)}")
        if not callable(getattr(trainer, "_generate_single_turn", None)):
            import trl

            raise SearchGymRuntimeError(
                f"searchgym's rollout_func generates through GRPOTrainer._generate_single_turn, which TRL "
                f"{trl.__version__} does not have; install TRL {TRL_VERSION_READ} "
                f"(pip install 'trl=={TRL_VERSION_READ}')"
            )
        self.trainer = trainer
        self.stops = [s for s in stops if s]
        self.tokenizer = getattr(trainer.processing_class, "tokenizer", trainer.processing_class)
        accel = getattr(trainer, "accelerator", None)
        self.processes = int(getattr(accel, "num_processes", 1) or 1)
        self.calls = 0
        self.engine = engine
        self.engine_used = False

    def __call__(
        self, prompts: list[list[int]], max_new_tokens: Union[int, Sequence[int], None] = None
    ) -> tuple[list[list[int]], Optional[list[list[float]]]]:
        """Sample one turn for each prompt (token ids), at most ``max_new_tokens`` each -- one cap for all,
        or one per prompt (default: the trainer's ``max_completion_length``): ``(ids per prompt, log-probs
        per prompt or None)``."""
        if max_new_tokens is None:
            caps = [int(self.trainer.max_completion_length)] * len(prompts)
        elif isinstance(max_new_tokens, int):
            caps = [int(max_new_tokens)] * len(prompts)
        else:
            caps = [int(c) for c in max_new_tokens]
            if len(caps) != len(prompts):
                raise InvalidArgumentError(f"{len(caps)} turn caps for {len(prompts)} prompts; give one per prompt")
        if any(c < 1 for c in caps):
            raise InvalidArgumentError(f"max_new_tokens={min(caps)} must be >= 1")
        cap = max(caps, default=1)
        self.calls += 1
        t = self.trainer
        if getattr(t, "use_vllm", False):
            with _lent(t.vllm_generation, "max_completion_length", cap):
                ids, logprobs = t._generate_single_turn(prompts, None, {}, 1)
        elif getattr(t, "use_transformers_continuous_batching", False):
            with _lent(t, "generation_config", self._config(cap, stops=False)):
                ids, logprobs = t._generate_single_turn(prompts, None, {}, 1)
        else:
            ids, logprobs = self._transformers(prompts, caps), None
        ids = [[int(x) for x in row][:c] for row, c in zip(ids, caps)]
        if logprobs is not None:
            logprobs = [[float("nan") if x is None else float(x) for x in row][:c] for row, c in zip(logprobs, caps)]
        return ids, logprobs

    def _config(self, cap: int, *, stops: bool):
        """A copy of the trainer's ``GenerationConfig`` with ``max_new_tokens=cap`` (and the stop strings)."""
        config = copy.deepcopy(self.trainer.generation_config)
        config.max_new_tokens = cap
        if stops and self.stops:
            config.stop_strings = list(self.stops)
        return config

    def _transformers(self, prompts: list[list[int]], caps: list[int]) -> list[list[int]]:
        """TRL's plain transformers path (``_generate_single_turn``'s, read at TRL 1.16) with the per-turn
        caps and the stop strings; each row's sampled ids up to its first EOS or stop string (kept). The
        rollout engine samples instead where it applies (module docstring)."""
        import torch
        from trl.models.utils import unwrap_model_for_generation
        from trl.trainer.utils import pad

        t = self.trainer
        cap = max(caps)
        tensors = [torch.tensor(p) for p in prompts]
        multiple = getattr(t, "pad_to_multiple_of", None)
        input_ids = pad(
            tensors, padding_value=self.tokenizer.pad_token_id, padding_side="left", pad_to_multiple_of=multiple
        )
        attention = pad(
            [torch.ones_like(x) for x in tensors], padding_value=0, padding_side="left", pad_to_multiple_of=multiple
        )
        device = t.accelerator.device
        with (
            unwrap_model_for_generation(
                t.model_wrapped,
                t.accelerator,
                gather_deepspeed3_params=t.args.ds3_gather_for_generation,
                generation_kwargs=t.generation_kwargs,
                gradient_checkpointing_kwargs=t.args.gradient_checkpointing_kwargs,
            ) as model,
            torch.no_grad(),
            t._dist.summon_full_params(t.model_wrapped, recurse=False),
        ):
            engine = self._engine_for(model)
            self.engine_used = engine is not None
            if engine is not None:
                return self._engine_rows(engine, prompts, caps)
            out = model.generate(
                input_ids=input_ids.to(device),
                attention_mask=attention.to(device),
                generation_config=self._config(cap, stops=True),
                tokenizer=self.tokenizer,
            )
        eos = set(int(e) for e in t.eos_token_ids)
        rows = []
        for row in out[:, input_ids.shape[1] :].tolist():  # a row that stopped early is padded after its end
            row = row[: next((i + 1 for i, tok in enumerate(row) if tok in eos), len(row))]
            rows.append(row[: cut_at_stop(row, self.tokenizer, self.stops)])
        return rows

    def _engine_for(self, model) -> Any:
        """The rollout engine over ``model`` when it applies to this call (module docstring), else ``None``;
        ``engine="static"`` raises naming what stands in the way."""
        if self.engine == "hf":
            return None
        from transformers.generation.utils import GenerationMixin

        from ...llm.rollout_engine import DecoderRunner, EngineConfig, RolloutEngine, auto_engine_reason

        t = self.trainer
        base = DecoderRunner._base(model)
        reason = DecoderRunner.unsupported(model)
        if reason is None and self.processes > 1:
            reason = f"{self.processes} processes share generation (a collective call)"
        if reason is None and (getattr(t, "is_deepspeed_enabled", False) or getattr(t, "is_fsdp_enabled", False)):
            reason = "DeepSpeed/FSDP shards the weights"
        if reason is None and getattr(type(base), "generate", None) is not GenerationMixin.generate:
            reason = f"{type(base).__name__} overrides generate()"
        if reason is None:
            reason = _not_plain_sampling(t.generation_config, getattr(t, "generation_kwargs", None) or {})
        device = next(model.parameters()).device
        if reason is None and self.engine == "auto":
            reason = auto_engine_reason(device)
        if reason is not None:
            if self.engine == "static":
                raise InvalidArgumentError(f"engine='static' cannot sample this TRL run: {reason}; use engine='auto'")
            return None
        held = _ENGINES.get(t)
        if held is None or held[0] != id(model):
            held = (id(model), RolloutEngine(model, EngineConfig()))
            _ENGINES[t] = held
        return held[1]

    def _engine_rows(self, engine, prompts: list[list[int]], caps: list[int]) -> list[list[int]]:
        """Each row's ids sampled by the rollout engine under TRL's temperature / top-p, stopping inside
        generation at its cap, its first stop string or an EOS of the trainer's (kept), seeded from torch's
        global generator."""
        import torch

        from ...llm.rollout_engine import StopChecker, row_seed

        t = self.trainer
        config = t.generation_config
        temperature = 1.0 if config.temperature is None else float(config.temperature)
        greedy = not getattr(config, "do_sample", True) or temperature <= 0
        seed = int(torch.randint(0, 2**62, (1,)).item())
        out = engine.generate(
            [list(p) for p in prompts],
            max_new_tokens=caps,
            temperature=0.0 if greedy else temperature,
            top_p=float(config.top_p if config.top_p is not None else 1.0),
            seeds=[row_seed(seed, i) for i in range(len(prompts))],
            eos_ids=[int(e) for e in t.eos_token_ids],
            stop=StopChecker(self.tokenizer, self.stops),
        )
        return [row[: cut_at_stop(row, self.tokenizer, self.stops)] for row in out.token_ids]

    def any_active(self, local: int) -> bool:
        """Whether any process still has streams to generate for (``local``: this process's count)."""
        if self.processes == 1:
            return local > 0
        import torch

        accel = self.trainer.accelerator
        total = accel.gather(torch.tensor([local], device=accel.device)).sum().item()
        return total > 0

    def idle(self) -> None:
        """Take part in a collective generation call with nothing to generate (multi-process only)."""
        self.calls += 1  # TRL's own call: it joins the same collectives (weight gathers, vLLM's prompt gather)
        self.trainer._generate_single_turn([[int(self.tokenizer.eos_token_id)]], None, {}, 1)


def _not_plain_sampling(config, kwargs: dict) -> Optional[str]:
    """Why TRL's generation config is not the engine's sampler (temperature and top-p only), or ``None``."""
    extra = sorted(set(kwargs) - _PLAIN_KWARGS)
    if extra:
        return f"generation_kwargs sets {', '.join(extra)}"
    if getattr(config, "top_k", None) not in (None, 0):
        return f"top_k={config.top_k}"
    if getattr(config, "min_p", None) not in (None, 0, 0.0):
        return f"min_p={config.min_p}"
    if getattr(config, "repetition_penalty", None) not in (None, 1.0):
        return f"repetition_penalty={config.repetition_penalty}"
    top_p = getattr(config, "top_p", None)
    if top_p is not None and not 0 < top_p <= 1:
        return f"top_p={top_p}"
    return None
