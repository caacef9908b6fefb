"""The papers' recipes by name and the estimators behind them, checked on hand cases from the papers.

Hand cases (numbers worked out by hand from each equation, not by the code under test):
SSP Eq. 4 (Solver ``r − mean``), SSP Eq. 5 (Proposer REINFORCE, no baseline, log-probs summed),
kg-paths-wcr Eq. 9 (baseline = the verified questions' mean), EVE Eq. 5 (HRPO within hop groups) and
gdcr-sapo Eq. 13 with the sample std. Then the trainer faults issue 31 listed: the warm-up counts
training steps, a no-signal update is skipped, unwrapped envs are refused for a shaped reward, and the
metrics log carries the questions and why they were rejected.
"""

from __future__ import annotations

import json
import math

import pytest

from searchgym.core.advantages import group_advantages, proposer_advantages, sapo_group_advantages, step_advantages
from searchgym.errors import InvalidArgumentError
from searchgym.training.recipes import (
    DEFAULT_RECIPE,
    RECIPES,
    SHIPPED_INIT,
    SIZES,
    recipe_config,
    recipe_values,
    recipes_table,
)
from searchgym.training.selfplay_config import TrainConfig


# ---------------------------------------------------------------- estimators: hand cases
def test_ssp_eq4_solver_advantage_is_reward_minus_group_mean():
    # n = 5 rollouts, 2 correct: mean 0.4 -> correct +0.6, wrong -0.4 (no division by the std 0.49)
    adv = group_advantages([1, 0, 1, 0, 0], ["q"] * 5, normalise=False)
    assert adv == pytest.approx([0.6, -0.4, 0.6, -0.4, -0.4])
    normalised = group_advantages([1, 0, 1, 0, 0], ["q"] * 5)
    assert normalised[0] == pytest.approx(0.6 / math.sqrt(0.24), rel=1e-5)  # std of {1,1,0,0,0} = sqrt(0.24)


def test_ssp_eq5_proposer_reinforce_has_no_baseline():
    # R = 1 - acc for verified questions, 0 for invalid ones; the advantage is R itself
    rewards, valid = [0.8, 0.0, 0.2, 0.0], [True, True, True, False]
    assert proposer_advantages(rewards, valid, "none") == [0.8, 0.0, 0.2, 0.0]


def test_kg_wcr_eq9_baseline_is_the_verified_mean():
    rewards, valid = [0.8, 0.0, 0.2, 0.0], [True, True, True, False]
    # b = (0.8 + 0 + 0.2) / 3 = 1/3; the invalid question gets 0 (no update)
    assert proposer_advantages(rewards, valid, "verified") == pytest.approx([0.8 - 1 / 3, -1 / 3, 0.2 - 1 / 3, 0.0])
    # the batch mean over every question (0.25) pushes the invalid one down by 0.25
    assert proposer_advantages(rewards, valid, "all") == pytest.approx([0.55, -0.25, -0.05, -0.25])


def test_eve_eq5_hrpo_standardises_within_each_hop_count():
    rewards = [1.0, 0.0, 0.5, 0.5, 0.25]
    hops = [2, 2, 3, 3, 4]
    adv = proposer_advantages(rewards, [True] * 5, "hop_group", hops=hops, eps=0.0)
    # hop 2: mean 0.5, std 0.5 -> +1, -1; hop 3: constant -> 0; hop 4: a group of one -> 0
    assert adv == pytest.approx([1.0, -1.0, 0.0, 0.0, 0.0])
    with pytest.raises(InvalidArgumentError, match="hop count"):
        proposer_advantages(rewards, [True] * 5, "hop_group")


def test_sapo_step_std_follows_ddof():
    # steps (0, 1): population std 0.5 -> (-1, +1); sample std 0.7071 -> (-0.7071, +0.7071)
    assert step_advantages([0.0, 1.0], eps=0.0) == pytest.approx([-1.0, 1.0])
    assert step_advantages([0.0, 1.0], eps=0.0, ddof=1) == pytest.approx([-(0.5**0.5), 0.5**0.5])
    # the trainer's adv_std_ddof reaches both the outcome std and the step std
    a0 = sapo_group_advantages([1.0, 0.0], [[0.0, 1.0], [0.0, 0.0]], eps=0.0, ddof=0)
    a1 = sapo_group_advantages([1.0, 0.0], [[0.0, 1.0], [0.0, 0.0]], eps=0.0, ddof=1)
    assert a0[0] == pytest.approx([1.0 - 0.5, 1.0 + 0.5])  # A_o = 1, lambda 0.5, A_t,g = -1, +1
    outcome = 0.5 / math.sqrt(0.5)  # sample std of {1, 0}
    assert a1[0] == pytest.approx([outcome - 0.5 * outcome * 0.5**0.5, outcome + 0.5 * outcome * 0.5**0.5])


