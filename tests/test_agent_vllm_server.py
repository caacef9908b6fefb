"""Server-mode rollouts (TRL's vllm_mode="server"): generation from a vLLM-protocol server on loopback and
weights pushed to it after updates; servers that cannot take weights are refused with the fix.

The loopback server (tests/support/vllm_server.py) speaks the real HTTP protocol and generates with a
real tiny model; only NCCL is replaced, by an in-process queue the server blocks on.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from searchgym.core.llm import GenerationConfig, GenerationError  # noqa: E402
from searchgym.llm.transformers_backend import TransformersGenerator  # noqa: E402
from searchgym.llm.vllm_server import NCCLWeightTransport, VLLMServerGenerator  # noqa: E402
from searchgym.training.selfplay_config import TrainConfig  # noqa: E402
from tests.support.openai_server import OpenAIStubServer  # noqa: E402
from tests.support.tiny_lm import build_model, build_tokenizer  # noqa: E402
from tests.support.vllm_server import LoopbackVLLMServer, QueueTransport  # noqa: E402

PROMPTS = ["Tarsk is", [{"role": "user", "content": "Where was Alice Varn born?"}], "Merovia"]
GREEDY = GenerationConfig(max_new_tokens=12, temperature=0.0)


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


def test_rollouts_follow_the_weights_pushed_after_an_update(tok):
    served, policy = build_model(tok, seed=0), build_model(tok, seed=3)  # seeds 1, 2 happen to decode like seed 0 here
    transport = QueueTransport()
    with LoopbackVLLMServer(served, tok, transport) as server:
        gen = VLLMServerGenerator(server.url, transport=transport)
        assert gen.model == "stub"
        before = gen.generate(PROMPTS, GREEDY)
        assert before == TransformersGenerator(build_model(tok, seed=0), tok).generate(PROMPTS, GREEDY)
        wanted = TransformersGenerator(policy, tok).generate(PROMPTS, GREEDY)
        assert wanted != before, "the two models must differ for the test to mean anything"

        gen.load_weights(policy.state_dict())
        assert gen.generate(PROMPTS, GREEDY) == wanted
        assert server.events == [
            "init_weight_transfer_engine",
            "start_weight_update",
            "update_weights",
            "finish_weight_update",
            "reset_prefix_cache",
        ]
        assert [n for n, _, _ in server.received] == list(policy.state_dict())
        assert all(torch.equal(a, b) for a, b in zip(served.state_dict().values(), policy.state_dict().values()))

        gen.load_weights(build_model(tok, seed=0).state_dict())  # a second update reuses the transfer group
        assert server.events.count("init_weight_transfer_engine") == 1
        assert gen.generate(PROMPTS, GREEDY) == before
        assert gen.weight_updates == 2
        gen.close()


def test_identical_prompts_of_a_group_get_distinct_seeds(tok):
    seeds = []
    routes = {
        ("GET", "/server_info?config_format=json"): lambda _: (200, {"vllm_config": {"weight_transfer_config": {}}}),
        ("GET", "/get_world_size"): lambda _: (200, {"world_size": 2}),
    }

    def reply(prompt, body):
        seeds.append(body["seed"])
        return "x"

    with OpenAIStubServer(reply, routes=routes) as server:
        gen = VLLMServerGenerator(server.url, seed=0)
        gen.generate(["same"] * 5, GenerationConfig(max_new_tokens=4, seed=100))
        assert sorted(seeds) == [100, 101, 102, 103, 104]
        seeds.clear()
        gen.generate(["same"] * 2, GenerationConfig(max_new_tokens=4))  # no seed: drawn from the generator's stream
        assert len(set(seeds)) == 2
        gen.close()


def test_server_without_dev_endpoints_is_refused_with_the_fix(tok):
    transport = QueueTransport()
    with LoopbackVLLMServer(build_model(tok), tok, transport, dev_mode=False) as server:
        with pytest.raises(GenerationError, match="VLLM_SERVER_DEV_MODE=1 vllm serve MODEL --weight-transfer-config"):
            VLLMServerGenerator(server.url, transport=transport)
        fixed = VLLMServerGenerator(server.url, push_weights=False)  # sampling from a fixed model, on purpose
        assert len(fixed.generate(PROMPTS, GREEDY)) == 3
        with pytest.raises(GenerationError, match="push_weights=False"):
            fixed.load_weights(build_model(tok).state_dict())
        fixed.close()


def test_server_without_weight_transfer_engine_is_refused(tok):
    with LoopbackVLLMServer(build_model(tok), tok, QueueTransport(), weight_transfer=False) as server:
        with pytest.raises(GenerationError, match="no weight-transfer engine.*--weight-transfer-config"):
            VLLMServerGenerator(server.url)


def test_a_plain_openai_server_is_refused_for_weight_pushes():
    with OpenAIStubServer(lambda p, b: "x") as server:
        with pytest.raises(GenerationError, match="cannot take weight updates"):
            VLLMServerGenerator(server.url)


def test_nccl_transport_without_vllm_or_cuda_names_the_fix():
    try:
        import vllm  # noqa: F401

        has_vllm = True
    except ImportError:
        has_vllm = False
    if has_vllm and torch.cuda.is_available():
        pytest.skip("vLLM and CUDA are present: the NCCL transport can be built")
    with pytest.raises(GenerationError, match="searchgym\\[vllm\\]|CUDA device"):
        NCCLWeightTransport()


def test_config_checks_the_server_backend_settings():
    with pytest.raises(ValueError, match="needs vllm_server_url"):
        TrainConfig(rollout_backend="vllm-server")
    with pytest.raises(ValueError, match="only used with rollout_backend=vllm-server"):
        TrainConfig(vllm_server_url="http://127.0.0.1:8000")
    with pytest.raises(ValueError, match="lora=true"):
        TrainConfig(rollout_backend="vllm-server", vllm_server_url="http://x", lora=True)
    with pytest.raises(ValueError, match="rollout_cache"):
        TrainConfig(rollout_cache="paged")


@pytest.mark.slow
def test_trainer_steps_with_server_rollouts_and_pushes_weights(tmp_path, tok, monkeypatch):
    """A real training step: rollouts come from the server; after the update the server holds the new policy."""
    import searchgym.llm.vllm_server as vs
    from searchgym.training.selfplay_trainer import SelfPlayTrainer
    from tests.test_trainer_mechanics import _config, _selfplay_envs

    transport = QueueTransport()
    monkeypatch.setattr(vs, "NCCLWeightTransport", lambda: transport)
    served = build_model(tok, seed=5)
    with LoopbackVLLMServer(served, tok, transport) as server:
        cfg = _config(tmp_path, rollout_backend="vllm-server", vllm_server_url=server.url, total_steps=1)
        trainer = SelfPlayTrainer(cfg, envs=_selfplay_envs(), model=build_model(tok, seed=0), tokenizer=tok)
        policy = {k: v.detach().clone() for k, v in trainer.policy.state_dict().items()}
        assert all(torch.equal(served.state_dict()[k], policy[k]) for k in policy)  # pushed at start
        n_requests = len(server.http.requests)
        trainer.train_step()
        assert len(server.http.requests) > n_requests  # the rollouts were generated by the server
        new = trainer.policy.state_dict()
        assert not all(torch.equal(new[k], policy[k]) for k in policy)  # the update moved the weights ...
        assert all(torch.equal(served.state_dict()[k], new[k]) for k in new)  # ... and the server has them
        assert server.events.count("update_weights") == 2
        trainer.generator.close()
