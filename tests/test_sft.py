"""`searchgym sft` and `train --init` mechanics on tiny models: data loading, masking, held-out loss and early
stopping, checkpoint/resume (including a real SIGKILL), refused foreign checkpoints, LoRA outputs, --init."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from searchgym.core.types import Segment, Task, Trajectory  # noqa: E402
from searchgym.envs.export import TrajectoryWriter  # noqa: E402
from searchgym.llm.pretrained import IncompatibleModelError, open_model  # noqa: E402
from searchgym.llm.sequences import collate  # noqa: E402
from searchgym.training.checkpoints import CheckpointManager, CheckpointMismatchError  # noqa: E402
from searchgym.training.metrics import plot_metrics, read_metrics  # noqa: E402
from searchgym.training.selfplay_config import TrainConfig  # noqa: E402
from searchgym.training.selfplay_trainer import SelfPlayTrainer  # noqa: E402
from searchgym.training.sft import run_sft  # noqa: E402
from searchgym.training.sft_data import DataError  # noqa: E402
from searchgym.training.sft_trainer import SFTConfig, SFTRun, load_demonstrations, lr_factor  # noqa: E402
from tests.support.tiny_lm import build_model, build_tokenizer, save_tiny  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
INFO = '\n<information>Doc 1 (Title: "{p}") {p} is a city located in Merovia.</information>\n'
PEOPLE = ["Alice Varn", "Bob Varn", "Tarsk Ostrel", "Dura Labs", "Merovia Bob", "Ostrel Alice"]
PLACES = ["Tarsk", "Ostrel", "Merovia"]


def demo(i: int, *, role: str = "solver", reward: float = 1.0) -> Trajectory:
    """A two-turn demonstration: search, <information> (env), answer."""
    person, place = PEOPLE[i % len(PEOPLE)], PLACES[i % len(PLACES)]
    t = Trajectory(
        role=role,
        task=Task(id=f"t{i}", question=f"Where was {person} born?", answers=[place]),
        prompt=f"Answer the question. Question: Where was {person} born?\n",
        reward=reward,
    )
    t.segments = [
        Segment(t.prompt, "prompt"),
        Segment(f"<think> search {person} </think><search> {person} </search>", "agent"),
        Segment(INFO.format(p=place), "env"),
        Segment(f"<think> {place} </think><answer> {place} </answer>", "agent"),
    ]
    return t


def write_demos(path: Path, n: int = 12, **extra) -> Path:
    with open(path, "w") as fh:
        for i in range(n):
            fh.write(json.dumps({**demo(i).to_dict(), "demo": {"kind": "scripted"}, **extra}) + "\n")
    return path


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return save_tiny(tmp_path_factory.mktemp("tiny") / "model")


def _cfg(tmp_path, data, **kw) -> SFTConfig:
    base = dict(
        model="tiny",
        data=[str(data)] if data else [],
        device="cpu",
        batch_size=4,
        micro_batch_size=2,
        lr=3e-3,
        epochs=2,
        eval_every=1,
        val_fraction=0.25,
        save_every=1,
        output_dir=str(tmp_path / "run"),
        progress=False,
    )
    base.update(kw)
    return SFTConfig(**base)


def _params(model) -> dict:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


# ---------------------------------------------------------------- data
def test_both_line_shapes_are_detected_and_filtered(tmp_path):
    demos = write_demos(tmp_path / "demos.jsonl", n=3)
    export = tmp_path / "export.jsonl"
    with TrajectoryWriter(export, mode="w") as w:
        prop = demo(9, role="proposer")
        sol = [demo(10), demo(11)]
        w.write_game(
            game=0,
            proposer=prop,
            validation={"valid": True},
            solvers=sol,
            rewards=[
                {"role": "solver", "slot": 0, "reward": 1.0},
                {"role": "solver", "slot": 1, "reward": 0.0},
                {"role": "proposer", "slot": 0, "reward": 0.5},
            ],
        )
    got, report = load_demonstrations([demos, export])
    assert [d.trajectory.role for d in got] == ["solver"] * 3 + ["proposer", "solver", "solver"]
    assert [d.reward for d in got[3:]] == [0.5, 1.0, 0.0]  # each from its own reward event
    assert got[0].source == f"{demos}:1" and report.kept == 6 and report.malformed == 0
    kept, report = load_demonstrations([demos, export], roles=["solver"], min_reward=1.0)
    assert len(kept) == 4 and report.filtered == {"role proposer": 1, "reward < 1": 1}


def test_malformed_lines_are_skipped_and_counted_or_stop_the_run(tmp_path):
    path = write_demos(tmp_path / "d.jsonl", n=3)
    lines = path.read_text().splitlines()
    lines.insert(1, "{not json")
    lines.insert(3, json.dumps({"hello": 1}))
    lines.append(json.dumps({**demo(5).to_dict(), "segments": [{"text": "x", "source": "robot"}]}))
    path.write_text("\n".join(lines) + "\n")
    got, report = load_demonstrations(path)
    assert len(got) == 3 and report.malformed == 3
    assert report.errors[0].startswith(f"{path}:2: not JSON")
    assert report.errors[1].startswith(f"{path}:4: neither a trajectory")
    assert "robot" in report.errors[2] and "3 malformed line(s) skipped" in report.summary()
    with pytest.raises(DataError, match=rf"{path}:2: not JSON.*--on-error skip"):
        load_demonstrations(path, on_error="stop")


# ---------------------------------------------------------------- loss
def test_only_agent_tokens_carry_gradient(tmp_path, tok):
    """The gradient w.r.t. the last hidden states of an SFT step is exactly zero wherever the target is prompt
    or env text, and the LM head runs on the agent positions alone (agents/lm_head.py)."""
    data = write_demos(tmp_path / "d.jsonl", n=4)
    # the plain path's layout (the shared-prefix path gives the same loss: the test below)
    cfg = _cfg(tmp_path, data, val_fraction=0.0, micro_batch_size=4, share_prefix=False)
    train, _ = load_demonstrations(data)
    run = SFTRun(cfg, train, [], model=build_model(tok), tokenizer=tok)
    hidden, head_rows = [], []

    def keep_hidden(_mod, _inp, out):
        if out.requires_grad:  # not the no-grad probe of lm_head.head_split
            out.retain_grad()
            hidden.append(out)

    def count_rows(_mod, inp, _out):
        if inp[0].requires_grad:
            head_rows.append(inp[0].shape[0])

    hooks = [
        run.policy.model.norm.register_forward_hook(keep_hidden),
        run.policy.lm_head.register_forward_hook(count_rows),
    ]
    batch = run._batch(0)
    run.train_step()
    for h in hooks:
        h.remove()
    _, _, mask, _ = collate(batch, tok.pad_token_id, [[0.0]] * len(batch))
    g = hidden[0].grad.abs().sum(-1)  # [B, T]: position j predicts token j + 1
    assert torch.all(g[:, :-1][mask == 0] == 0) and torch.all(g[:, -1] == 0)
    assert torch.all(g[:, :-1][mask == 1] > 0)
    assert head_rows == [int(mask.sum())]  # logits for the agent positions only
    env_tokens = sum(
        1 for e in batch for m, i in zip(e.loss_mask, e.input_ids) if not m and "information" in tok.decode([i])
    )
    assert env_tokens > 0  # the batch does hold <information> tokens, all masked


# ---------------------------------------------------------------- held-out loss, outputs, early stop
def test_sft_lowers_heldout_loss_and_writes_a_loadable_model(tmp_path, tok, tiny_dir):
    data = write_demos(tmp_path / "d.jsonl", n=16)
    res = run_sft(_cfg(tmp_path, data, model=str(tiny_dir), epochs=4, eval_every=2))
    assert res.val_examples == 4 and res.train_examples == 12 and res.steps == 12
    assert res.val_loss_best < res.val_loss_initial - 0.5
    assert res.entropy_initial is not None and res.entropy_final < res.entropy_initial
    model, tk = open_model(res.final_dir)  # an ordinary model folder
    best = open_model(str(tmp_path / "run" / "best"))[0]
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), best.state_dict().values()))
    recs = read_metrics(tmp_path / "run" / "metrics.jsonl")
    assert [r["step"] for r in recs] == list(range(13))
    assert {"sft/loss", "lr", "sft/tokens_per_s", "elapsed_s"} <= set(recs[1])
    assert plot_metrics(recs, tmp_path / "c.png").stat().st_size > 1000
    assert json.loads((Path(res.final_dir) / "searchgym_model.json").read_text())["base_model"] == str(tiny_dir)
    ckpt = tmp_path / "run" / "checkpoints" / "step_00000012"  # a checkpoint opens as a model too
    assert all(
        torch.equal(a, b) for a, b in zip(open_model(str(ckpt))[0].state_dict().values(), model.state_dict().values())
    )


def test_early_stopping_by_heldout_loss_keeps_the_best_weights(tmp_path, tok):
    data = write_demos(tmp_path / "d.jsonl", n=16)
    model = build_model(tok)
    res = run_sft(_cfg(tmp_path, data, lr=0.5, epochs=20, patience=2), model=model, tokenizer=tok)  # diverges
    assert res.stopped_early and res.steps < 60
    vals = [r["sft/val_loss"] for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if "sft/val_loss" in r]
    assert res.val_loss_best == min(vals) and vals[-1] > res.val_loss_best
    final = open_model(res.final_dir)[0].state_dict()
    best = open_model(str(tmp_path / "run" / "best"))[0].state_dict()
    assert all(torch.equal(final[k], best[k]) for k in best)


def test_a_run_that_never_beats_its_start_says_so_and_last_keeps_the_trained_weights(tmp_path, tok, caplog):
    data = write_demos(tmp_path / "d.jsonl", n=16)
    with caplog.at_level("WARNING", logger="searchgym.training.sft_trainer"):
        res = run_sft(_cfg(tmp_path, data, lr=5.0, max_steps=4, eval_every=1), model=build_model(tok), tokenizer=tok)
    assert res.best_step == 0 and res.steps == 4  # diverged from the first step
    assert "no step of 4 lowered the held-out loss" in caplog.text and "final_weights=last" in caplog.text
    final = open_model(res.final_dir)[0].state_dict()
    start = open_model(str(tmp_path / "run" / "best"))[0].state_dict()
    assert all(torch.equal(final[k], start[k]) for k in start)  # best: the starting weights

    caplog.clear()
    cfg = _cfg(tmp_path, data, lr=5.0, max_steps=4, eval_every=1, final_weights="last", output_dir=str(tmp_path / "r2"))
    with caplog.at_level("WARNING", logger="searchgym.training.sft_trainer"):
        res = run_sft(cfg, model=build_model(tok), tokenizer=tok)
    assert res.best_step == 0 and "lowered the held-out loss" not in caplog.text  # last: nothing to warn of
    final = open_model(res.final_dir)[0].state_dict()
    last = open_model(str(tmp_path / "r2" / "checkpoints" / "step_00000004"))[0].state_dict()
    assert all(torch.equal(final[k], last[k]) for k in last)
    assert not all(torch.equal(final[k], start[k]) for k in start)
    with pytest.raises(ValueError, match="final_weights='latest': use one of best, last"):
        _cfg(tmp_path, data, final_weights="latest")


def test_model_without_chat_template_needs_an_explicit_one(tmp_path, tok):
    data = write_demos(tmp_path / "d.jsonl", n=4)
    bare = build_tokenizer()
    bare.chat_template = None
    train, _ = load_demonstrations(data)
    with pytest.raises(ValueError, match="no chat template.*--chat-template chatml"):
        SFTRun(_cfg(tmp_path, data), train, [], model=build_model(bare), tokenizer=bare)
    run = SFTRun(_cfg(tmp_path, data, chat_template="chatml"), train, [], model=build_model(bare), tokenizer=bare)
    assert "<|im_start|>" in bare.apply_chat_template([{"role": "user", "content": "q"}], tokenize=False)
    assert run.train


# ---------------------------------------------------------------- checkpoints
def test_foreign_checkpoint_and_changed_config_are_refused(tmp_path, tok):
    data = write_demos(tmp_path / "d.jsonl", n=8)
    cfg = _cfg(tmp_path, data, epochs=1)
    run_sft(cfg, model=build_model(tok), tokenizer=tok)
    with pytest.raises(IncompatibleModelError, match="hidden_size"):
        run_sft(cfg, model=build_model(tok, hidden=32), tokenizer=tok)
    with pytest.raises(CheckpointMismatchError, match="lr: checkpoint=0.003 now=0.01"):
        run_sft(_cfg(tmp_path, data, epochs=1, lr=1e-2), model=build_model(tok), tokenizer=tok)
    ckpt = tmp_path / "run" / "checkpoints" / "step_00000002"
    meta = json.loads((ckpt / "meta.json").read_text())
    (ckpt / "meta.json").write_text(json.dumps({**meta, "digest": "from-an-older-version"}))
    assert CheckpointManager.check_config(ckpt, cfg)  # same values under an older digest: accepted
    write_demos(data, n=9)  # the data changed under the run
    with pytest.raises(ValueError, match="trained on other data"):
        run_sft(cfg, model=build_model(tok), tokenizer=tok)


def test_lr_schedule_warmup_then_constant_or_cosine():
    assert [lr_factor(s, warmup=2, total=6, schedule="constant") for s in range(4)] == [0.5, 1.0, 1.0, 1.0]
    cos = [lr_factor(s, warmup=2, total=6, schedule="cosine") for s in range(7)]
    assert cos[:3] == [0.5, 1.0, 1.0] and cos[4] == pytest.approx(0.5) and cos[6] == pytest.approx(0.0)


@pytest.mark.slow
def test_sigkill_mid_run_resumes_to_the_same_weights(tmp_path, tiny_dir):
    """A real `searchgym sft` process is SIGKILLed after a checkpoint; the resumed run ends bit-identical."""
    data = write_demos(tmp_path / "d.jsonl", n=24)

    def cmd(out):
        return [
            sys.executable,
            "-m",
            "searchgym.cli",
            "sft",
            "--model",
            str(tiny_dir),
            "--data",
            str(data),
            "--output-dir",
            str(out),
            "--device",
            "cpu",
            "--batch-size",
            "4",
            "--epochs",
            "6",
            "--set",
            "save_every=1",
            "--set",
            "eval_every=3",
            "--set",
            "threads=1",
            "--set",
            "progress=false",
            "--set",
            "micro_batch_size=2",
        ]

    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    subprocess.run(cmd(tmp_path / "a"), check=True, env=env, cwd=REPO, capture_output=True)
    proc = subprocess.Popen(
        cmd(tmp_path / "b"), env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    latest = tmp_path / "b" / "checkpoints" / "latest"
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if latest.is_file() and latest.read_text().strip() >= "step_00000005":
            break
        time.sleep(0.005)
    assert proc.poll() is None, "the run finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed_at = latest.read_text().strip()
    ma = read_metrics(tmp_path / "a" / "metrics.jsonl")
    assert killed_at < f"step_{len(ma) - 1:08d}" and not (tmp_path / "b" / "final").exists()
    subprocess.run(cmd(tmp_path / "b"), check=True, env=env, cwd=REPO, capture_output=True)
    a = open_model(str(tmp_path / "a" / "final"))[0].state_dict()
    b = open_model(str(tmp_path / "b" / "final"))[0].state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    mb = read_metrics(tmp_path / "b" / "metrics.jsonl")
    assert [r["step"] for r in mb] == [r["step"] for r in ma] == list(range(len(ma)))  # nothing lost or repeated
    assert [r.get("sft/loss") for r in ma] == [r.get("sft/loss") for r in mb]


# ---------------------------------------------------------------- LoRA outputs
def test_lora_final_is_merged_or_adapter_with_its_base_recorded(tmp_path, tiny_dir):
    pytest.importorskip("peft")
    data = write_demos(tmp_path / "d.jsonl", n=8)
    kw = dict(model=str(tiny_dir), lora=True, lora_r=4, lora_alpha=8, lora_dropout=0.1, lr=1e-2, epochs=2)
    merged = run_sft(_cfg(tmp_path / "m", data, **kw))
    adapter = run_sft(_cfg(tmp_path / "a", data, save_adapter=True, **kw))
    assert (Path(adapter.final_dir) / "adapter_model.safetensors").is_file()
    assert not (Path(merged.final_dir) / "adapter_config.json").exists()
    m, tk = open_model(merged.final_dir)
    a, _ = open_model(adapter.final_dir)  # base loaded from the recorded path, adapter merged
    base, _ = open_model(str(tiny_dir))
    ids = torch.tensor([tk("<search> Alice Varn </search>")["input_ids"]])
    with torch.no_grad():
        lm, la, lb = m(ids).logits, a(ids).logits, base(ids).logits
    assert torch.allclose(lm, la, atol=1e-5) and not torch.allclose(lm, lb, atol=1e-3)


def test_lora_init_continues_an_adapter_and_refuses_one_of_another_shape(tmp_path, tiny_dir):
    """lora_init starts the trained LoRA from a saved adapter's weights (the result is still one adapter of that
    rank: at lr 0 it comes out equal to the one it continued), and an adapter of another rank is refused by name."""
    pytest.importorskip("peft")
    from safetensors.torch import load_file

    data = write_demos(tmp_path / "d.jsonl", n=8)
    kw = dict(model=str(tiny_dir), lora=True, lora_r=4, lora_alpha=8, lora_dropout=0.0, save_adapter=True)
    first = run_sft(_cfg(tmp_path / "first", data, epochs=1, **kw))
    again = run_sft(_cfg(tmp_path / "again", data, lora_init=first.final_dir, lr=0.0, max_steps=1, **kw))
    a = load_file(str(Path(first.final_dir) / "adapter_model.safetensors"))
    b = load_file(str(Path(again.final_dir) / "adapter_model.safetensors"))
    assert a.keys() == b.keys() and any(k.endswith("lora_B.weight") and a[k].abs().sum() > 0 for k in a)
    assert all(torch.equal(a[k], b[k]) for k in a)  # continued from it (a fresh adapter's lora_B is zeros)
    with pytest.raises(ValueError, match=r"lora_init=.*lora_r=4, the config 8; set lora_r"):
        run_sft(_cfg(tmp_path / "other", data, lora_init=first.final_dir, **{**kw, "lora_r": 8}))
    with pytest.raises(ValueError, match="lora_init needs lora=true"):
        SFTConfig(lora_init=first.final_dir).validate()


# ---------------------------------------------------------------- train --init
def test_train_init_loads_the_cold_start_and_refuses_another_family(tmp_path, tiny_dir):
    data = write_demos(tmp_path / "d.jsonl", n=8)
    res = run_sft(_cfg(tmp_path, data, model=str(tiny_dir), epochs=1))
    cfg = TrainConfig(
        model=str(tiny_dir),
        init=res.final_dir,
        device="cpu",
        kl_coef=0.01,
        tensorboard=False,
        progress=False,
        output_dir=str(tmp_path / "rl"),
    )
    tr = SelfPlayTrainer(cfg, envs=[object()])
    want = open_model(res.final_dir)[0].state_dict()
    got = tr.policy.state_dict()
    assert all(torch.equal(want[k], got[k]) for k in want)
    assert all(torch.equal(want[k], v) for k, v in tr.ref_model.state_dict().items())  # KL anchors the cold start
    other = save_tiny(tmp_path / "other")  # same architecture, another tokenizer vocabulary
    tk = build_tokenizer(vocab_size=400)
    tk.save_pretrained(other)
    build_model(tk).save_pretrained(other)
    with pytest.raises(IncompatibleModelError, match=r"init .* is from another model .*tokenizer"):
        SelfPlayTrainer(
            TrainConfig(
                model=str(other),
                init=res.final_dir,
                device="cpu",
                progress=False,
                tensorboard=False,
                output_dir=str(tmp_path / "rl2"),
            ),
            envs=[object()],
        )
    from searchgym.cli import build_parser
    from searchgym.commands.train import resolve_config

    args = build_parser().parse_args(["train", "--model", str(tiny_dir), "--init", res.final_dir])
    assert resolve_config(args).init == res.final_dir
    with pytest.raises(FileNotFoundError, match="init="):
        SelfPlayTrainer(TrainConfig(model=str(tiny_dir), init=str(tmp_path / "nope"), device="cpu"), envs=[object()])


def test_train_init_from_a_saved_adapter_trains_every_weight(tmp_path, tiny_dir):
    pytest.importorskip("peft")
    data = write_demos(tmp_path / "d.jsonl", n=8)
    res = run_sft(
        _cfg(tmp_path, data, model=str(tiny_dir), lora=True, lora_r=4, lora_alpha=8, save_adapter=True, epochs=1)
    )
    cfg = TrainConfig(
        model=str(tiny_dir),
        init=res.final_dir,
        device="cpu",
        tensorboard=False,
        progress=False,
        output_dir=str(tmp_path / "rl"),
    )
    tr = SelfPlayTrainer(cfg, envs=[object()])  # used to fail: peft left the merged weights frozen
    assert all(p.requires_grad for p in tr.policy.parameters())


# ---------------------------------------------------------------- rejection sampling
def _sampling(tmp_path, world) -> dict:
    """Rejection-sampling settings of a few seconds on ``world`` (saved under ``tmp_path``)."""
    from searchgym.world import save_world

    save_world(world, tmp_path / "world")
    return dict(
        source="self",
        env_kwargs={"world": str(tmp_path / "world")},
        max_turns=2,
        num_tasks=2,
        samples_per_task=2,
        max_new_tokens=12,
        epochs=1,
        val_fraction=0.0,
    )


def test_rejection_sampling_plays_the_env_and_trains_on_kept_rollouts(tmp_path, tiny_dir, tiny_world):
    kw = dict(model=str(tiny_dir), **_sampling(tmp_path, tiny_world))
    with pytest.raises(ValueError, match="round 0: no rollout reached reward >= 1"):
        run_sft(_cfg(tmp_path / "strict", None, **kw))
    res = run_sft(_cfg(tmp_path / "all", None, reward_threshold=0.0, rounds=2, **kw))
    samples = [json.loads(x) for x in (tmp_path / "all" / "run" / "round_0" / "samples.jsonl").read_text().splitlines()]
    ids = [s["task"]["id"] for s in samples]
    assert len(samples) == 4 and all(ids.count(i) == 2 for i in ids)  # G per task, played side by side
    assert [r["kept"] for r in res.rounds] == [4, 4] and Path(res.final_dir).name == "final"
    assert open_model(res.final_dir)[0] is not None


def test_rejection_sampling_continues_an_adapter_and_replays_demonstrations(tmp_path, tiny_dir, tiny_world):
    """With lora_init round 0 samples that adapter and trains it on, every round hands its adapter to the next,
    and the config's data files are replayed in each round next to the kept samples."""
    pytest.importorskip("peft")
    demos = write_demos(tmp_path / "d.jsonl", n=6)
    lora = dict(model=str(tiny_dir), lora=True, lora_r=4, lora_alpha=8, lora_dropout=0.0)
    start = run_sft(_cfg(tmp_path / "start", demos, epochs=1, save_adapter=True, **lora))
    kw = dict(
        **_sampling(tmp_path, tiny_world), reward_threshold=0.0, rounds=2, lora_init=start.final_dir, save_adapter=True
    )
    res = run_sft(_cfg(tmp_path / "rs", demos, **lora, **kw))
    run = tmp_path / "rs" / "run"
    assert [r["kept"] for r in res.rounds] == [4 + 6, 4 + 6]  # the samples and the replayed demonstrations
    for folder in (run / "round_0" / "final", run / "final"):
        assert (folder / "adapter_model.safetensors").is_file()  # one adapter all the way
    assert open_model(res.final_dir)[0] is not None