def test_token_sum_weights_a_sequence_by_its_length():
    torch = pytest.importorskip("torch")
    from searchgym.training.losses import policy_loss

    logp = torch.zeros(2, 4, requires_grad=True)
    mask = torch.tensor([[1, 1, 1, 1], [1, 0, 0, 0]])
    adv = torch.ones(2, 4)
    mean_loss, _ = policy_loss(logp, logp.detach(), None, adv, mask, kl_coef=0.0)
    sum_loss, _ = policy_loss(logp, logp.detach(), None, adv, mask, kl_coef=0.0, aggregation="token_sum")
    # ratio 1: per-token loss -1; token_mean: each sequence -1, mean -1; token_sum: -4 and -1, mean -2.5
    assert float(mean_loss.detach()) == pytest.approx(-1.0) and float(sum_loss.detach()) == pytest.approx(-2.5)
    (grad,) = torch.autograd.grad(sum_loss, logp)
    assert grad[0, 0] == pytest.approx(grad[1, 0])  # every token of SSP Eq. 5 counts the same


# ---------------------------------------------------------------- recipes
def test_every_recipe_builds_a_valid_config_at_every_size():
    for name in RECIPES:
        for size in SIZES:
            cfg = recipe_config(name, size)
            assert (cfg.recipe, cfg.recipe_size) == (name, size)
            assert cfg.env_kwargs["proposer_mode"] in ("kg", "vanilla")
    ssp = recipe_config("ssp", "paper")
    assert (ssp.solver_advantage, ssp.proposer_baseline, ssp.proposer_loss_aggregation) == (
        "grpo_centred",
        "none",
        "token_sum",
    )
    assert (ssp.reward, ssp.env_kwargs["proposer_mode"], ssp.batch_size, ssp.lr) == ("binary", "vanilla", 256, 1e-6)
    wcr = recipe_config("kg-wcr", "paper")
    assert (wcr.reward, wcr.solver_advantage, wcr.proposer_baseline) == ("wcr", "grpo", "verified")
    assert recipe_config("eve", "paper").kl_coef == 0.0 and recipe_config("eve", "cpu").env_kwargs["proposer_evidence"]
    cpu = recipe_config("kg-wcr", "cpu")
    assert (cpu.batch_size, cpu.lora, cpu.threads, cpu.init) == (2, True, 1, SHIPPED_INIT)
    assert cpu.env_kwargs["retriever"] == "bm25:passages=2"  # the cold start's passages
    # what a KG recipe changes at the cpu size (over the size, under --config / flags / --set)
    assert (cpu.proposer_baseline, recipe_config("kg-ssp", "cpu").proposer_baseline) == ("none", "none")
    assert recipe_config("kg-wcr", "gpu").proposer_baseline == "verified"
    assert recipe_config("ssp", "cpu").proposer_baseline == "none"
    assert recipe_config("kg-wcr", "cpu", proposer_baseline="verified").proposer_baseline == "verified"
    assert "size cpu: proposer_baseline none" in recipes_table()
    assert DEFAULT_RECIPE == "kg-wcr" and "kg-wcr (default)" in recipes_table()
    with pytest.raises(InvalidArgumentError, match="unknown recipe"):
        recipe_values("ppo")
    with pytest.raises(InvalidArgumentError, match="unknown size"):
        recipe_values("ssp", "laptop")


