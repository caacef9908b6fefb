"""``searchgym eval`` with in-process models: a saved model folder, a trainer checkpoint, the bundled SmolLM2."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from searchgym.agents import AgentSpec, make_agent  # noqa: E402
from searchgym.evaluation import EvalConfig, evaluate  # noqa: E402
from searchgym.llm.pretrained import resolve_checkpoint  # noqa: E402
from searchgym.tasks import load_tasksets  # noqa: E402
from tests.support.tiny_lm import build_model, build_tokenizer  # noqa: E402

FIX = Path(__file__).parent / "fixtures" / "eval"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A folder laid out like a trainer checkpoint: step_00000001/policy/{config.json, weights, tokenizer}."""
    tok = build_tokenizer()
    root = tmp_path_factory.mktemp("ckpt") / "step_00000001"
    build_model(tok).save_pretrained(root / "policy")
    tok.save_pretrained(root / "policy")
    return root


def test_checkpoint_folder_resolves_to_its_policy(checkpoint, tmp_path):
    assert resolve_checkpoint(str(checkpoint)) == str(checkpoint / "policy")
    assert resolve_checkpoint("smollm2") == "smollm2"


def test_transformers_agent_on_a_checkpoint(checkpoint, tiny_world):
    agent = make_agent(AgentSpec("transformers", model=str(checkpoint), max_new_tokens=8, concurrency=3))
    tasks = load_tasksets("tiny=" + str(FIX / "tiny_qa.jsonl"), limit=3)
    res = evaluate(agent, tasks, world=tiny_world, config=EvalConfig(max_turns=2, concurrency=3, progress=False))
    assert res.summary["datasets"]["tiny"]["n"] == 3
    # tokens are counted with the model's own tokenizer: never more than max_new_tokens per turn
    assert all(0 < r["tokens"] <= 8 * r["turns"] for r in res.records)
    assert agent.name.startswith("transformers:")


def test_lora_checkpoint_is_refused_with_the_fix(tmp_path):
    (tmp_path / "policy").mkdir()
    (tmp_path / "policy" / "adapter_config.json").write_text("{}")
    with pytest.raises(ValueError, match="merge_and_unload"):
        resolve_checkpoint(str(tmp_path))


@pytest.mark.slow
def test_bundled_smollm2_on_the_benchmark_fixture(tiny_world):
    pytest.importorskip("gguf")
    agent = make_agent(AgentSpec("transformers", model="smollm2", max_new_tokens=48, concurrency=3))
    tasks = load_tasksets("tiny=" + str(FIX / "tiny_qa.jsonl"), limit=3)
    res = evaluate(agent, tasks, world=tiny_world, config=EvalConfig(max_turns=2, concurrency=3, progress=False))
    d = res.summary["datasets"]["tiny"]
    assert d["n"] == 3 and 0.0 <= d["em"]["mean"] <= 1.0 and d["tokens"] > 0
