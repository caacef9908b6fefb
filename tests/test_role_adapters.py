"""An adapter per role (``proposer_adapter``): each role's rollouts generate with its own LoRA adapter (a copy of
the shared one, or one stacked on it) and its update trains that adapter alone; cached keys/values never cross
adapters; checkpoints and loaders keep both."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from searchgym.agents.llm_agent import LLMAgent  # noqa: E402
from searchgym.core.llm import GenerationConfig  # noqa: E402
from searchgym.errors import InvalidArgumentError  # noqa: E402
from searchgym.llm.pretrained import load_init  # noqa: E402
from searchgym.llm.role_adapters import (  # noqa: E402
    adapter_state,
    add_role_adapter,
    attach_adapters,
    role_adapter,
    stacked_adapter_name,
    use_adapter,
    use_role_adapter,
)
from searchgym.llm.transformers_backend import TransformersGenerator  # noqa: E402
from searchgym.training.checkpoints import CheckpointMismatchError  # noqa: E402
from searchgym.training.model_loading import apply_lora, load_weights  # noqa: E402
from searchgym.training.selfplay_config import TrainConfig  # noqa: E402
from searchgym.training.selfplay_samples import Sample  # noqa: E402
from searchgym.training.selfplay_trainer import SelfPlayTrainer  # noqa: E402
from tests.support.tiny_lm import build_model, build_tokenizer  # noqa: E402
from tests.support.train_config import small_train_config  # noqa: E402
from tests.support.trajectories import segmented_trajectory  # noqa: E402


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


def _config(tmp_path, **kw) -> TrainConfig:
    """The trainer tests' small config with a rank-4 LoRA adapter per role, at lr 1e-2."""
    return small_train_config(
        tmp_path, **{"lr": 1e-2, "lora": True, "lora_r": 4, "lora_alpha": 8, "proposer_adapter": True, **kw}
    )


def _trainer(tmp_path, tok, **kw) -> SelfPlayTrainer:
    return SelfPlayTrainer(_config(tmp_path, **kw), envs=[object()], model=build_model(tok), tokenizer=tok)


def _adapter(model, name: str) -> dict:
    return {n: p.detach().clone() for n, p in model.named_parameters() if f".{name}." in n}


def _samples(role: str) -> list[Sample]:
    texts = (["<search> Alice Varn </search>", "<answer> Tarsk </answer>"], ["<answer> Ostrel </answer>"])
    return [
        Sample(role, segmented_trajectory(list(t), role=role), reward, group="g")
        for t, reward in zip(texts, (1.0, 0.0))
    ]


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_each_roles_update_trains_its_own_adapter_and_leaves_the_other(tmp_path, tok):
    tr = _trainer(tmp_path, tok)
    model = tr.policy
    start = {r: _adapter(model, r) for r in ("default", "proposer")}
    assert start["default"] and _same(
        {k.replace(".default.", "."): v for k, v in start["default"].items()},
        {k.replace(".proposer.", "."): v for k, v in start["proposer"].items()},
    )  # the Proposer's adapter starts as a copy of the run's
    stats = tr.update(_samples("proposer"))
    assert "proposer/loss" in stats
    assert _same(_adapter(model, "default"), start["default"])
    assert not _same(_adapter(model, "proposer"), start["proposer"])
    moved = _adapter(model, "proposer")
    tr.update(_samples("solver"))
    assert _same(_adapter(model, "proposer"), moved)
    assert not _same(_adapter(model, "default"), start["default"])
    assert model.active_adapter == "default"  # outside a role's block: the Solver's (and the verifier's)


def _logits(model, tok, role=None):
    ids = torch.tensor([tok("<search> Alice Varn </search>")["input_ids"]])
    with torch.no_grad(), use_role_adapter(model, role):
        return model(input_ids=ids).logits


def test_a_stacked_adapter_starts_as_the_shared_one_and_only_the_solvers_updates_reach_both_roles(tmp_path, tok):
    tr = _trainer(tmp_path, tok, proposer_adapter_mode="stacked")
    model, name = tr.policy, stacked_adapter_name("proposer")
    assert role_adapter(model, "proposer") == name
    start = {r: _adapter(model, r) for r in ("default", name)}
    assert start[name] and all(not v.any() for k, v in start[name].items() if "lora_B" in k)  # B = 0
    assert torch.equal(_logits(model, tok, "proposer"), _logits(model, tok))  # plays as default at first
    tr.update(_samples("proposer"))
    assert _same(_adapter(model, "default"), start["default"])  # the Proposer's update stays in its own adapter
    assert not _same(_adapter(model, name), start[name])
    moved, proposer_before = _adapter(model, name), _logits(model, tok, "proposer")
    tr.update(_samples("solver"))
    assert _same(_adapter(model, name), moved)
    assert not _same(_adapter(model, "default"), start["default"])
    assert not torch.equal(_logits(model, tok, "proposer"), proposer_before)  # the Solvers' update reached it
    assert list(model.active_adapters) == ["default"]
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all(".default." in n for n in trainable)  # back to the Solver's adapter alone