def test_cli_layers_recipe_size_file_and_set(tmp_path):
    from searchgym.cli import build_parser
    from searchgym.commands.train import resolve_config

    def resolve(*argv):
        return resolve_config(build_parser().parse_args(["train", *argv]))

    cfg = resolve("--recipe", "ssp", "--size", "cpu")
    assert (cfg.recipe, cfg.batch_size, cfg.proposer_baseline, cfg.init) == ("ssp", 2, "none", SHIPPED_INIT)
    path = tmp_path / "c.yaml"
    path.write_text("recipe: ssp\nrecipe_size: paper\nbatch_size: 7\nenv_kwargs: {noise_window: 2}\n")
    cfg = resolve("--config", str(path), "--set", "lr=3e-5")
    assert (cfg.recipe, cfg.batch_size, cfg.lr, cfg.group_size) == ("ssp", 7, 3e-5, 5)
    assert cfg.env_kwargs == {"proposer_mode": "vanilla", "noise_window": 2}  # the file adds to the recipe's
    plain = resolve("--recipe", "none")
    assert plain == TrainConfig()
    assert resolve("--size", "cpu", "--model", str(tmp_path)).init is None  # another model: its own weights
    dumped = tmp_path / "d.yaml"
    from searchgym.cli import main

    assert main(["train", "--recipe", "gdcr-sapo", "--size", "paper", "--dump-config", str(dumped)]) == 0
    assert TrainConfig.load(dumped) == recipe_config("gdcr-sapo", "paper")


def test_list_recipes_prints_each_recipe_with_its_paper_lines(capsys):
    from searchgym.cli import main

    assert main(["train", "--list-recipes"]) == 0
    out = capsys.readouterr().out
    for name in RECIPES:
        assert f"\n{name}" in f"\n{out}"
    assert "SSP Eq. 5" in out and "kg-paths-wcr Eq. 9" in out and "cpu" in out


# ---------------------------------------------------------------- trainer faults
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def tok():
    from tests.support.tiny_lm import build_tokenizer

    return build_tokenizer()


def _trainer(tmp_path, tok, world, **kw):
    import gymnasium as gym

    import searchgym  # noqa: F401
    from searchgym.training.selfplay_trainer import SelfPlayTrainer
    from searchgym.wrappers.registry import wrap_rewards
    from tests.support.tiny_lm import build_model

    reward = kw.pop("reward", "binary")
    env = wrap_rewards(gym.make("KGSolverGroup-v0", world=world, group_size=2, max_turns=2), reward)
    cfg = TrainConfig(
        device="cpu",
        batch_size=2,
        group_size=2,
        max_turns=2,
        max_new_tokens=6,
        lr=1e-3,
        output_dir=str(tmp_path / "run"),
        tensorboard=False,
        progress=False,
        save_every=0,
        reward=reward,
        **kw,
    )
    return SelfPlayTrainer(cfg, envs=[env], model=build_model(tok, seed=3), tokenizer=tok)


def test_warmup_counts_training_steps_not_updates(tmp_path, tok, tiny_world):
    tr = _trainer(tmp_path, tok, tiny_world, warmup_steps=4, kl_coef=0.01, train_proposer=True)
    base = tr.config.lr
    lrs = []
    for _ in range(3):
        tr.train_step()
        lrs.append(tr.scheduler.get_last_lr()[0])
    assert lrs == pytest.approx([base * 2 / 4, base * 3 / 4, base])  # one warm-up step per training step


def test_an_update_without_signal_is_skipped_until_something_could_move(tmp_path, tok, tiny_world):
    from searchgym.training.selfplay_trainer import Sample
    from tests.support.trajectories import segmented_trajectory

    tr = _trainer(tmp_path, tok, tiny_world, kl_coef=0.01)
    flat = [Sample("solver", segmented_trajectory(["<answer> x </answer>"]), 0.0, {}, "g") for _ in range(2)]
    stats = tr.update(flat)
    assert stats == {"solver/skipped_no_signal": 1} and not tr.optimizer.state  # policy == reference: no gradient
    signal = [Sample("solver", segmented_trajectory(["<answer> x </answer>"]), r, {}, "g") for r in (1.0, 0.0)]
    assert "solver/loss" in tr.update(signal) and tr.optimizer.state
    assert "solver/loss" in tr.update(flat)  # the policy has moved: the KL pull is a real gradient now
    no_kl = _trainer(tmp_path, tok, tiny_world, kl_coef=0.0)
    no_kl.update(signal)
    assert no_kl.update(flat) == {"solver/skipped_no_signal": 1}


def test_unwrapped_envs_are_refused_for_a_shaped_reward(tmp_path, tok, tiny_world):
    import gymnasium as gym

    from searchgym.training.selfplay_trainer import SelfPlayTrainer
    from tests.support.tiny_lm import build_model

    env = gym.make("KGSolverGroup-v0", world=tiny_world, group_size=2, max_turns=2)
    cfg = TrainConfig(device="cpu", reward="dynasearcher", output_dir=str(tmp_path / "r"), progress=False)
    with pytest.raises(InvalidArgumentError, match="does not apply reward dynasearcher"):
        SelfPlayTrainer(cfg, envs=[env], model=build_model(tok), tokenizer=tok)


