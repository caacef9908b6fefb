"""A causal-LM stand-in that emits a fixed token script, for exact stop-string / EOS tests.

It follows the call convention :class:`~searchgym.llm.transformers_backend.TransformersGenerator`
uses (``input_ids``, ``attention_mask``, ``position_ids``, ``past_key_values``); the n-th decoding
step of row i puts all probability mass on ``scripts[i][n]``.
"""

from __future__ import annotations

from types import SimpleNamespace


class ScriptedLM:
    """Deterministic 'model': row i generates ``scripts[i]`` token by token (then EOS forever)."""

    def __init__(self, scripts: list[list[int]], vocab_size: int, eos_id: int) -> None:
        import torch

        self.scripts = scripts
        self.vocab_size = vocab_size
        self.eos_id = eos_id
        self.training = False
        self.config = SimpleNamespace(max_position_embeddings=4096)
        self.generation_config = SimpleNamespace(eos_token_id=eos_id)
        self._param = torch.nn.Parameter(torch.zeros(1))
        self._width = None
        self.calls = 0

    def parameters(self):
        yield self._param

    def to(self, device):
        return self

    def eval(self):
        self.training = False
        return self

    def train(self, mode: bool = True):
        self.training = mode
        return self

    def __call__(self, input_ids, attention_mask, **kw):
        import torch

        self.calls += 1
        if self._width is None or input_ids.shape[1] > 1:
            self._width = attention_mask.shape[1]
        step = attention_mask.shape[1] - self._width
        logits = torch.full((input_ids.shape[0], 1, self.vocab_size), -1e9)
        for i in range(input_ids.shape[0]):
            script = self.scripts[i % len(self.scripts)]
            tok = script[step] if step < len(script) else self.eos_id
            logits[i, 0, tok] = 0.0
        return SimpleNamespace(logits=logits)
