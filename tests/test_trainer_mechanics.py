"""Trainer mechanics on a tiny model: masking, advantages, the loss, one update, KL, checkpoint/resume, config."""

from __future__ import annotations

import json
import math

import gymnasium as gym
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from searchgym.core.types import Segment, Task, Trajectory  # noqa: E402
from searchgym.errors import InvalidArgumentError  # noqa: E402
from searchgym.llm.sequences import collate, encode_trajectory  # noqa: E402
from searchgym.training.checkpoints import CheckpointManager, CheckpointMismatchError  # noqa: E402
from searchgym.training.losses import baseline_advantages, group_advantages, policy_loss, token_logprobs  # noqa: E402
from searchgym.training.metrics import MetricsLogger, plot_metrics, read_metrics  # noqa: E402
from searchgym.training.selfplay_config import TrainConfig  # noqa: E402
from searchgym.training.selfplay_trainer import Sample, SelfPlayTrainer  # noqa: E402
from tests.support.tiny_lm import build_model, build_tokenizer  # noqa: E402
from tests.support.train_config import small_train_config  # noqa: E402
from tests.support.trajectories import INFO, segmented_trajectory  # noqa: E402


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


def _traj(agent_texts: list[str], info: str = INFO, role: str = "solver") -> Trajectory:
    return segmented_trajectory(agent_texts, info=info, role=role)


def _config(tmp_path, **kw) -> TrainConfig:
    return small_train_config(tmp_path, **kw)


def _trainer(tmp_path, tok, *, envs=None, seed=0, **kw):
    cfg = _config(tmp_path, **kw)
    if envs is None:
        envs = [object()]  # optimise() never touches the env
    return SelfPlayTrainer(cfg, envs=envs, model=build_model(tok, seed=seed), tokenizer=tok)


# ---------------------------------------------------------------- masking
def test_mask_covers_exactly_the_agent_text(tok):
    agent = [
        "<think> look it up </think><search> Alice Varn </search>",
        "<think> Tarsk </think><answer> Tarsk </answer>",
    ]
    enc = encode_trajectory(tok, _traj(agent))
    kept = [i for i, m in zip(enc.input_ids, enc.loss_mask) if m]
    dropped = [i for i, m in zip(enc.input_ids, enc.loss_mask) if not m]
    assert tok.decode(kept) == "".join(agent)
    assert "<information>" in tok.decode(dropped) and "information" not in tok.decode(kept)
    assert sorted(set(s for s in enc.step_index if s >= 0)) == [0, 1]


def test_no_information_token_ever_carries_gradient(tok):
    """Gradient w.r.t. the logits is exactly zero at every position whose target is prompt or env text."""
    model = build_model(tok)
    enc = [
        encode_trajectory(tok, _traj(["<search> a </search>", "<answer> Tarsk </answer>"])),
        encode_trajectory(tok, _traj(["<search> b c d </search>", "<search> e </search>", "<answer> x </answer>"])),
    ]
    ids, attn, mask, adv = collate(enc, tok.pad_token_id, [[1.0], [-0.5]])
    captured = {}

    def hook(_mod, _inp, out):
        out.retain_grad()
        captured["logits"] = out

    h = model.lm_head.register_forward_hook(hook)
    logp, _ = token_logprobs(model, ids, attn)
    h.remove()
    ref = logp.detach() + 0.1  # non-zero KL term too
    loss, _ = policy_loss(logp, logp.detach(), ref, adv, mask, kl_coef=0.5)
    loss.backward()
    g = captured["logits"].grad  # [B, T, V]; position t predicts token t + 1
    per_pos = g[:, :-1, :].abs().sum(-1)
    assert torch.all(per_pos[mask == 0] == 0)
    assert torch.all(per_pos[mask == 1] > 0)
    # every env-inserted token is a masked target
    for b, e in enumerate(enc):
        for t, (m, s) in enumerate(zip(e.loss_mask[1:], e.step_index[1:])):
            assert mask[b, t] == m


def test_scoring_only_the_completion_matches_full_scoring(tok):
    """token_logprobs(start=k) runs the LM head on positions >= k only, with identical values there."""
    model = build_model(tok)
    enc = [encode_trajectory(tok, _traj(["<search> a </search>", "<answer> Tarsk </answer>"]))]
    ids, attn, mask, _ = collate(enc, tok.pad_token_id, [[1.0]])
    start = enc[0].first_agent_token
    full, ent_full = token_logprobs(model, ids, attn, with_entropy=True)
    part, ent_part = token_logprobs(model, ids, attn, with_entropy=True, start=start)
    assert part.shape == full.shape
    assert torch.allclose(part[:, start - 1 :], full[:, start - 1 :], atol=1e-5)
    assert torch.all(part[:, : start - 1] == 0) and torch.all(mask[:, : start - 1] == 0)
    assert torch.allclose(ent_part[:, start - 1 :], ent_full[:, start - 1 :], atol=1e-4)