def test_a_shared_system_prompt_runs_once_with_the_same_loss_and_update(tmp_path, tok):
    """share_prefix runs the micro-batch's common prefix once; loss, entropy and the step's gradient match
    the plain full-sequence path (same maths, float rounding apart)."""
    system = "You are a careful search agent. Think, search one hop at a time, read, then answer. " * 3
    with open(tmp_path / "d.jsonl", "w") as fh:
        for i in range(4):
            t = demo(i)
            t.prompt = system + t.prompt
            t.segments[0] = Segment(t.prompt, "prompt")
            fh.write(json.dumps(t.to_dict()) + "\n")
    train, _ = load_demonstrations(tmp_path / "d.jsonl")
    results = {}
    for share in (False, True):
        cfg = _cfg(
            tmp_path / str(share), tmp_path / "d.jsonl", val_fraction=0.0, micro_batch_size=4, share_prefix=share
        )
        run = SFTRun(cfg, train, [], model=build_model(tok), tokenizer=tok)
        shared = run._shared_prefix(run._batch(0))
        metrics = run.train_step()
        grads = {n: p.grad.detach().clone() for n, p in run.policy.named_parameters() if p.grad is not None}
        results[share] = (shared, metrics, grads)
    assert results[False][0] == 0 and results[True][0] >= 40  # the system prompt is shared, and only with the option on
    for key in ("sft/loss", "sft/train_entropy", "sft/grad_norm"):
        assert results[True][1][key] == pytest.approx(results[False][1][key], rel=1e-4)
    assert results[True][2].keys() == results[False][2].keys()
    for name, g in results[False][2].items():  # the step's gradient (kept on the parameters after the step)
        torch.testing.assert_close(results[True][2][name], g, rtol=1e-3, atol=1e-6 * float(g.abs().max()) + 1e-9)


