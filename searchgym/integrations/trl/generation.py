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
from contextlib import contextmanager
from typing import Any, Iterator, Optional, Sequence

from ...errors import InvalidArgumentError, SearchGymRuntimeError

__all__ = ["TrainerGeneration", "cut_at_stop", "TRL_VERSION_READ"]

#: The TRL release whose GRPOTrainer internals this module was written and tested against.
TRL_VERSION_READ = "1.16.0"


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

    ``stops``: strings that end a turn (the tag protocol's closing tags; empty: EOS only)."""

    def __init__(self, trainer, stops: Sequence[str] = ()) -> None:
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

    def __call__(
        self, prompts: list[list[int]], max_new_tokens: Optional[int] = None
    ) -> tuple[list[list[int]], Optional[list[list[float]]]]:
        """Sample one turn for each prompt (token ids), at most ``max_new_tokens`` each (default: the
        trainer's ``max_completion_length``): ``(ids per prompt, log-probs per prompt or None)``."""
        cap = int(self.trainer.max_completion_length if max_new_tokens is None else max_new_tokens)
        if cap < 1:
            raise InvalidArgumentError(f"max_new_tokens={cap} must be >= 1")
        self.calls += 1
        t = self.trainer
        if getattr(t, "use_vllm", False):
            with _lent(t.vllm_generation, "max_completion_length", cap):
                ids, logprobs = t._generate_single_turn(prompts, None, {}, 1)
        elif getattr(t, "use_transformers_continuous_batching", False):
            with _lent(t, "generation_config", self._config(cap, stops=False)):
                ids, logprobs = t._generate_single_turn(prompts, None, {}, 1)
        else:
            ids, logprobs = self._transformers(prompts, cap), None
        ids = [[int(x) for x in row][:cap] for row in ids]
        if logprobs is not None:
            logprobs = [[float("nan") if x is None else float(x) for x in row][:cap] for row in logprobs]
        return ids, logprobs

    def _config(self, cap: int, *, stops: bool):
        """A copy of the trainer's ``GenerationConfig`` with ``max_new_tokens=cap`` (and the stop strings)."""
        config = copy.deepcopy(self.trainer.generation_config)
        config.max_new_tokens = cap
        if stops and self.stops:
            config.stop_strings = list(self.stops)
        return config

    def _transformers(self, prompts: list[list[int]], cap: int) -> list[list[int]]:
        """TRL's plain transformers path (``_generate_single_turn``'s, read at TRL 1.16) with the per-turn
        cap and the stop strings; each row's sampled ids up to its first EOS or stop string (kept)."""
        import torch
        from trl.models.utils import unwrap_model_for_generation
        from trl.trainer.utils import pad

        t = self.trainer
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
