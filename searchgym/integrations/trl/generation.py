"""Generation inside a TRL ``rollout_func``: the trainer's own backend, one batched call per turn.

:class:`TrainerGeneration` calls ``GRPOTrainer._generate_single_turn(prompt_ids, None, {}, 1)``, the
method TRL's own multi-turn tool loop calls after each tool result (read at TRL 1.16): it generates
with whatever the trainer was configured with — vLLM colocate, vLLM server or transformers — syncs
vLLM's weights, and returns the sampled ids (up to ``max_completion_length`` new tokens, stopping at
EOS) and, with vLLM, their log-probs. A TRL without that method is refused with a clear error.

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

from typing import Optional, Sequence

from ...errors import SearchGymRuntimeError

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


class TrainerGeneration:
    """Batched generation with a ``GRPOTrainer``'s backend (see the module docstring)."""

    def __init__(self, trainer) -> None:
        if not callable(getattr(trainer, "_generate_single_turn", None)):
            import trl

            raise SearchGymRuntimeError(
                f"searchgym's rollout_func generates through GRPOTrainer._generate_single_turn, which TRL "
                f"{trl.__version__} does not have; install TRL {TRL_VERSION_READ} "
                f"(pip install 'trl=={TRL_VERSION_READ}')"
            )
        self.trainer = trainer
        accel = getattr(trainer, "accelerator", None)
        self.processes = int(getattr(accel, "num_processes", 1) or 1)
        self.calls = 0

    def __call__(self, prompts: list[list[int]]) -> tuple[list[list[int]], Optional[list[list[float]]]]:
        """Sample one turn for each prompt (token ids): ``(ids per prompt, log-probs per prompt or None)``."""
        self.calls += 1
        ids, logprobs = self.trainer._generate_single_turn(prompts, None, {}, 1)
        ids = [[int(t) for t in row] for row in ids]
        if logprobs is not None:
            logprobs = [[float("nan") if x is None else float(x) for x in row] for row in logprobs]
        return ids, logprobs

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
        tok = getattr(self.trainer.processing_class, "tokenizer", self.trainer.processing_class)
        self([[int(tok.eos_token_id)]])