def test_bfloat16_mixed_precision_matches_float32_and_keeps_float32_weights(tmp_path, tok):
    """mixed_precision=bfloat16 runs the matmuls under autocast: the step's loss is float32's to bf16 rounding,
    the weights and their gradients stay float32, and the validation pass runs under the same precision."""
    data = write_demos(tmp_path / "d.jsonl", n=8)
    train, _ = load_demonstrations(data)
    metrics = {}
    for precision in ("none", "bfloat16"):
        cfg = _cfg(tmp_path / precision, data, val_fraction=0.0, micro_batch_size=4, mixed_precision=precision)
        run = SFTRun(cfg, train, train[:2], model=build_model(tok, seed=3), tokenizer=tok)
        metrics[precision] = {**run.train_step(), **run.evaluate()}
        assert all(p.dtype == torch.float32 for p in run.policy.parameters())
    for key in ("sft/loss", "sft/val_loss"):
        assert metrics["bfloat16"][key] == pytest.approx(metrics["none"][key], rel=0.02)
        assert metrics["bfloat16"][key] != metrics["none"][key]  # it did run in another precision
    with pytest.raises(ValueError, match="mixed_precision"):
        SFTConfig(mixed_precision="fp8").validate()


@pytest.mark.parametrize("hardware", [True, False])
def test_auto_mixed_precision_follows_the_cpus_bf16_hardware(tmp_path, tok, monkeypatch, caplog, hardware):
    """mixed_precision=auto runs bfloat16 only on a CPU that multiplies it in hardware (elsewhere autocast
    emulates it, ~14x slower on Zen 3); an explicit bfloat16 there runs as asked, with a warning naming the fix."""
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: hardware)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    data = write_demos(tmp_path / "d.jsonl", n=4)
    train, _ = load_demonstrations(data)
    runs = {}
    for precision in ("auto", "bfloat16"):
        with caplog.at_level("WARNING", logger="searchgym.llm.bf16_hardware"):
            cfg = _cfg(tmp_path / precision, data, val_fraction=0.0, mixed_precision=precision)
            runs[precision] = SFTRun(cfg, train, [], model=build_model(tok, seed=3), tokenizer=tok).mixed_precision
    assert runs == {"auto": "bfloat16" if hardware else "none", "bfloat16": "bfloat16"}
    warned = [r.getMessage() for r in caplog.records if "no bf16 matmul hardware" in r.getMessage()]
    assert len(warned) == (0 if hardware else 1) and all("mixed_precision=auto or none" in w for w in warned)


