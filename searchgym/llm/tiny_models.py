"""Tiny, randomly initialised causal LMs for CPU smoke runs: examples, benchmarks and tests.

Built in well under a second, with no download: a 512-token byte-level BPE tokenizer trained on the
searchgym prompt texts (ChatML special tokens and a chat template) and a small Llama whose weights
depend only on a seed. They are real ``transformers`` classes, so generation, the trainers and the TRL
integration run exactly the code paths a real model would — only what the model writes is noise.
``examples/trl_grpo.py --model tiny`` and ``benchmarks/bench_trl.py --model tiny`` use them, which is
why they live in the package rather than in the test suite.

:func:`scripted_model` is the same Llama with ``generate`` replaced by a script (its forward pass,
log-probs and gradients stay real): for runs that need the policy to search and answer on cue.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable

__all__ = [
    "CHAT_TEMPLATE",
    "QWEN25_TEMPLATE",
    "build_tokenizer",
    "build_tool_tokenizer",
    "build_model",
    "save_tiny",
    "tiny_policy",
    "scripted_model",
    "question_of",
]

#: A plain ChatML template (what SmolLM2 ships): renders roles and contents, no tools.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

#: Qwen2.5's chat template, byte-identical to the one Qwen2.5 ships and TRL recognises (renders tools).
QWEN25_TEMPLATE = Path(__file__).resolve().parent / "chat_templates" / "qwen2_5.jinja"

_TOOL_CORPUS = (
    '<tool_call>\n{"name": "search", "arguments": {"query": "Alice Varn"}}\n</tool_call> <tool_response>\n'
    "</tool_response> # Tools You may call one or more functions to assist with the user query."
)
_QUESTION = re.compile(r"Question:\s*(.+?)\n", re.S)


def _corpus() -> list[str]:
    """The merges' training text: every role prompt, the protocol's tags and a few world names."""
    from ..core import prompts

    texts = [v for k, v in vars(prompts).items() if k.isupper() and isinstance(v, str)]
    tags = "<think> </think> <search> </search> <answer> </answer> <question> </question> <information> </information>"
    return texts + [tags] * 20 + ["Alice Varn Tarsk Merovia Ostrel Bob Varn Dura Labs 1204 Weather"] * 10


def build_tokenizer(vocab_size: int = 512, extra: list[str] | None = None):
    """A fast byte-level BPE tokenizer with ChatML specials and a chat template (``extra``: more
    training text for the merges). Deterministic: the same arguments give the same vocabulary."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tk.train_from_iterator(_corpus() + list(extra or []), trainer=trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=tk, eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token="<|im_start|>"
    )
    tok.chat_template = CHAT_TEMPLATE
    tok.padding_side = "left"
    return tok


def build_tool_tokenizer(vocab_size: int = 512):
    """The tiny tokenizer with Qwen2.5's chat template (:data:`QWEN25_TEMPLATE`), which renders tool
    schemas, tool calls and ``role: tool`` messages: for the function-calling protocol."""
    from searchgym.core import prompts

    tok = build_tokenizer(vocab_size, extra=[prompts.SOLVER_TOOLS_PROMPT] * 3 + [_TOOL_CORPUS] * 20)
    tok.chat_template = QWEN25_TEMPLATE.read_text(encoding="utf-8")
    return tok


def build_model(tokenizer, *, seed: int = 0, hidden: int = 64, layers: int = 2):
    """A tiny Llama for ``tokenizer`` whose weights depend only on ``seed`` (the global RNG is left as it was)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        tie_word_embeddings=True,
    )
    state = torch.random.get_rng_state()
    try:  # build deterministically without leaving the global RNG changed
        torch.manual_seed(seed)
        model = LlamaForCausalLM(cfg)
    finally:
        torch.random.set_rng_state(state)
    return model


def tiny_policy(name: str = "tiny", *, seed: int = 0, hidden: int = 256, layers: int = 4):
    """``(model, tokenizer)`` for the command-line names ``"tiny"`` (ChatML template) and ``"tiny-qwen"``
    (Qwen2.5's template, for function calling): a 4-layer, 256-wide Llama by default."""
    if name not in ("tiny", "tiny-qwen"):
        from ..errors import InvalidArgumentError

        raise InvalidArgumentError(f"unknown tiny model {name!r}; use 'tiny' or 'tiny-qwen'")
    tok = build_tool_tokenizer() if name == "tiny-qwen" else build_tokenizer()
    return build_model(tok, seed=seed, hidden=hidden, layers=layers), tok


def save_tiny(dirpath: str | Path, *, seed: int = 0) -> Path:
    """Write a tiny model + tokenizer as an ordinary HF folder (loadable by ``load_policy``)."""
    tok = build_tokenizer()
    model = build_model(tok, seed=seed)
    path = Path(dirpath)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def scripted_model(tokenizer, script: Callable[[str], str], *, eos: bool = True, seed: int = 0):
    """A tiny Llama (:func:`build_model`) whose ``generate`` writes ``script(context) -> text`` as the next
    turn of each row (then EOS when ``eos``), at most ``generation_config.max_new_tokens`` ids, right-padded
    like ``transformers.generate``. The script reads what the turn is from the decoded context (how many
    tool results / information blocks it holds), so one policy serves TRL's tool loop and searchgym's
    ``rollout_func``; the forward pass (log-probs, loss, gradients) is the real model's."""
    import torch
    from transformers import LlamaForCausalLM

    base = build_model(tokenizer, seed=seed)

    class ScriptedLlama(LlamaForCausalLM):
        """The tiny Llama with a scripted ``generate``."""

        def generate(self, input_ids=None, attention_mask=None, generation_config=None, **kwargs):
            """Each row's context + the script's next turn (see :func:`scripted_model`)."""
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
    # every match ends at a newline: searching up to the last one finds the same matches, without rescanning
    # the unfinished last line from each "Question:" on it (O(n²))
    found = _QUESTION.findall(context, 0, context.rfind("\n") + 1)
    return found[-1].strip() if found else ""