def test_metrics_log_the_questions_and_why_they_were_rejected(tmp_path, tok):
    from searchgym.core.types import Task
    from searchgym.training.selfplay_trainer import Sample, rollout_metrics
    from tests.support.trajectories import proposer_trajectory

    def proposal(question, valid, reason, reward, searches=1):
        t = proposer_trajectory([f"query {i}" for i in range(searches)])
        t.task = Task(id="t", question="", answers=["Tarsk"], metadata={"hops": 2})
        t.question = question
        t.metadata["validation"] = {"valid": valid, "reason": reason}
        return Sample("proposer", t, reward, {"valid": float(valid)}, None)

    samples = [
        proposal("Where was the author of X born?", True, None, 0.6, searches=2),
        proposal("Tarsk?", False, "too_short", 0.0),
        proposal("Which city is it?", False, "verifier_incorrect", 0.0),
        proposal("Which town is it?", False, "verifier_incorrect", 0.0),
    ]
    m = rollout_metrics(samples)
    assert m["proposer/valid_rate"] == 0.25
    assert m["proposer/rejected/verifier_incorrect"] == 0.5 and m["proposer/rejected/too_short"] == 0.25
    assert [q["question"] for q in m["proposer/questions"]][0] == "Where was the author of X born?"
    assert m["proposer/questions"][1]["reason"] == "too_short" and m["proposer/hops"] == 2.0
    assert m["proposer/questions"][0]["target"] is None  # a task without a subgraph (the pool's name theirs)
    assert m["proposer/searched_short"] == 0.75  # three of the four searched once for a 2-hop target
    json.dumps(m)  # one JSON line of metrics.jsonl


@pytest.mark.parametrize(
    "name,reward",
    [(name, None) for name in sorted(RECIPES)] + [("kg-wcr", "wcr,search_discount,short_search_discount")],
)
def test_every_recipe_plays_and_updates_one_real_self_play_step(tmp_path, tok, name, reward):
    """Each recipe's envs, reward stack and estimators on the real KGSelfPlay-v0 game: the scripted experts
    play (so questions verify and Solvers answer), the tiny policy is updated on their text. The last case stacks
    both search-count discounts over WCR, whose shares of cut rollouts are logged."""
    from searchgym.training.selfplay_trainer import SelfPlayTrainer
    from tests.support.tiny_lm import build_model
    from tests.test_trainer_selfplay_batch import ScriptedBatchAgent

    cfg = recipe_config(
        name,
        "paper",
        device="cpu",
        batch_size=2,
        mini_batch_size=8,
        group_size=2,
        max_new_tokens=8,
        lr=1e-3,
        tensorboard=False,
        progress=False,
        save_every=0,
        val_every=0,
        output_dir=str(tmp_path / name),
        **({"reward": reward} if reward else {}),
    )
    tr = SelfPlayTrainer(cfg, model=build_model(tok, seed=1), tokenizer=tok, num_envs=2)
    assert all(
        not tr_env.unwrapped.proposer_mode or tr_env.unwrapped.proposer_mode == cfg.env_kwargs["proposer_mode"]
        for tr_env in tr.envs
    )
    tr.agent = ScriptedBatchAgent(tr.agent)
    m = tr.train_step()
    assert m["proposer/n"] == 2 and m["solver/n"] == 4
    assert "proposer/questions" in m and 0.0 <= m["proposer/valid_rate"] <= 1.0
    assert any(k.startswith("solver/") and k.endswith(("loss", "skipped_no_signal")) for k in m)
    stack = (reward or "").split(",")
    assert ("solver/search_discounted" in m) == ("search_discount" in stack)
    assert ("solver/short_search_discounted" in m) == ("short_search_discount" in stack)


def test_a_second_run_into_the_same_folder_is_refused_before_it_writes(tmp_path, tok, tiny_world):
    from searchgym.core.output_lock import OutputLock, OutputLockedError

    tr = _trainer(tmp_path, tok, tiny_world, total_steps=1)
    with OutputLock(tr.out, what="--output-dir"):
        with pytest.raises(OutputLockedError, match="--output-dir"):
            tr.train()
    assert not (tr.out / "config.yaml").exists()  # refused before writing anything
    tr.train()  # free again: the run goes ahead
    assert (tr.out / "config.yaml").is_file()