def test_bf16_hardware_is_read_from_the_cpu():
    """On Linux the probe agrees with the CPU's own flags (this machine's answer, whichever it is)."""
    from searchgym.llm.bf16_hardware import native_bfloat16

    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.exists():
        pytest.skip("no /proc/cpuinfo to compare with")
    flags = set(cpuinfo.read_text().split())
    assert native_bfloat16("cpu") == bool({"avx512_bf16", "amx_tile"} & flags)


def test_trainable_modules_freezes_all_but_those_linear_layers(tmp_path, tok):
    """A full fine-tune with trainable_modules moves only the named linear layers: embeddings, norms and the
    other projections keep the base values (so lora_extract carries the whole change but its rank)."""
    data = write_demos(tmp_path / "d.jsonl", n=8)
    train, _ = load_demonstrations(data)
    model = build_model(tok, seed=3)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    cfg = _cfg(tmp_path / "run", data, val_fraction=0.0, micro_batch_size=4, trainable_modules=["q_proj", "down_proj"])
    run = SFTRun(cfg, train, train[:2], model=model, tokenizer=tok)
    run.train_step()
    moved = {n for n, p in run.policy.named_parameters() if not torch.equal(p, before[n])}
    assert moved and all(n.endswith(("q_proj.weight", "down_proj.weight")) for n in moved)
    assert any("q_proj" in n for n in moved) and any("down_proj" in n for n in moved)
    with pytest.raises(ValueError, match="no linear layer"):
        cfg = _cfg(tmp_path / "r2", data, trainable_modules=["nope"])
        SFTRun(cfg, train, [], model=build_model(tok), tokenizer=tok)
    with pytest.raises(ValueError, match="full fine-tune"):
        SFTConfig(lora=True, trainable_modules=["q_proj"]).validate()