# ---------------------------------------------------------------- advantages and loss
def test_group_and_baseline_advantages():
    adv = group_advantages([1, 0, 0, 1, 1, 1], ["a", "a", "a", "a", "b", "b"])
    assert adv[:4] == pytest.approx([1.0, -1.0, -1.0, 1.0], abs=1e-5)
    assert adv[4:] == [0.0, 0.0]  # all-equal group: no signal
    assert baseline_advantages([1.0, 0.0, 0.5]) == pytest.approx([0.5, -0.5, 0.0])
    with pytest.raises(ValueError, match="group keys"):
        group_advantages([1, 0], ["a"])


def test_asymmetric_clip_and_k3_kl():
    logp = torch.zeros(2, 3, requires_grad=True)
    old = torch.log(torch.tensor([[1 / 1.5] * 3, [1 / 0.7] * 3]))  # ratios 1.5 (A>0) and 0.7 (A<0)
    adv = torch.tensor([[1.0] * 3, [-1.0] * 3])
    mask = torch.ones(2, 3)
    loss, st = policy_loss(logp, old, None, adv, mask, clip_low=0.2, clip_high=0.28, kl_coef=0.0)
    assert float(loss.detach()) == pytest.approx((-1.28 + 0.8) / 2, abs=1e-5)
    assert st.clip_frac == pytest.approx(1.0)
    loss.backward()
    assert torch.all(logp.grad == 0)  # both clipped: no gradient
    lp = torch.zeros(1, 4)
    ref = torch.tensor([[0.0, 0.5, -0.5, 2.0]])
    _, st = policy_loss(lp, lp, ref, torch.zeros(1, 4), torch.ones(1, 4), kl_coef=1.0)
    expect = sum(math.exp(d) - d - 1 for d in [0.0, 0.5, -0.5, 2.0]) / 4
    assert st.kl == pytest.approx(expect, rel=1e-5)


