"""A tiny, randomly initialised causal LM + byte-level BPE tokenizer for fast CPU tests.

Built in well under a second: a 512-token byte-level BPE trained on the searchgym prompt texts (with
ChatML special tokens and a chat template) and a 2-layer Llama. Real transformers classes, so the
backends and the trainer exercise exactly the code paths a real model would.
"""

from __future__ import annotations

from pathlib import Path

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def _corpus() -> list[str]:
    from searchgym.agents import prompts

    texts = [v for k, v in vars(prompts).items() if k.isupper() and isinstance(v, str)]
    tags = "<think> </think> <search> </search> <answer> </answer> <question> </question> <information> </information>"
    return texts + [tags] * 20 + ["Alice Varn Tarsk Merovia Ostrel Bob Varn Dura Labs 1204 Weather"] * 10


def build_tokenizer(vocab_size: int = 512, extra: list[str] | None = None):
    """A fast byte-level BPE tokenizer with ChatML specials and a chat template (``extra``: more
    training text for the merges)."""
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


QWEN25_TEMPLATE = Path(__file__).resolve().parents[1] / "fixtures" / "chat_templates" / "qwen2_5.jinja"


def build_tool_tokenizer(vocab_size: int = 512):
    """The tiny tokenizer with Qwen2.5's chat template (byte-identical to the one Qwen2.5 ships and TRL
    recognises), which renders tool schemas, tool calls and ``role: tool`` messages."""
    from searchgym.core import prompts

    tok = build_tokenizer(vocab_size, extra=[prompts.SOLVER_TOOLS_PROMPT] * 3 + [_TOOL_CORPUS] * 20)
    tok.chat_template = QWEN25_TEMPLATE.read_text(encoding="utf-8")
    return tok


_TOOL_CORPUS = (
    '<tool_call>\n{"name": "search", "arguments": {"query": "Alice Varn"}}\n</tool_call> <tool_response>\n'
    "</tool_response> # Tools You may call one or more functions to assist with the user query."
)


def build_model(tokenizer, *, seed: int = 0, hidden: int = 64, layers: int = 2):
    """A tiny Llama whose weights depend only on ``seed``."""
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


def save_tiny(dirpath: str | Path, *, seed: int = 0) -> Path:
    """Write a tiny model + tokenizer as an ordinary HF folder (loadable by ``load_policy``)."""
    tok = build_tokenizer()
    model = build_model(tok, seed=seed)
    path = Path(dirpath)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path