def test_sampling_settings_without_source_self_are_refused_not_ignored(tmp_path, capsys):
    """``searchgym sft --data D --rounds 3`` (no ``--source self``) once trained on D once and ignored the rounds."""
    from searchgym.cli import main

    data = write_demos(tmp_path / "d.jsonl", n=4)
    out = tmp_path / "run"
    args = ["sft", "--model", "tiny", "--data", str(data), "--output-dir", str(out), "--rounds", "3"]
    assert main([*args, "--set", "temperature=0.7"]) == 2
    err = capsys.readouterr().err
    assert (
        err.count("\n") == 1
        and "rounds=3, temperature=0.7: rejection-sampling settings" in err
        and "--source self" in err
    )
    assert not out.exists()
    assert main([*args, "--source", "self", "--dump-config", str(tmp_path / "c.yaml")]) == 0  # read there
    with pytest.raises(ValueError, match="rounds=3: rejection-sampling settings"):  # a round's own config may carry
        SFTConfig(source="data", rounds=3).refuse_unread_sampling_settings()  # them; the command line refuses them


def test_rejection_sampling_plays_a_group_env_on_clones_at_once(tmp_path, tiny_dir, tiny_world, monkeypatch):
    """A group env's tasks play on as many clones as max_batch_generate holds groups, their turns in one batch."""
    import searchgym.evaluation.games as games

    seen: list[int] = []
    play = games.play_games

    def recording(env, *a, **k):
        seen.append(len(env))
        return play(env, *a, **k)

    monkeypatch.setattr(games, "play_games", recording)
    kw = dict(model=str(tiny_dir), **_sampling(tmp_path, tiny_world))
    kw.update(env_id="KGSolverGroup-v0", num_tasks=3, max_batch_generate=4, reward_threshold=0.0)
    run_sft(_cfg(tmp_path / "group", None, **kw))
    samples = [
        json.loads(x) for x in (tmp_path / "group" / "run" / "round_0" / "samples.jsonl").read_text().splitlines()
    ]
    assert seen == [2] and len(samples) == 6  # 4 rows hold 2 groups of 2; 3 tasks x 2 samples