def test_token_mean_per_sequence_ignores_masked_tokens():
    logp = torch.zeros(2, 4)
    adv = torch.tensor([[1.0, 1.0, 99.0, 99.0], [2.0, 2.0, 2.0, 2.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    loss, _ = policy_loss(logp, logp, None, adv, mask, kl_coef=0.0)
    assert float(loss) == pytest.approx(-(1.0 + 2.0) / 2)


# ---------------------------------------------------------------- one update
def _agent_logp(model, tok, traj) -> float:
    enc = encode_trajectory(tok, traj)
    ids, attn, mask, _ = collate([enc], tok.pad_token_id, [[0.0]])
    with torch.no_grad():
        logp, _ = token_logprobs(model, ids, attn)
    return float((logp * mask).sum())


def test_one_update_raises_positive_and_lowers_negative_completions(tmp_path, tok):
    tr = _trainer(tmp_path, tok, lr=3e-3)
    good = _traj(["<search> Alice Varn </search>", "<answer> Tarsk </answer>"])
    bad = _traj(["<search> weather </search>", "<answer> Ostrel </answer>"])
    before = [_agent_logp(tr.policy, tok, t) for t in (good, bad)]
    stats = tr.optimise([good, bad], [[1.0], [-1.0]])
    after = [_agent_logp(tr.policy, tok, t) for t in (good, bad)]
    assert after[0] > before[0] + 1e-3
    assert after[1] < before[1] - 1e-3
    assert stats["kl"] == 0.0  # policy == reference at step 0
    assert stats["sequences"] == 2


def test_lr_scale_multiplies_one_update_and_leaves_the_schedule(tmp_path, tok):
    """proposer_lr_scale reaches the optimizer as lr_scale: Adam's first step moves each weight by about lr,
    so a scale of 3 moves it 3 times as far, and the scheduled rate is back in place afterwards."""
    traj = _traj(["<search> Alice Varn </search>", "<answer> Tarsk </answer>"])
    moved = []
    for scale in (1.0, 3.0):
        tr = _trainer(tmp_path / str(scale), tok, lr=1e-4)
        before = [p.detach().clone() for p in tr.policy.parameters() if p.requires_grad]
        stats = tr.optimise([traj], [[1.0]], lr_scale=scale)
        after = [p.detach() for p in tr.policy.parameters() if p.requires_grad]
        moved.append(sum(float((a - b).abs().sum()) for a, b in zip(after, before)))
        assert stats["lr"] == pytest.approx(1e-4 * scale)
        assert [g["lr"] for g in tr.optimizer.param_groups] == [pytest.approx(1e-4)] * len(tr.optimizer.param_groups)
    assert moved[1] == pytest.approx(3 * moved[0], rel=0.02)
    with pytest.raises(InvalidArgumentError, match="proposer_lr_scale"):
        _config(tmp_path, proposer_lr_scale=-1.0)


def test_skip_zero_advantage_trains_only_on_informative_sequences(tmp_path, tok):
    """skip_zero_advantage drops all-zero-advantage sequences: an all-zero batch leaves the weights as they
    were (plain GRPO would still step through its KL term), a mixed one trains on the rest."""
    tr = _trainer(tmp_path, tok, lr=1e-2, kl_coef=0.1, skip_zero_advantage=True)
    t = [_traj(["<answer> Tarsk </answer>"]), _traj(["<answer> Ostrel </answer>"])]
    before = [p.detach().clone() for p in tr.policy.parameters()]
    assert tr.optimise(t, [[0.0], [0.0]]) == {"skipped_zero_advantage": 2}
    assert all(torch.equal(a, b) for a, b in zip(before, tr.policy.parameters()))
    stats = tr.optimise(t, [[1.0], [0.0]])
    assert stats["sequences"] == 1 and stats["skipped_zero_advantage"] == 1
    assert not all(torch.equal(a, b) for a, b in zip(before, tr.policy.parameters()))


def test_lora_last_layers_adapts_only_the_top_layers(tmp_path, tok):
    pytest.importorskip("peft")
    from searchgym.training.model_loading import apply_lora

    cfg = _config(tmp_path, lora=True, lora_r=4, lora_last_layers=1, lora_target_modules=["q_proj", "v_proj"])
    model = apply_lora(build_model(tok, layers=3), cfg)
    adapted = {n.split(".layers.")[1].split(".")[0] for n, p in model.named_parameters() if "lora_" in n}
    assert adapted == {"2"}
    bad = _config(tmp_path, lora=True, lora_last_layers=4)
    with pytest.raises(ValueError, match="lora_last_layers=4: .* has 3 decoder layers"):
        apply_lora(build_model(tok, layers=3), bad)


def test_kl_is_zero_at_step_zero_and_positive_after(tmp_path, tok):
    tr = _trainer(tmp_path, tok, lr=1e-2, kl_coef=0.1)
    t = [_traj(["<answer> Tarsk </answer>"]), _traj(["<answer> Ostrel </answer>"])]
    first = tr.optimise(t, [[1.0], [-1.0]])
    second = tr.optimise(t, [[1.0], [-1.0]])
    assert first["kl"] == 0.0
    assert second["kl"] > 0.0


def test_proposer_kl_scale_weighs_the_proposers_kl_term_only(tmp_path, tok):
    """proposer_kl_scale=0: once the policy has moved, the Solver's update still scores the reference and pays
    its KL term, while the Proposer's never runs the reference forward and has no KL term; negative refused."""
    tr = _trainer(tmp_path, tok, lr=1e-2, kl_coef=0.1, proposer_kl_scale=0.0)
    ref_calls = []
    tr.ref_model.get_input_embeddings().register_forward_hook(lambda *_: ref_calls.append(1))
    solver = [Sample("solver", _traj(["<answer> Tarsk </answer>"]), r, {}, "g") for r in (1.0, 0.0)]
    proposer = [Sample("proposer", _traj(["q"], role="proposer"), r, {}, t) for r, t in ((1.0, "g"), (0.0, "h"))]
    tr.update(solver + proposer)  # the first optimizer step: policy and reference part
    ref_calls.clear()
    stats = tr.update(proposer)
    assert "proposer/loss" in stats and stats["proposer/kl"] == 0.0 and not ref_calls
    stats = tr.update(solver)
    assert stats["solver/kl"] > 0.0 and ref_calls
    with pytest.raises(InvalidArgumentError, match="proposer_kl_scale"):
        _config(tmp_path, proposer_kl_scale=-1.0)


def _demo_file(path, role: str = "solver"):
    demo = _traj(["<think> one hop </think><search> Alice Varn </search>", "<answer> Tarsk </answer>"], role=role)
    path.write_text(json.dumps({**demo.to_dict(), "reward": 1.0, "demo": {"kind": role}}) + "\n")
    return encode_trajectory(build_tokenizer(), demo)


def _demo_nll(tr, enc) -> float:
    ids, attn, mask, _ = collate([enc], tr.tokenizer.pad_token_id, [[0.0]], "cpu")
    with torch.no_grad():
        logp = token_logprobs(tr.policy, ids, attn)[0]
    return float(-(logp * mask).sum() / mask.sum())


def test_anchor_loss_pulls_the_solver_towards_its_demonstrations_without_drawing_from_the_run_rng(tmp_path, tok):
    """anchor_coef > 0 (PPO-ptx): the Solver's update adds the demonstrations' NLL, which falls over three
    updates where the same updates without it do not lower it as far; the Proposer's update (anchor_roles=solver)
    adds none; the draws leave the run's rng where the unanchored run leaves it."""
    enc = _demo_file(tmp_path / "demos.jsonl")
    runs = {}
    for coef in (0.0, 5.0):
        tr = _trainer(tmp_path / str(coef), tok, lr=1e-2, anchor_coef=coef, anchor_data=str(tmp_path / "demos.jsonl"))
        before = _demo_nll(tr, enc)
        solver = [Sample("solver", _traj(["<answer> Ostrel </answer>"]), r, {}, "g") for r in (1.0, 0.0)]
        proposer = [Sample("proposer", _traj(["q"], role="proposer"), r, {}, t) for r, t in ((1.0, "g"), (0.0, "h"))]
        stats = [tr.update(solver + proposer) for _ in range(3)]
        runs[coef] = (before, _demo_nll(tr, enc), stats, tr.rng.getstate())
    (b0, a0, s0, rng0), (b1, a1, s1, rng1) = runs[0.0], runs[5.0]
    assert b0 == pytest.approx(b1)  # the same start
    assert a1 < b1 and a1 < a0
    assert all(math.isfinite(s["solver/anchor_nll"]) for s in s1)
    assert not any("solver/anchor_nll" in s for s in s0)
    assert not any("proposer/anchor_nll" in s for s in s1)
    assert rng0 == rng1


def test_mixed_precision_runs_every_forward_of_the_update_in_bfloat16_and_keeps_the_weights_float32(tmp_path, tok):
    """mixed_precision=bfloat16: the update's forwards -- old and new log-probs (two epochs), the KL reference and
    the anchor's demonstrations -- run their linear layers in bf16 under autocast, the weights, their gradients and
    the optimizer state stay float32, and the step's statistics are close to float32's; none runs them in float32.
    A bad value is refused with the choices."""
    _demo_file(tmp_path / "demos.jsonl")
    runs = {}
    for precision in ("none", "bfloat16"):
        tr = _trainer(
            tmp_path / precision,
            tok,
            lr=1e-2,
            epochs=2,
            kl_coef=0.1,
            anchor_coef=1.0,
            anchor_data=str(tmp_path / "demos.jsonl"),
            mixed_precision=precision,
        )
        dtypes: list = []
        hook = torch.nn.modules.module.register_module_forward_hook(
            lambda m, _i, out: dtypes.append(out.dtype) if isinstance(m, torch.nn.Linear) else None
        )
        try:
            solver = [Sample("solver", _traj(["<answer> Ostrel </answer>"]), r, {}, "g") for r in (1.0, 0.0)]
            stats = tr.update(solver)
        finally:
            hook.remove()
        params = [p for p in tr.policy.parameters() if p.requires_grad]
        assert {p.dtype for p in params} == {torch.float32}
        assert {p.grad.dtype for p in params if p.grad is not None} == {torch.float32}
        state = [v for st in tr.policy_update.optimizer.state.values() for v in st.values() if torch.is_tensor(v)]
        assert state and {v.dtype for v in state if v.dim() > 0} == {torch.float32}
        runs[precision] = (dtypes, stats)
    (plain, s32), (mixed, s16) = runs["none"], runs["bfloat16"]
    # 2 epochs: old, new x 2, reference x 2 and the anchor x 2, each a forward through every linear layer
    assert len(plain) == len(mixed) > 0
    assert set(plain) == {torch.float32} and set(mixed) == {torch.bfloat16}
    for key in ("solver/loss", "solver/kl", "solver/anchor_nll", "solver/entropy"):
        assert math.isfinite(s16[key]) and s16[key] == pytest.approx(s32[key], rel=0.05, abs=0.05), key
    with pytest.raises(InvalidArgumentError, match="mixed_precision='fp16': use one of none, bfloat16, auto"):
        _config(tmp_path, mixed_precision="fp16")


def test_anchor_loss_runs_the_demonstrations_shared_instructions_once_with_the_same_update(tmp_path, tok, monkeypatch):
    """share_prompt: the anchor's demonstrations, which open with the same instructions, run that prefix once per
    micro-batch (demo_scoring.pack_shared called); the anchor NLL and the step's gradient match the plain path."""
    import searchgym.training.demo_scoring as demo_scoring

    system = "You are a careful search agent. Think, search one hop at a time, read, then answer. " * 3
    with open(tmp_path / "demos.jsonl", "w") as fh:
        for i, name in enumerate(("Alice Varn", "Bram Ostrel", "Cora Tarsk", "Dov Melin")):
            demo = segmented_trajectory(
                [f"<search> {name} </search>", f"<answer> Town {i} </answer>"], question=f"Where was {name} born?"
            )
            demo.prompt = system + demo.prompt
            demo.segments[0] = Segment(demo.prompt, "prompt")
            fh.write(json.dumps({**demo.to_dict(), "reward": 1.0, "demo": {"kind": "solver"}}) + "\n")
    packs = []
    real = demo_scoring.pack_shared
    monkeypatch.setattr(demo_scoring, "pack_shared", lambda *a, **k: packs.append(1) or real(*a, **k))
    runs = {}
    for share in (False, True):
        packs.clear()
        tr = _trainer(
            tmp_path / str(share),
            tok,
            lr=1e-2,
            share_prompt=share,
            anchor_coef=1.0,
            anchor_batch_size=4,
            anchor_data=str(tmp_path / "demos.jsonl"),
        )
        solver = [Sample("solver", _traj(["<answer> Ostrel </answer>"]), r, {}, "g") for r in (1.0, 0.0)]
        stats = tr.update(solver)
        grads = {n: p.grad.detach().clone() for n, p in tr.policy.named_parameters() if p.grad is not None}
        runs[share] = (len(packs), stats["solver/anchor_nll"], grads)  # the step's gradient stays on the parameters
    assert runs[False][0] == 0 and runs[True][0] >= 1
    assert runs[True][1] == pytest.approx(runs[False][1], rel=1e-4)
    assert runs[True][2].keys() == runs[False][2].keys()
    for name, g in runs[False][2].items():
        torch.testing.assert_close(runs[True][2][name], g, rtol=1e-3, atol=1e-6 * float(g.abs().max()) + 1e-9)


def test_anchor_settings_are_checked(tmp_path, tok):
    with pytest.raises(InvalidArgumentError, match="anchor_coef=1.0 needs demonstrations: set anchor_data"):
        _config(tmp_path, anchor_coef=1.0)
    with pytest.raises(InvalidArgumentError, match="anchor_roles='solvers': use one of solver, proposer, both"):
        _config(tmp_path, anchor_roles="solvers")
    with pytest.raises(InvalidArgumentError, match="anchor_batch_size=0 must be >= 1"):
        _config(tmp_path, anchor_batch_size=0)
    _demo_file(tmp_path / "proposer.jsonl", role="proposer")
    with pytest.raises(InvalidArgumentError, match="has no solver demonstration .*searchgym demos --solver"):
        _trainer(tmp_path, tok, anchor_coef=1.0, anchor_data=str(tmp_path / "proposer.jsonl"))
    with pytest.raises(FileNotFoundError, match="anchor_data=.*missing.jsonl does not exist; make demonstrations"):
        _trainer(tmp_path, tok, anchor_coef=1.0, anchor_data=str(tmp_path / "missing.jsonl"))


def test_sapo_step_advantages_reach_the_right_tokens(tmp_path, tok):
    """With reward=gdcr the solver group uses SAPO: step advantages differ within one trajectory."""
    tr = _trainer(tmp_path, tok, reward="gdcr")
    samples = [
        Sample("solver", _traj(["a", "b"]), r, {}, "g", steps) for r, steps in [(1.0, [0.0, 1.0]), (0.0, [0.5, 0.5])]
    ]
    samples.append(Sample("proposer", _traj(["q"], role="proposer"), 0.5, {}, "g"))
    samples.append(Sample("proposer", _traj(["q"], role="proposer"), 1.0, {}, "h"))
    tables = tr.advantages(samples)
    assert tables[0][0] < tables[0][1] and tables[0][0] > 0  # A_o > 0, second step rewarded more
    assert tables[1] == pytest.approx([-1.0, -1.0], abs=1e-4)  # constant steps: SAPO = GRPO
    assert tables[2] == [-0.25] and tables[3] == [0.25]


# ---------------------------------------------------------------- config
def test_config_defaults_yaml_roundtrip_and_overrides(tmp_path):
    cfg = TrainConfig()
    assert (cfg.lr, cfg.warmup_steps, cfg.batch_size, cfg.group_size, cfg.max_turns) == (1e-6, 5, 256, 5, 10)
    assert (cfg.kl_coef, cfg.clip_low, cfg.clip_high, cfg.temperature, cfg.val_temperature) == (
        0.01,
        0.2,
        0.28,
        1.0,
        0.0,
    )
    cfg.save(tmp_path / "c.yaml")
    assert TrainConfig.load(tmp_path / "c.yaml") == cfg
    new = cfg.with_overrides(["batch_size=8", "lr=3e-5", "lora=true", "env_kwargs={order: shuffle}"])
    assert (new.batch_size, new.lr, new.lora, new.env_kwargs) == (8, 3e-5, True, {"order": "shuffle"})
    with pytest.raises(ValueError, match="unknown config key 'batchsize'"):
        cfg.with_overrides(["batchsize=8"])
    with pytest.raises(ValueError, match="expects an integer"):
        cfg.with_overrides(["batch_size=big"])
    with pytest.raises(ValueError, match="reward="):
        cfg.with_overrides(["reward=dense"])
    with pytest.raises(FileNotFoundError, match="dump-config"):
        TrainConfig.load(tmp_path / "missing.yaml")
    cfg.save(tmp_path / "new" / "folder" / "c.yaml")  # --dump-config into a folder not made yet (was a traceback)
    assert TrainConfig.load(tmp_path / "new" / "folder" / "c.yaml") == cfg
    (tmp_path / "a_file").write_text("")
    with pytest.raises(InvalidArgumentError, match="a_file/c.yaml: a file is in the way of a folder"):
        cfg.save(tmp_path / "a_file" / "c.yaml")


def test_dotted_override_sets_one_entry_of_a_mapping_and_keeps_the_others():
    cfg = TrainConfig().with_overrides(["env_kwargs={proposer_mode: kg, filter_config: {min_words: 10}}"])
    new = cfg.with_overrides(["env_kwargs.filter_config.searches_at_least_required=true", "env_kwargs.order=shuffle"])
    assert new.env_kwargs == {
        "proposer_mode": "kg",
        "filter_config": {"min_words": 10, "searches_at_least_required": True},
        "order": "shuffle",
    }
    assert cfg.env_kwargs == {"proposer_mode": "kg", "filter_config": {"min_words": 10}}  # not changed in place
    made = TrainConfig().with_overrides(["env_kwargs.filter_config.min_words=3"]).env_kwargs
    assert made == {"filter_config": {"min_words": 3}}  # levels made


@pytest.mark.parametrize(
    "item, message",
    [
        ("batch_size.x=1", "batch_size is not a mapping.*batch_size=VALUE"),
        ("env_kwargs.proposer_mode.x=1", "env_kwargs.proposer_mode is 'kg', not a mapping"),
        ("env_kwargs..x=1", "empty name between dots"),
        ("env_kwarg.x=1", "unknown config key 'env_kwarg'"),
    ],
)
def test_a_dotted_override_that_cannot_apply_is_one_line(item, message):
    cfg = TrainConfig().with_overrides(["env_kwargs={proposer_mode: kg}"])
    with pytest.raises(InvalidArgumentError, match=message):
        cfg.with_overrides([item])


# ---------------------------------------------------------------- metrics
def test_metrics_jsonl_and_plot(tmp_path):
    log = MetricsLogger(tmp_path / "m.jsonl")
    for s in range(1, 4):
        log.log(s, {"solver/reward": 0.1 * s, "proposer/reward": 0.5, "update/kl": float("nan")})
    log.close()
    recs = read_metrics(tmp_path / "m.jsonl")
    assert [r["step"] for r in recs] == [1, 2, 3] and recs[0]["update/kl"] is None
    MetricsLogger(tmp_path / "m.jsonl", resume_step=2).close()
    assert [r["step"] for r in read_metrics(tmp_path / "m.jsonl")] == [1, 2]
    png = plot_metrics(recs, tmp_path / "c.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (tmp_path / "bad.jsonl").write_text("{not json\n")
    with pytest.raises(ValueError, match="bad.jsonl:1"):
        read_metrics(tmp_path / "bad.jsonl")


def test_cli_plot(tmp_path, capsys):
    from searchgym.cli import main

    (tmp_path / "m.jsonl").write_text(
        "".join(json.dumps({"step": s, "solver/reward": s / 10}) + "\n" for s in range(5))
    )
    assert main(["plot", str(tmp_path / "m.jsonl"), "--out", str(tmp_path / "c.png")]) == 0
    assert (tmp_path / "c.png").stat().st_size > 1000
    assert main(["plot", str(tmp_path / "none.jsonl")]) == 2
    assert "does not exist" in capsys.readouterr().err


# ---------------------------------------------------------------- checkpoint / resume
class LengthReward(gym.Wrapper):
    """A user reward wrapper (plain gymnasium.Wrapper): reward = a function of the completion length,
    so a random tiny model still gets varied rewards and non-zero advantages."""

    def step(self, action):
        obs, _, term, trunc, info = self.env.step(action)
        for ev in info["rewards"]:
            ev["reward"] = (len(ev["trajectory"].completion) % 7) / 6
        return obs, sum(ev["reward"] for ev in info["rewards"]), term, trunc, info


def _selfplay_envs(n=2):
    import gymnasium as gym

    import searchgym  # noqa: F401

    first = gym.make("KGSelfPlay-v0", group_size=2, max_turns=2)
    raw = [first] + [
        first.unwrapped.clone()
        if hasattr(first.unwrapped, "clone")
        else gym.make("KGSelfPlay-v0", group_size=2, max_turns=2)
        for _ in range(n - 1)
    ]
    return [LengthReward(e) for e in raw]


def _params(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_the_progress_line_names_the_part_of_a_step_that_is_running(tmp_path, tok):
    """A step takes minutes on a CPU and the first has no rate yet: the line says rollouts or update meanwhile."""
    tr = _trainer(tmp_path, tok, envs=_selfplay_envs(), total_steps=2, save_every=0)
    seen: list[str] = []
    for name in ("collect", "update"):
        real = getattr(tr, name)

        def spy(*args, _real=real, **kw):
            seen.append(tr._bar.line())  # what the line would print while this part runs
            return _real(*args, **kw)

        setattr(tr, name, spy)
    tr.train(resume=False, progress=True)
    assert len(seen) == 4 and tr._bar is None
    assert seen[0].startswith("train: 0/2 steps (0%), ? s/step, ETA ?") and seen[0].endswith("now=rollouts")
    assert seen[1].endswith("now=update")
    assert seen[2].startswith("train: 1/2 steps") and "solver=" in seen[2] and seen[2].endswith("now=rollouts")
    assert "proposer=" in seen[3] and seen[3].endswith("now=update")


@pytest.mark.slow
def test_resume_reproduces_an_uninterrupted_run(tmp_path, tok):
    """Run A: 2 steps. Run B: 1 step, 'killed', a new trainer resumes and runs step 2 → identical state."""
    a = _trainer(tmp_path / "a", tok, envs=_selfplay_envs(), total_steps=2)
    a.train(resume=False)
    b = _trainer(tmp_path / "b", tok, envs=_selfplay_envs(), total_steps=1)
    b.train(resume=False)
    del b
    c = _trainer(tmp_path / "b", tok, envs=_selfplay_envs(), total_steps=2)
    c.train(resume=True)
    assert c.step == a.step == 2
    pa, pc = _params(a.policy), _params(c.policy)
    assert all(torch.equal(pa[k], pc[k]) for k in pa)
    sa, sc = a.optimizer.state_dict()["state"], c.optimizer.state_dict()["state"]
    assert all(torch.equal(sa[k]["exp_avg"], sc[k]["exp_avg"]) for k in sa)
    assert a.rng.getstate() == c.rng.getstate() and a.games_played == c.games_played
    init = _params(build_model(tok))
    assert not all(torch.equal(init[k], pa[k]) for k in pa)  # training did move the weights
    ma = [r for r in read_metrics(tmp_path / "a/run/metrics.jsonl")]
    mc = [r for r in read_metrics(tmp_path / "b/run/metrics.jsonl")]
    keys = ("solver/reward", "proposer/reward", "solver/loss", "solver/tokens")
    assert [[r.get(k) for k in keys] for r in ma] == [[r.get(k) for k in keys] for r in mc]


def test_checkpoint_from_a_different_config_is_refused(tmp_path, tok):
    tr = _trainer(tmp_path, tok)
    path = tr.save_checkpoint()
    other = _trainer(tmp_path, tok, group_size=3, lr=1e-4)
    with pytest.raises(CheckpointMismatchError, match="group_size.*lr|lr.*group_size"):
        other.load_checkpoint(path)
    same_but_longer = _trainer(tmp_path, tok, total_steps=50)  # a mutable key: fine
    same_but_longer.load_checkpoint(path)


def test_milestone_checkpoints_outlive_the_newest_kept(tmp_path, tok):
    """keep_checkpoint_every keeps every multiple of it beyond keep_checkpoints, so a run can be scored half-way."""
    tr = _trainer(tmp_path, tok, save_every=2, keep_checkpoints=1, keep_checkpoint_every=4)
    for step in (2, 4, 6, 8, 10):
        tr.step = step
        tr.save_checkpoint()
    kept = sorted(p.name for p in (tmp_path / "run" / "checkpoints").glob("step_*"))
    assert kept == ["step_00000004", "step_00000008", "step_00000010"]
    assert tr.checkpoints.latest().name == "step_00000010"
    with pytest.raises(InvalidArgumentError, match="keep_checkpoint_every=3 .*multiple of save_every=2"):
        _config(tmp_path, save_every=2, keep_checkpoint_every=3)
    with pytest.raises(InvalidArgumentError, match="multiple of save_every=0"):
        _config(tmp_path, save_every=0, keep_checkpoint_every=4)


def test_interrupted_save_keeps_the_previous_checkpoint(tmp_path, tok, monkeypatch):
    tr = _trainer(tmp_path, tok)
    first = tr.save_checkpoint()
    tr.step = 1

    def boom(*a, **k):
        raise KeyboardInterrupt("killed mid-save")

    monkeypatch.setattr(tr.tokenizer, "save_pretrained", boom)
    with pytest.raises(KeyboardInterrupt):
        tr.save_checkpoint()
    mgr = CheckpointManager(tmp_path / "run" / "checkpoints")
    assert mgr.latest() == first
    assert not any(p.name.startswith(".") and p.is_dir() for p in (tmp_path / "run" / "checkpoints").iterdir())


def test_lora_trains_only_the_adapter_and_checkpoints_it(tmp_path, tok):
    pytest.importorskip("peft")
    tr = _trainer(tmp_path, tok, lora=True, lora_r=4, lora_alpha=8, lr=1e-2, kl_coef=0.1)
    trainable = [n for n, p in tr.policy.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    assert tr.ref_model is None  # the reference is the base model with the adapter disabled
    t = [_traj(["<answer> Tarsk </answer>"]), _traj(["<answer> Ostrel </answer>"])]
    assert tr.optimise(t, [[1.0], [-1.0]])["kl"] == 0.0
    assert tr.optimise(t, [[1.0], [-1.0]])["kl"] > 0.0
    path = tr.save_checkpoint()
    assert (path / "policy" / "adapter_model.safetensors").is_file()
    saved = {n: p.detach().clone() for n, p in tr.policy.named_parameters() if p.requires_grad}
    fresh = _trainer(tmp_path, tok, lora=True, lora_r=4, lora_alpha=8, lr=1e-2, kl_coef=0.1)
    fresh.load_checkpoint(path)
    now = {n: p for n, p in fresh.policy.named_parameters() if p.requires_grad}
    assert all(torch.equal(saved[n], now[n]) for n in saved)


def _lora_trainer(tmp_path, tok, seed: int, **kw) -> SelfPlayTrainer:
    cfg = _config(tmp_path, lora=True, lora_r=4, lora_alpha=8, lr=1e-2, seed=seed, **kw)
    return SelfPlayTrainer(cfg, envs=[object()], model=build_model(tok), tokenizer=tok)


def _trainable(model) -> dict:
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


def test_the_lora_adapter_starts_from_the_seed_and_leaves_the_global_rng(tmp_path, tok):
    """PEFT draws a new adapter's A matrices from torch's global RNG: the trainer seeds that draw from the run's
    seed (two runs of one seed start alike, another seed starts elsewhere) and restores the caller's RNG."""
    pytest.importorskip("peft")
    state = torch.get_rng_state()
    first, again, other = (
        _trainable(_lora_trainer(tmp_path / str(k), tok, seed).policy) for k, seed in enumerate((0, 0, 1))
    )
    assert torch.equal(torch.get_rng_state(), state)
    a = [n for n in first if "lora_A" in n]
    assert a and all(torch.equal(first[n], again[n]) for n in first)
    assert not any(torch.equal(first[n], other[n]) for n in a)


def test_dropout_in_an_update_draws_from_the_run_rng(tmp_path, tok):
    """With LoRA dropout, the masks of an update come from the trainer's rng (which checkpoints carry): the same
    rng state gives the same weights after the update, another state other weights; torch's global RNG is not
    moved."""
    pytest.importorskip("peft")
    traj = [_traj(["<search> Alice Varn </search>", "<answer> Tarsk </answer>"]), _traj(["<answer> Ostrel </answer>"])]
    after = []
    for k, rng_seed in enumerate((5, 5, 6)):
        tr = _lora_trainer(tmp_path / str(k), tok, 0, lora_dropout=0.5)
        tr.rng.seed(rng_seed)
        state = torch.get_rng_state()
        tr.optimise(traj, [[1.0], [-1.0]])
        assert torch.equal(torch.get_rng_state(), state)
        after.append(_trainable(tr.policy))
    assert all(torch.equal(after[0][n], after[1][n]) for n in after[0])
    assert not all(torch.equal(after[0][n], after[2][n]) for n in after[0])


def test_validation_is_greedy_binary_accuracy_on_held_out_tasks(tmp_path, tok, tiny_world):
    import gymnasium as gym

    import searchgym  # noqa: F401
    from searchgym.agents.llm_agent import LLMAgent
    from tests.test_agent_backends import RecordingGenerator

    tasks = [
        Task(id="a", question="Where was Alice Varn born?", answers=["Tarsk"]),
        Task(id="b", question="What is the capital of Merovia?", answers=["Ostrel"]),
        Task(id="c", question="Where is Dura Labs?", answers=["Tarsk"]),
    ]
    tr = SelfPlayTrainer(
        _config(tmp_path),
        envs=[object()],
        model=build_model(tok),
        tokenizer=tok,
        val_tasks=tasks,
        val_env_factory=lambda: gym.make("KGSolver-v0", world=tiny_world, max_turns=1),
    )
    gen = RecordingGenerator("<answer> Tarsk </answer>")
    tr.agent = LLMAgent(gen)
    out = tr.validate()
    assert out["val/accuracy"] == pytest.approx(2 / 3) and out["val/n"] == 3
    assert out["val/cover_em"] == pytest.approx(2 / 3) and out["val/searches"] == 0.0
    assert all(c.temperature == 0.0 for c in gen.configs)


def test_train_runs_searchgym_eval_at_chosen_steps(tmp_path, tok, tiny_world):
    """``eval_every`` runs the evaluation harness (same records, same metrics) on ``eval_tasks``."""
    from pathlib import Path

    from searchgym.agents.llm_agent import LLMAgent
    from tests.test_agent_backends import RecordingGenerator

    fixture = Path(__file__).parent / "fixtures" / "eval" / "tiny_qa.jsonl"
    cfg = _config(tmp_path, eval_every=2, eval_tasks=f"tiny={fixture}", eval_limit=4, max_turns=1)
    tr = SelfPlayTrainer(cfg, envs=[object()], model=build_model(tok), tokenizer=tok)
    tr.agent = LLMAgent(RecordingGenerator("<answer> Ostrel </answer>"))
    out = tr.run_eval()
    assert set(out) == {"eval/tiny/em", "eval/tiny/f1"}
    records = (tmp_path / "run" / "eval" / "step_00000000" / "eval.jsonl").read_text().splitlines()
    assert len(records) == 4
    import json

    expected = sum(1.0 for r in map(json.loads, records) if "Ostrel" in r["golds"]) / 4
    assert out["eval/tiny/em"] == pytest.approx(expected)
    with pytest.raises(ValueError, match="eval_every"):
        _config(tmp_path, eval_every=-1)
    # the training loop runs it at step 0 and every eval_every steps, logging its means
    calls = []
    tr.train_step = lambda: (setattr(tr, "step", tr.step + 1), {})[1]
    tr.run_eval = lambda: (calls.append(tr.step), {"eval/tiny/em": 0.5})[1]
    tr.config.save_every = 0
    history = tr.train(resume=False)
    assert calls == [0, 2] and [("eval/tiny/em" in m) for m in history] == [False, True, False]
