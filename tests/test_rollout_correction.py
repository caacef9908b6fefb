"""bf16 rollouts of a float32 policy: the sampler's log-probs are recorded next to the sampled ids and the
update weights each token's policy-gradient term by the truncated importance ratio
``min(exp(logp_train_old - logp_rollout), rollout_is_cap)`` (TIS, as verl's ``rollout_is="token"``).

With the rollouts in the policy's own dtype nothing is recorded and the loss is the uncorrected one;
with a synthetic mismatch the weights are exactly the clipped ratios. Also: the choice of engine and
rollout dtype in ``TrainConfig``, ``searchgym eval`` and the SFT rejection-sampling config.
"""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from searchgym.agents.eval_agents import AgentSpec, make_agent  # noqa: E402
from searchgym.core.llm import GenerationConfig  # noqa: E402
from searchgym.core.types import Segment, Task, Trajectory, Turn  # noqa: E402
from searchgym.llm.sequences import (  # noqa: E402
    SAMPLED_IDS_KEY,
    SAMPLED_LOGPROBS_KEY,
    collate_rollout_logprobs,
    encode_trajectory,
    record_sampled,
)
from searchgym.llm.transformers_backend import TransformersGenerator  # noqa: E402
from searchgym.training import selfplay_update as update_module  # noqa: E402
from searchgym.training.losses import policy_loss, truncated_is_weights  # noqa: E402
from searchgym.training.selfplay_config import RESUME_MUTABLE, TrainConfig  # noqa: E402
from searchgym.training.selfplay_trainer import SelfPlayTrainer  # noqa: E402
from searchgym.training.sft_config import SFTConfig  # noqa: E402
from tests.support.tiny_lm import build_model, build_tokenizer, save_tiny  # noqa: E402


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


def _trainer(tmp_path, tok, world, **overrides) -> SelfPlayTrainer:
    """A trainer on one two-turn KGSolverGroup-v0 env (G = 2) with a random tiny float32 policy."""
    import gymnasium as gym

    import searchgym  # noqa: F401

    env = gym.make("KGSolverGroup-v0", world=world, group_size=2, max_turns=2)
    base = dict(
        device="cpu",
        batch_size=2,
        group_size=2,
        max_turns=2,
        max_new_tokens=8,
        lr=1e-4,
        warmup_steps=0,
        kl_coef=0.0,
        output_dir=str(tmp_path / "run"),
        tensorboard=False,
        progress=False,
        save_every=0,
        mini_batch_size=16,
        micro_batch_size=16,
        rollout_engine="static",
    )
    base.update(overrides)
    return SelfPlayTrainer(TrainConfig(**base), envs=[env], model=build_model(tok, seed=3), tokenizer=tok)


def _spy_losses(monkeypatch) -> list[dict]:
    """Record every ``policy_loss`` call the trainer's update makes (its tensors and its result)."""
    calls: list[dict] = []

    def spy(logp, old_logp, ref_logp, advantages, mask, **kw):
        loss, stats = policy_loss(logp, old_logp, ref_logp, advantages, mask, **kw)
        calls.append(dict(logp=logp.detach(), old=old_logp.detach(), adv=advantages, mask=mask, kw=kw, loss=loss))
        return loss, stats

    monkeypatch.setattr(update_module, "policy_loss", spy)
    return calls


# ---------------------------------------------------------------------------------------------- the maths
def test_weights_are_the_clipped_ratios():
    old = torch.tensor([[0.0, 0.5, -0.3, 2.0, -1.0, 0.7]])
    roll = torch.tensor([[0.0, 0.0, 0.0, 0.0, math.nan, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 1.0, 1.0, 0.0]])
    w = truncated_is_weights(old, roll, mask, 2.0)
    want = torch.tensor([[1.0, math.exp(0.5), math.exp(-0.3), 2.0, 1.0, 1.0]])  # NaN rollout, mask 0: weight 1
    assert torch.allclose(w, want, rtol=1e-6) and not w.requires_grad
    assert torch.equal(truncated_is_weights(old, old.clone(), mask, 2.0), torch.ones_like(old))  # no mismatch
    assert truncated_is_weights(torch.tensor([[500.0]]), torch.tensor([[0.0]]), torch.ones(1, 1), 3.0).item() == 3.0
    with pytest.raises(ValueError, match="cap must be > 0"):
        truncated_is_weights(old, roll, mask, 0.0)


