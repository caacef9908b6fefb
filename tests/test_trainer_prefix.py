"""Shared-prompt scoring (agents/prefix.py) gives the same log-probs, loss and gradients as scoring
every full sequence, for the policy (with gradient) and the reference (no gradient).

Tolerance: both paths compute the same attention over the same keys and values in fp32; only the
order of floating-point sums differs (a [U, P] prompt batch and a [B, S] completion batch pick
other matmul blockings than one [B, T] batch). fp32 has a 2^-24 ≈ 6e-8 unit round-off; sums over a
hidden size of 64-256 and a few layers stay within ~1e-6 relative, so log-probs are compared at
atol 1e-5 and gradients at rtol 1e-4 / atol 1e-6 (a real bug -- a wrong position, a missed
prefix token -- moves them by 1e-2 or more).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from searchgym.llm.sequences import collate, encode_trajectory  # noqa: E402
from searchgym.llm.shared_prefix import can_share, pack_shared, shared_token_logprobs, worth_sharing  # noqa: E402
from searchgym.training.losses import policy_loss, token_logprobs  # noqa: E402
from tests.support.tiny_lm import build_model, build_tokenizer  # noqa: E402
from tests.support.trajectories import segmented_trajectory as _traj_of  # noqa: E402


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


def _traj(question: str, agent_texts: list[str]):
    return _traj_of(agent_texts, question=question)


def _batch(tok):
    """Two prompts of different lengths, 3 + 2 completions of different lengths, multi-turn."""
    q1, q2 = "Where was Alice Varn born?", "Which company did Bob Varn found in the city of Ostrel in 1204?"
    trajs = [
        _traj(q1, ["<answer> Tarsk </answer>"]),
        _traj(q1, ["<search> Alice Varn </search>", "<answer> Tarsk </answer>"]),
        _traj(
            q2, ["<think> hmm </think><search> Bob </search>", "<search> Dura Labs </search>", "<answer> x </answer>"]
        ),
        _traj(q1, ["<think> long thought about Merovia and Ostrel </think><answer> Ostrel </answer>"]),
        _traj(q2, ["<answer> Dura Labs </answer>"]),
    ]
    enc = [encode_trajectory(tok, t) for t in trajs]
    ids, attn, mask, adv = collate(enc, tok.pad_token_id, [[1.0], [-0.5], [0.7, 0.2, -1.0], [0.3], [-1.5]])
    return enc, ids, attn, mask, adv


def _loss_and_grads(model, score, mask, adv, ref):
    model.zero_grad(set_to_none=True)
    logp, ent = score(model)
    loss, _ = policy_loss(logp, logp.detach() + 0.05, ref, adv, mask, kl_coef=0.1)
    loss.backward()
    return logp.detach(), ent, float(loss.detach()), {k: p.grad.clone() for k, p in model.named_parameters()}


def test_shared_prompt_scoring_matches_full_sequences(tok):
    model = build_model(tok, seed=3, hidden=96, layers=3)
    model.train()  # dropout is 0 in this config: train mode only to match the trainer
    enc, ids, attn, mask, adv = _batch(tok)
    seqs, prompts = [e.input_ids for e in enc], [e.prompt_len for e in enc]
    assert worth_sharing(seqs, prompts)
    packed = pack_shared(seqs, prompts, tok.pad_token_id)
    assert packed.num_prefixes == 2 and packed.suffix_ids.shape[1] < ids.shape[1]
    start = min(e.first_agent_token for e in enc)
    ref_model = build_model(tok, seed=4, hidden=96, layers=3).eval()
    with torch.no_grad():
        ref_full = token_logprobs(ref_model, ids, attn, start=start)[0]
        ref_shared = shared_token_logprobs(ref_model, packed)[0]
    on = mask.bool()
    assert torch.allclose(ref_full[on], ref_shared[on], atol=1e-5)

    full = _loss_and_grads(
        model, lambda m: token_logprobs(m, ids, attn, with_entropy=True, start=start), mask, adv, ref_full
    )
    shared = _loss_and_grads(model, lambda m: shared_token_logprobs(m, packed, with_entropy=True), mask, adv, ref_full)
    assert torch.allclose(full[0][on], shared[0][on], atol=1e-5)
    assert torch.allclose(full[1][on], shared[1][on], atol=1e-4)  # entropy
    assert shared[2] == pytest.approx(full[2], rel=1e-5, abs=1e-7)
    for name, g in full[3].items():
        assert torch.allclose(g, shared[3][name], rtol=1e-4, atol=1e-6), name
    assert sum(float(g.abs().sum()) for g in full[3].values()) > 0


def test_a_shifted_prefix_would_be_caught(tok):
    """Sanity of the test's tolerance: scoring against a one-token-shifted target is far outside it."""
    model = build_model(tok, seed=3, hidden=96, layers=3)
    enc, ids, attn, mask, _ = _batch(tok)
    with torch.no_grad():
        good = token_logprobs(model, ids, attn)[0]
        shifted = token_logprobs(model, torch.roll(ids, 1, dims=1), attn)[0]
    on = mask.bool()
    assert (good[on] - shifted[on]).abs().max() > 1e-2


def test_nothing_to_share_falls_back(tok):
    enc, *_ = _batch(tok)
    one_each = [enc[0], enc[2]]
    assert not worth_sharing([e.input_ids for e in one_each], [e.prompt_len for e in one_each])
    with pytest.raises(ValueError, match="at least 2 tokens"):
        pack_shared([[5], [5, 6]], [1, 1], 0)


def test_sharing_is_what_was_asked_unless_gradient_checkpointing_is_on():
    """The one rule the RL update (``share_prompt``) and SFT (``share_prefix``) follow: the two-call forward does
    not support gradient checkpointing."""
    assert can_share(True, False) and not can_share(True, True) and not can_share(False, False)


def test_trainer_update_is_the_same_with_and_without_prompt_sharing(tmp_path, tok):
    """One optimise() call with share_prompt on and off: same loss statistics and the same gradients
    (compared before Adam, whose first step is ~lr·sign(g) and so turns 1e-12 noise on near-zero
    gradient entries into a full ±lr step)."""
    from searchgym.training.selfplay_config import TrainConfig
    from searchgym.training.selfplay_trainer import SelfPlayTrainer

    trajs = [
        _traj("Where was Alice Varn born?", [a])
        for a in ("<answer> Tarsk </answer>", "<answer> Ostrel </answer>", "<search> Alice </search>")
    ]
    out = []
    for share in (True, False):
        cfg = TrainConfig(
            device="cpu",
            batch_size=1,
            group_size=3,
            lr=1e-3,
            warmup_steps=0,
            kl_coef=0.05,
            output_dir=str(tmp_path / str(share)),
            tensorboard=False,
            progress=False,
            save_every=0,
            mini_batch_size=8,
            micro_batch_size=8,
            share_prompt=share,
        )
        tr = SelfPlayTrainer(cfg, envs=[object()], model=build_model(tok, seed=1), tokenizer=tok)
        stats = tr.optimise(trajs, [[1.0], [-1.0], [0.5]])
        out.append((stats, {k: p.grad.clone() for k, p in tr.policy.named_parameters()}))
    (s1, w1), (s2, w2) = out
    assert s1["loss"] == pytest.approx(s2["loss"], rel=1e-5, abs=1e-7)
    assert s1["grad_norm"] == pytest.approx(s2["grad_norm"], rel=1e-4)
    for k in w1:
        assert torch.allclose(w1[k], w2[k], rtol=1e-4, atol=1e-6), k
