"""Scoring only the loss's positions (agents/lm_head.py) gives the full computation's log-probs,
entropies, loss and gradients there, for plain and shared-prompt scoring, with and without LoRA;
a model whose logits are not ``lm_head(hidden)`` falls back to the full forward pass.

Tolerances as in tests/test_trainer_prefix.py: the same maths with another matmul shape (the LM head
over N selected rows instead of B x T) differs only in fp32 summation order.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from searchgym.llm.lm_head import head_split, scores_at  # noqa: E402
from searchgym.llm.sequences import collate, encode_trajectory  # noqa: E402
from searchgym.llm.shared_prefix import pack_shared, shared_token_logprobs  # noqa: E402
from searchgym.training.losses import policy_loss, token_logprobs  # noqa: E402
from tests.support.tiny_lm import build_model, build_tokenizer  # noqa: E402
from tests.support.trajectories import segmented_trajectory  # noqa: E402


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


def _batch(tok):
    q1, q2 = "Where was Alice Varn born?", "Which company did Bob Varn found in Ostrel?"
    trajs = [
        segmented_trajectory(["<search> Alice Varn </search>", "<answer> Tarsk </answer>"], question=q1),
        segmented_trajectory(["<answer> Ostrel </answer>"], question=q1),
        segmented_trajectory(
            ["<think> hmm </think><search> Bob </search>", "<answer> Dura Labs </answer>"], question=q2
        ),
    ]
    enc = [encode_trajectory(tok, t) for t in trajs]
    ids, attn, mask, adv = collate(enc, tok.pad_token_id, [[1.0], [-0.5], [0.7, -1.0]])
    return enc, ids, attn, mask, adv


def _run(model, score, mask, adv):
    model.zero_grad(set_to_none=True)
    logp, ent = score(model)
    loss, _ = policy_loss(logp, logp.detach() + 0.05, None, adv, mask, kl_coef=0.0)
    loss.backward()
    grads = {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}
    return logp.detach(), ent, float(loss.detach()), grads


def _assert_same(full, fast, mask):
    on = mask.bool()
    assert torch.allclose(full[0][on], fast[0][on], atol=1e-5)
    assert torch.allclose(full[1][on], fast[1][on], atol=1e-4)  # entropy
    assert float(fast[0][~on].abs().sum()) == 0.0 and float(fast[1][~on].abs().sum()) == 0.0
    assert fast[2] == pytest.approx(full[2], rel=1e-5, abs=1e-7)
    assert full[3].keys() == fast[3].keys() and full[3]
    for name, g in full[3].items():
        assert torch.allclose(g, fast[3][name], rtol=1e-4, atol=1e-6), name


@pytest.mark.parametrize("lora", [False, True])
def test_masked_head_matches_full_logits_plain_and_shared(tok, lora):
    model = build_model(tok, seed=3, hidden=96, layers=3)
    if lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
        for name, p in model.named_parameters():  # non-zero B so the adapter changes the hidden states
            if "lora_B" in name:
                torch.nn.init.normal_(p, std=0.05, generator=torch.Generator().manual_seed(1))
    model.train()
    assert head_split(model) is not None
    enc, ids, attn, mask, adv = _batch(tok)
    start = min(e.first_agent_token for e in enc)
    full = _run(model, lambda m: token_logprobs(m, ids, attn, with_entropy=True, start=start), mask, adv)
    fast = _run(model, lambda m: token_logprobs(m, ids, attn, with_entropy=True, start=start, only=mask), mask, adv)
    _assert_same(full, fast, mask)

    packed = pack_shared([e.input_ids for e in enc], [e.prompt_len for e in enc], tok.pad_token_id)
    shared = _run(model, lambda m: shared_token_logprobs(m, packed, with_entropy=True, only=mask), mask, adv)
    _assert_same(full, shared, mask)


class _ScaledLogits(torch.nn.Module):
    """A decoder whose logits are ``2 * lm_head(hidden)``: the fast path would be wrong for it."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.config = inner.config

    def get_decoder(self):
        return self.inner.get_decoder()

    def get_output_embeddings(self):
        return self.inner.get_output_embeddings()

    def forward(self, **kw):
        out = self.inner(**kw)
        out.logits = out.logits * 2.0
        return out


def test_a_model_that_scales_its_logits_uses_the_full_forward(tok):
    model = _ScaledLogits(build_model(tok, seed=5, hidden=64, layers=2)).eval()
    assert head_split(model) is None
    enc, ids, attn, mask, _ = _batch(tok)
    with torch.no_grad():
        full = token_logprobs(model, ids, attn)[0]
        narrowed = token_logprobs(model, ids, attn, only=mask)[0]
    on = mask.bool()
    assert torch.allclose(full[on], narrowed[on], atol=1e-6)


def test_scores_at_leaves_unselected_positions_zero_and_without_gradient():
    head = torch.nn.Linear(8, 11, bias=False)
    hidden = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(0), requires_grad=True)
    targets = torch.randint(0, 11, (2, 5), generator=torch.Generator().manual_seed(1))
    select = torch.tensor([[0, 1, 1, 0, 0], [1, 0, 0, 0, 1]], dtype=torch.bool)
    logp, ent = scores_at(head, hidden, targets, select, with_entropy=True)
    ref = torch.log_softmax(head(hidden), -1).gather(-1, targets[..., None]).squeeze(-1)
    assert torch.allclose(logp[select], ref[select], atol=1e-6) and float(logp[~select].abs().sum()) == 0.0
    assert bool((ent[select] > 0).all()) and float(ent[~select].abs().sum()) == 0.0
    logp.sum().backward()
    assert float(hidden.grad[~select].abs().sum()) == 0.0 and float(hidden.grad[select].abs().sum()) > 0