def test_weights_multiply_the_policy_gradient_term_only():
    g = torch.Generator().manual_seed(0)
    logp = torch.randn(3, 7, generator=g).requires_grad_(True)
    old = logp.detach() + 0.1 * torch.randn(3, 7, generator=g)
    ref = logp.detach() + 0.2 * torch.randn(3, 7, generator=g)
    adv = torch.randn(3, 1, generator=g).expand(3, 7)
    mask = (torch.rand(3, 7, generator=g) > 0.3).float()
    kw = dict(kl_coef=0.05, clip_low=0.2, clip_high=0.28)
    plain, _ = policy_loss(logp, old, ref, adv, mask, **kw)
    ones, _ = policy_loss(logp, old, ref, adv, mask, is_weights=torch.ones(3, 7), **kw)
    assert torch.equal(plain, ones)  # weights of exactly 1: the same loss, bit for bit
    w = torch.rand(3, 7, generator=g) * 2
    got, stats = policy_loss(logp, old, ref, adv, mask, is_weights=w, **kw)
    ratio = torch.exp(logp - old)
    pg = -torch.minimum(ratio * adv, torch.clamp(ratio, 0.8, 1.28) * adv)
    d = ref - logp
    tok_loss = w * pg + 0.05 * (torch.exp(d) - d - 1)
    want = ((tok_loss * mask).sum(-1) / mask.sum(-1)).mean()
    assert torch.allclose(got, want, atol=1e-6)
    assert stats.is_weight_mean == pytest.approx(float(((w * mask).sum(-1) / mask.sum(-1)).mean()), rel=1e-5)


# ---------------------------------------------------------------------------------- recording and encoding
def test_logprobs_are_recorded_and_encoded_next_to_the_sampled_ids(tok):
    task = Task(id="t", question="q?", answers=["a"])
    traj = Trajectory(role="solver", task=task, prompt="Question: q?")
    traj.segments = [Segment("Question: q?", "prompt")]
    first = tok("<search> a </search>", add_special_tokens=False)["input_ids"]
    second = tok("<answer> a </answer>", add_special_tokens=False)["input_ids"]
    record_sampled(traj, first, [-0.5] * len(first))
    traj.turns.append(Turn(index=0, action="<search> a </search>"))
    traj.segments += [
        Segment("<search> a </search>", "agent", 0),
        Segment("\n<information>x</information>\n", "env", 0),
    ]
    record_sampled(traj, second, None)  # a turn without log-probs: NaN, weight 1
    traj.turns.append(Turn(index=1, action="<answer> a </answer>"))
    traj.segments.append(Segment("<answer> a </answer>", "agent", 1))
    assert traj.metadata[SAMPLED_LOGPROBS_KEY] == [[-0.5] * len(first), None]
    enc = encode_trajectory(tok, traj)
    lps = enc.rollout_logprobs
    assert lps is not None and len(lps) == len(enc.input_ids)
    agent = [i for i, m in enumerate(enc.loss_mask) if m]
    assert [lps[i] for i in agent[: len(first)]] == [-0.5] * len(first)
    assert all(math.isnan(lps[i]) for i in range(len(lps)) if i not in agent[: len(first)])
    shifted = collate_rollout_logprobs([enc])
    assert shifted.shape == (1, len(enc.input_ids) - 1) and shifted[0, agent[0] - 1].item() == -0.5
    cut = encode_trajectory(tok, traj, max_tokens=agent[0] + 2)
    assert len(cut.rollout_logprobs) == len(cut.input_ids)
    with pytest.raises(ValueError, match="one log-prob per sampled id"):
        record_sampled(traj, first, [-0.5])
    plain = Trajectory(role="solver", task=task, prompt="Question: q?")
    plain.segments = [Segment("Question: q?", "prompt")]
    record_sampled(plain, first)
    plain.turns.append(Turn(index=0, action="<search> a </search>"))
    plain.segments.append(Segment("<search> a </search>", "agent", 0))
    assert SAMPLED_LOGPROBS_KEY not in plain.metadata  # nothing recorded: no table, no tensor
    assert encode_trajectory(tok, plain).rollout_logprobs is None


