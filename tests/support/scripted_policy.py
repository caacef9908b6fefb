"""A tiny causal LM whose ``generate`` writes scripted turns: for training-framework tests (TRL) that need
the model to search, answer and make mistakes on cue.

The model is the real tiny Llama of :mod:`tests.support.tiny_lm` (its forward pass, log-probs, loss
and gradients are real); only sampling is replaced: ``generate`` decodes each row's context, asks
``script(context) -> text`` for the next turn and returns the context plus that text's token ids
(and EOS when ``eos=True``), right-padded like ``transformers.generate``. The script reads what the
turn is from the context (how many tool results / information blocks it holds), so the same policy
serves TRL's own tool loop and searchgym's rollout_func.
"""

from __future__ import annotations

import re
from typing import Callable

QUESTION = re.compile(r"Question:\s*(.+?)\n", re.S)


def scripted_model(tokenizer, script: Callable[[str], str], *, eos: bool = True, seed: int = 0):
    """A tiny Llama (``build_model``) whose ``generate`` follows ``script`` (see the module docstring)."""
    import torch
    from transformers import LlamaForCausalLM

    from tests.support.tiny_lm import build_model

    base = build_model(tokenizer, seed=seed)

    class ScriptedLlama(LlamaForCausalLM):
        def generate(self, input_ids=None, attention_mask=None, generation_config=None, **kwargs):  # noqa: D401
            limit = getattr(generation_config, "max_new_tokens", None) or 64
            rows = []
            for ids, mask in zip(input_ids, attention_mask):
                context = tokenizer.decode(ids[mask.bool()].tolist())
                new = tokenizer.encode(script(context), add_special_tokens=False)
                if eos:
                    new = new + [tokenizer.eos_token_id]
                rows.append(ids.tolist() + new[:limit])
            width = max(len(r) for r in rows)
            pad = tokenizer.pad_token_id
            return torch.tensor([r + [pad] * (width - len(r)) for r in rows], device=input_ids.device)

    model = ScriptedLlama(base.config)
    model.load_state_dict(base.state_dict())
    return model


def question_of(context: str) -> str:
    """The question of a Solver prompt inside a decoded context (the last ``Question: ...`` line)."""
    found = QUESTION.findall(context)
    return found[-1].strip() if found else ""