@pytest.mark.parametrize("mode", ["copy", "stacked"])
def test_a_role_with_only_zero_advantages_skips_until_its_own_adapter_has_moved(tmp_path, tok, mode):
    """With a KL term, an all-zero batch still updates once the weights moved; the Proposer's adapter has not
    moved when only the Solver's did, so its zero batch is skipped."""
    tr = _trainer(tmp_path, tok, kl_coef=0.1, proposer_adapter_mode=mode)
    tr.update(_samples("solver"))
    flat = [Sample("proposer", s.trajectory, 0.0, group="g") for s in _samples("proposer")]
    assert tr.update(flat).get("proposer/skipped_no_signal") == 1


def _two_adapter_model(tok, tmp_path, mode):
    model = apply_lora(build_model(tok), _config(tmp_path, proposer_adapter=False))
    add_role_adapter(model, "proposer", mode)
    name = role_adapter(model, "proposer")
    with torch.no_grad():
        for n, p in model.named_parameters():
            if f".{name}." in n and "lora_B" in n:
                p.normal_(0, 2.0, generator=torch.Generator().manual_seed(hash(n) % 1000))
    return model.eval()


@pytest.mark.parametrize("mode", ["copy", "stacked"])
@pytest.mark.parametrize("engine", ["hf", "static"])
def test_rollouts_generate_with_their_roles_adapter_and_never_reuse_the_others_cache(tmp_path, tok, engine, mode):
    model = _two_adapter_model(tok, tmp_path, mode)
    name = "proposer" if mode == "copy" else stacked_adapter_name("proposer")
    cfg = GenerationConfig(max_new_tokens=10, temperature=0.0)
    gen = TransformersGenerator(model, tok, engine=engine)
    assert gen.role_adapters() and role_adapter(model, "proposer") == name and role_adapter(model, "solver") is None
    agent = LLMAgent(gen, config=cfg)
    solver, proposer = (segmented_trajectory([], role=r) for r in ("solver", "proposer"))
    texts = agent.act_batch([({"active": [1, 1]}, {"trajectories": [solver, proposer]})], config=cfg)[0]

    def alone(name: str) -> str:
        fresh = TransformersGenerator(model, tok, engine=engine)  # an empty KV store
        with use_adapter(model, name):
            return LLMAgent(fresh, config=cfg).generate([agent.context(solver)], cfg)[0]

    assert texts == (alone("default"), alone(name))
    assert texts[0] != texts[1]  # the two adapters do differ
    assert adapter_state(model) == ("default",)
    # the same prompt again, the other role first: each role's rows come from its own cached keys/values
    solver2, proposer2 = (segmented_trajectory([], role=r) for r in ("solver", "proposer"))
    again = agent.act_batch([({"active": [1, 1]}, {"trajectories": [proposer2, solver2]})], config=cfg)[0]
    assert again == (texts[1], texts[0])
    if engine == "static":  # both adapters' folded weights stay derived: switching roles re-derives nothing
        lora_layers = sum(1 for m in model.modules() if hasattr(m, "lora_A") and name in m.lora_A)
        folded = [k for k in gen.engine.runner.weights._derived_cache if k[0] == "lora"]
        assert lora_layers and len(folded) == 2 * lora_layers


@pytest.mark.parametrize("mode", ["copy", "stacked"])
def test_checkpoints_and_loaders_keep_both_adapters(tmp_path, tok, mode):
    tr = _trainer(tmp_path, tok, proposer_adapter_mode=mode)
    name = role_adapter(tr.policy, "proposer")
    tr.update(_samples("proposer"))
    tr.update(_samples("solver"))
    path = tr.save_checkpoint()
    policy = path / "policy"
    assert (policy / "adapter_model.safetensors").is_file()
    assert (policy / name / "adapter_model.safetensors").is_file()
    saved = {r: _adapter(tr.policy, r) for r in ("default", name)}
    fresh = _trainer(tmp_path / "fresh", tok, proposer_adapter_mode=mode)
    fresh.load_checkpoint(path)
    assert all(_same(_adapter(fresh.policy, r), saved[r]) for r in saved)
    one = _trainer(tmp_path / "one", tok, proposer_adapter=False)
    with pytest.raises(CheckpointMismatchError, match="proposer_adapter: checkpoint=True now=False"):
        one.load_checkpoint(path)
    with pytest.raises(InvalidArgumentError, match="proposer adapter of its own.*proposer_adapter=true"):
        load_weights(one.policy, policy, lora=True)  # the weights alone, without the run's config
    with pytest.raises(InvalidArgumentError, match="holds a LoRA adapter per role"):
        load_init(str(policy), base="smollm2")  # a run starts from one set of weights
    opened = attach_adapters(build_model(tok), policy)
    assert role_adapter(opened, "proposer") == name and opened.active_adapter == "default"
    assert all(_same(_adapter(opened, r), saved[r]) for r in saved)
    other = "stacked" if mode == "copy" else "copy"
    with pytest.raises(InvalidArgumentError, match=f"proposer_adapter_mode={mode}.*proposer_adapter_mode={other}"):
        load_weights(_trainer(tmp_path / "other", tok, proposer_adapter_mode=other).policy, policy, lora=True)


def test_proposer_adapter_needs_lora_and_a_known_mode(tmp_path):
    with pytest.raises(InvalidArgumentError, match="proposer_adapter=true .*set lora=true"):
        _config(tmp_path, lora=False)
    with pytest.raises(InvalidArgumentError, match="proposer_adapter_mode='shared': use one of copy, stacked"):
        _config(tmp_path, proposer_adapter_mode="shared")