def test_the_generator_returns_logprobs_only_from_the_engine(tok):
    model = build_model(tok, seed=1)
    gen = TransformersGenerator(model, tok, engine="static", rollout_dtype="bfloat16", logprobs=True)
    res = gen.generate_with_stats(["Tarsk is", "a"], GenerationConfig(max_new_tokens=6, temperature=1.0, seed=2))
    assert res.logprobs == gen.last_logprobs
    assert [len(x) for x in res.logprobs] == [len(x) for x in res.token_ids]
    assert all(lp <= 0 for row in res.logprobs for lp in row)
    assert TransformersGenerator(model, tok, engine="static").generate_with_stats(["a"]).logprobs is None
    with pytest.raises(ValueError, match="logprobs=True needs engine"):
        TransformersGenerator(model, tok, engine="hf", logprobs=True)


# ------------------------------------------------------------------------------------------- the trainer
def test_rollouts_in_the_policy_dtype_record_nothing_and_leave_the_loss_unchanged(
    tmp_path, tok, default_world, monkeypatch
):
    tr = _trainer(tmp_path, tok, default_world, rollout_dtype="float32")
    assert tr.generator.engine_name == "static" and not tr.rollout_correction
    trajs = [s.trajectory for s in tr.collect().samples]
    assert trajs and all(SAMPLED_LOGPROBS_KEY not in t.metadata and t.metadata[SAMPLED_IDS_KEY] for t in trajs)
    calls = _spy_losses(monkeypatch)
    out = tr.optimise(trajs, [[1.0], [-1.0]] * (len(trajs) // 2))
    assert calls and all(c["kw"]["is_weights"] is None for c in calls)
    assert not [k for k in out if k.startswith("rollout_is/")]
    for c in calls:  # the loss is exactly the uncorrected PPO loss of the same tensors
        kw = {k: v for k, v in c["kw"].items() if k != "is_weights"}
        assert torch.equal(c["loss"].detach(), policy_loss(c["logp"], c["old"], None, c["adv"], c["mask"], **kw)[0])


def test_bf16_rollouts_are_weighted_by_the_clipped_ratio(tmp_path, tok, default_world, monkeypatch):
    tr = _trainer(tmp_path, tok, default_world, rollout_dtype="bfloat16", rollout_is_cap=2.0)
    assert tr.generator.engine.runner.dtype == torch.bfloat16 and tr.rollout_correction
    trajs = [s.trajectory for s in tr.collect().samples]
    for t in trajs:  # one log-prob per sampled id, per turn
        ids, lps = t.metadata[SAMPLED_IDS_KEY], t.metadata[SAMPLED_LOGPROBS_KEY]
        assert [len(x) for x in ids] == [len(x) for x in lps] and all(len(x) for x in ids)
    adv = [[1.0], [-1.0]] * (len(trajs) // 2)
    calls = _spy_losses(monkeypatch)
    real = tr.optimise(trajs, adv)
    assert real["rollout_is/covered"] == 1.0  # every agent token had its rollout log-prob
    assert abs(real["rollout_is/log_ratio"]) < 0.05 and real["rollout_is/weight"] == pytest.approx(1.0, abs=0.05)
    assert calls[0]["kw"]["is_weights"] is not None

    # a synthetic mismatch, a function of the token: far below the policy's log-prob for even ids (ratio > cap:
    # clipped to the cap) and 0 for odd ids (ratio = the policy's probability of the token, < 1: kept as is)
    def fake(token: int) -> float:
        return -60.0 if token % 2 == 0 else 0.0

    for t in trajs:
        t.metadata[SAMPLED_LOGPROBS_KEY] = [[fake(x) for x in row] for row in t.metadata[SAMPLED_IDS_KEY]]
    batches: list = []
    collate = update_module.collate
    monkeypatch.setattr(update_module, "collate", lambda *a, **kw: batches.append(collate(*a, **kw)) or batches[-1])
    calls.clear()
    tr.optimise(trajs, adv)
    assert len(batches) == len(calls)  # epochs=1, one mini-batch: one collate per loss, no old-log-prob pass
    checked = capped = 0
    for (ids, _, _, _), c in zip(batches, calls):
        w, old, mask = c["kw"]["is_weights"], c["old"], c["mask"]
        for k in range(mask.shape[0]):
            pos = mask[k].nonzero().flatten()
            roll = torch.tensor([fake(int(x)) for x in ids[k, 1:][pos]])
            want = torch.clamp(torch.exp(old[k, pos] - roll), max=2.0)
            assert torch.allclose(w[k, pos], want, rtol=1e-5, atol=1e-7)
            assert torch.equal(w[k][mask[k] == 0], torch.ones_like(w[k][mask[k] == 0]))
            checked += len(pos)
            capped += int((roll < -1).sum())
            assert torch.all(w[k, pos][roll < -1] == 2.0) and torch.all(w[k, pos][roll == 0] < 1.0)
        kw = {key: v for key, v in c["kw"].items() if key != "is_weights"}
        want_loss = policy_loss(c["logp"], c["old"], None, c["adv"], c["mask"], is_weights=w, **kw)[0]
        assert torch.allclose(c["loss"].detach(), want_loss)
    n_tokens = sum(len(row) for t in trajs for row in t.metadata[SAMPLED_IDS_KEY])
    assert checked == n_tokens and 0 < capped < checked  # both kinds of token were seen


# ------------------------------------------------------------------------------------------ the settings
def test_engine_and_rollout_dtype_settings(tmp_path, tok):
    assert {"rollout_engine", "rollout_dtype"} <= RESUME_MUTABLE and "rollout_is_cap" not in RESUME_MUTABLE
    cfg = TrainConfig()
    assert (cfg.rollout_engine, cfg.rollout_dtype, cfg.rollout_is_cap) == ("auto", "auto", 2.0)
    with pytest.raises(ValueError, match="rollout_engine='paged'"):
        TrainConfig(rollout_engine="paged")
    with pytest.raises(ValueError, match="rollout_dtype='int8'"):
        TrainConfig(rollout_dtype="int8")
    with pytest.raises(ValueError, match="rollout_dtype=bfloat16 runs in the static rollout engine"):
        TrainConfig(rollout_engine="hf", rollout_dtype="bfloat16")
    TrainConfig(rollout_engine="hf", rollout_dtype="float32")  # the policy's own dtype: nothing to do
    with pytest.raises(ValueError, match="rollout_is_cap=0"):
        TrainConfig(rollout_is_cap=0)
    assert SFTConfig().rollout_engine == "auto"
    with pytest.raises(ValueError, match="rollout_engine"):
        SFTConfig(rollout_engine="vllm")

    with pytest.raises(ValueError, match="--engine paged"):
        AgentSpec(kind="transformers", model="tiny", engine="paged")
    with pytest.raises(ValueError, match="--rollout-dtype runs in the static rollout engine"):
        AgentSpec(kind="transformers", model="tiny", engine="hf", rollout_dtype="bfloat16")
    with pytest.raises(ValueError, match="--rollout-dtype runs in the static rollout engine"):
        AgentSpec(kind="scripted", rollout_dtype="bfloat16")
    greedy = AgentSpec(kind="transformers", model="tiny")
    assert "engine" not in greedy.record_settings() and "rollout_dtype" not in greedy.record_settings()
    sampled = AgentSpec(kind="transformers", model="tiny", temperature=0.7, engine="hf", rollout_dtype="auto")
    assert sampled.record_settings()["engine"] == "hf"
    folder = save_tiny(tmp_path / "tiny")
    for engine, dtype, want in (("static", "bfloat16", torch.bfloat16), ("hf", "auto", None)):
        agent = make_agent(AgentSpec(kind="transformers", model=str(folder), engine=engine, rollout_dtype=dtype))
        gen = agent.generator
        assert gen.engine_name == engine
        assert (gen.engine.runner.dtype if gen.engine is not None else None) == want
        agent.close()


def test_eval_command_takes_engine_flags():
    import argparse

    from searchgym.commands import evaluate

    parser = argparse.ArgumentParser()
    evaluate.register(parser.add_subparsers())
    args = parser.parse_args(
        ["eval", "--agent", "transformers", "--model", "x", "--engine", "static", "--rollout-dtype", "bfloat16"]
    )
    assert (args.engine, args.rollout_dtype) == ("static", "bfloat16")
    assert parser.parse_args(["eval"]).engine == "auto"
    with pytest.raises(SystemExit):
        parser.parse_args(["eval", "--engine", "paged"])
