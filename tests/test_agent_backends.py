"""Generation backends, model loading errors and the LLM agent (CPU, tiny models, real loopback server)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from searchgym.agents.llm_agent import STOP_STRINGS, AgentConfig, LLMAgent  # noqa: E402
from searchgym.core.llm import GenerationConfig, GenerationError, TextGenerator  # noqa: E402
from searchgym.core.types import Segment, Task, Trajectory  # noqa: E402
from searchgym.llm.bundled_model import load_policy, resolve_model_path  # noqa: E402
from searchgym.llm.openai_client import OpenAICompatibleGenerator  # noqa: E402
from searchgym.llm.transformers_backend import TransformersGenerator  # noqa: E402
from tests.support.openai_server import OpenAIStubServer  # noqa: E402
from tests.support.scripted_lm import ScriptedLM  # noqa: E402
from tests.support.tiny_lm import build_model, build_tokenizer, save_tiny  # noqa: E402

STOP = ("</search>", "</answer>", "</question>")


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


@pytest.fixture(scope="module")
def tiny(tok):
    return build_model(tok, seed=0)


@pytest.fixture()
def gen(tiny, tok):
    return TransformersGenerator(tiny, tok, seed=0)


def _scripted(tok, texts: list[str]) -> TransformersGenerator:
    scripts = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    return TransformersGenerator(ScriptedLM(scripts, len(tok), tok.eos_token_id), tok, seed=0)


# ---------------------------------------------------------------- transformers backend
def test_chat_prompts_use_the_template_and_raw_text_continues_as_is(gen):
    msgs = [{"role": "user", "content": "Where is Tarsk?"}]
    assert gen.render(msgs) == "<|im_start|>user\nWhere is Tarsk?<|im_end|>\n<|im_start|>assistant\n"
    assert gen.render("raw <think>") == "raw <think>"
    with pytest.raises(GenerationError, match="chat messages"):
        gen.render([{"text": "no role"}])


def test_batched_greedy_equals_one_by_one(gen):
    """Left padding + position ids: a row's greedy output does not depend on its batch mates."""
    prompts = ["Tarsk is a city", [{"role": "user", "content": "Question: who founded Merovia?"}], "x y"]
    cfg = GenerationConfig(max_new_tokens=12, temperature=0.0)
    batched = gen.generate(prompts, cfg)
    single = [gen.generate([p], cfg)[0] for p in prompts]
    assert batched == single
    assert all(len(t) > 0 for t in batched)


def test_sampling_is_reproducible_per_seed_and_leaves_global_rng_alone(gen):
    prompts = ["Alice Varn", "Merovia is"]
    cfg = GenerationConfig(max_new_tokens=16, temperature=1.0, seed=7)
    state = torch.random.get_rng_state()
    a = gen.generate(prompts, cfg)
    b = gen.generate(prompts, cfg)
    c = gen.generate(prompts, cfg.with_(seed=8))
    assert torch.equal(state, torch.random.get_rng_state())
    assert a == b
    assert a != c


def test_stop_strings_cut_after_first_stop_and_keep_it(tok):
    g = _scripted(
        tok,
        [
            "<think> hm </think><search> Tarsk </search> never <answer> x </answer>",
            "<answer> Ostrel </answer> trailing",
            "no tag at all here",
        ],
    )
    out = g.generate(["p one", "p two", "p three"], GenerationConfig(max_new_tokens=40, stop=STOP, temperature=0))
    assert out[0] == "<think> hm </think><search> Tarsk </search>"
    assert out[1] == "<answer> Ostrel </answer>"
    assert out[2] == "no tag at all here"  # ended by EOS, passed on unchanged


def test_stop_string_split_across_tokens_is_found(tok):
    """'</answer>' typed as separate pieces still stops generation exactly after it."""
    pieces = ["<", "/", "ans", "wer", ">", " more"]
    scripts = [[i for p in ["<answer> a "] + pieces for i in tok(p, add_special_tokens=False)["input_ids"]]]
    g = TransformersGenerator(ScriptedLM(scripts, len(tok), tok.eos_token_id), tok)
    out = g.generate(["prompt text"], GenerationConfig(max_new_tokens=60, stop=STOP, temperature=0))
    assert out == ["<answer> a </answer>"]


def test_max_new_tokens_caps_an_unclosed_generation(tok):
    g = _scripted(tok, ["<search> an endless query that never closes " * 5])
    res = g.generate_with_stats(["prompt"], GenerationConfig(max_new_tokens=5, stop=STOP, temperature=0))
    assert res.new_tokens == 5
    assert res.texts[0].startswith("<search>") and "</search>" not in res.texts[0]


def test_bad_generation_config_is_a_clear_error(gen):
    with pytest.raises(GenerationError, match="max_new_tokens"):
        gen.generate(["x"], GenerationConfig(max_new_tokens=0))
    with pytest.raises(GenerationError, match="empty prompt"):
        gen.generate([""], GenerationConfig(max_new_tokens=2))


# ---------------------------------------------------------------- model loading
def test_missing_model_path_names_the_fix(tmp_path):
    with pytest.raises(FileNotFoundError, match="smollm2"):
        resolve_model_path(str(tmp_path / "nope"))
    with pytest.raises(FileNotFoundError, match="config.json"):
        resolve_model_path(str(tmp_path))


def test_uncached_hub_id_never_downloads(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(FileNotFoundError, match="never downloads"):
        load_policy("someone/not-a-cached-model")


def test_load_policy_from_a_local_folder(tmp_path):
    path = save_tiny(tmp_path / "tiny")
    model, tok = load_policy(str(path))
    assert tok.padding_side == "left" and tok.pad_token is not None
    out = TransformersGenerator(model, tok).generate(["Tarsk"], GenerationConfig(max_new_tokens=3, temperature=0))
    assert isinstance(out[0], str)


# ---------------------------------------------------------------- OpenAI-compatible backend
def test_openai_backend_chat_and_raw_with_stop_restored():
    def reply(prompt, body):
        return "<search> Tarsk " if isinstance(prompt, list) else " continued"

    with OpenAIStubServer(reply) as srv:
        g = OpenAICompatibleGenerator(srv.url, timeout=5, max_retries=0)
        out = g.generate([[{"role": "user", "content": "q"}], "raw"], GenerationConfig(max_new_tokens=8, stop=STOP))
        g.close()
    assert out == ["<search> Tarsk </search>", " continued"]
    assert {tuple(r["stop"]) for r in srv.requests} == {STOP}


def test_openai_backend_returns_sampled_ids_where_the_server_offers_them(caplog):
    ids = [11, 12, 13]
    with OpenAIStubServer(lambda p, b: "<answer> x </answer>", token_ids=lambda text: ids) as srv:
        g = OpenAICompatibleGenerator(srv.url, timeout=5, max_retries=0, request_token_ids=True)
        res = g.generate_with_stats([[{"role": "user", "content": "q"}]], GenerationConfig(max_new_tokens=4, stop=STOP))
        assert res.token_ids == [ids] and res.texts == ["<answer> x </answer>"]
        assert srv.requests[-1]["return_token_ids"] is True
        text_only = g.generate_with_stats(["raw"], GenerationConfig(max_new_tokens=4))  # /completions: no ids here
        g.close()
    assert text_only.token_ids == [None]
    assert "returned no token ids" in caplog.text and "re-tokenise" in caplog.text


def test_openai_backend_retries_server_errors_and_reports_a_dead_endpoint():
    with OpenAIStubServer(lambda p, b: "<answer> x </answer>", fail_every=2) as srv:
        g = OpenAICompatibleGenerator(srv.url, timeout=5, max_retries=2, backoff=0.01, concurrency=1)
        assert g.generate(["a", "b"], GenerationConfig(max_new_tokens=4)) == ["<answer> x </answer>"] * 2
        g.close()
    dead = OpenAICompatibleGenerator(srv.url, timeout=1, max_retries=1, backoff=0.01)
    with pytest.raises(GenerationError, match="cannot reach"):
        dead.generate(["a"], GenerationConfig(max_new_tokens=4))
    dead.close()


# ---------------------------------------------------------------- LLM agent
class RecordingGenerator(TextGenerator):
    """Replies with a fixed text per call and records every batch it is given."""

    def __init__(self, text: str = "<answer> Tarsk </answer>") -> None:
        self.text = text
        self.batches: list = []
        self.configs: list = []

    def generate(self, prompts, config=None):
        self.batches.append(list(prompts))
        self.configs.append(config)
        return [self.text for _ in prompts]


def _traj(prompt: str, completion: list[tuple[str, str]] = ()) -> Trajectory:
    t = Trajectory(role="solver", task=Task(id="t", question="q", answers=["Tarsk"]), prompt=prompt)
    t.segments = [Segment(prompt, "prompt")] + [Segment(text, src) for text, src in completion]
    return t


def test_agent_batches_active_slots_of_several_envs_into_one_call():
    gen = RecordingGenerator()
    agent = LLMAgent(gen, config=AgentConfig(seed=3))
    trajs = [_traj(f"P{i}") for i in range(3)]
    obs_a = {"role": 1, "active": [1, 0, 1], "texts": ("", "", "")}
    obs_b = {"role": 0, "active": [1, 0, 0], "texts": ("", "", "")}
    acts = agent.act_batch([(obs_a, {"trajectories": trajs}), (obs_b, {"trajectories": trajs})])
    assert len(gen.batches) == 1 and len(gen.batches[0]) == 3
    assert acts[0] == ("<answer> Tarsk </answer>", "", "<answer> Tarsk </answer>")
    assert acts[1] == ("<answer> Tarsk </answer>", "", "")
    assert gen.configs[0].stop == STOP_STRINGS
    single = agent.act("P", {"trajectory": _traj("P")})
    assert single == "<answer> Tarsk </answer>"


def test_agent_context_is_the_encoded_trajectory(tiny, tok):
    """With a token-id backend the context is the trajectory's ids: chat prompt, then each segment's ids."""
    gen = TransformersGenerator(tiny, tok)
    agent = LLMAgent(gen)
    t = _traj("Who?", [("<search> a </search>", "agent"), ("\n<information>doc</information>\n", "env")])
    ctx = agent.context(t)
    parts = [
        gen.render([{"role": "user", "content": "Who?"}]),
        "<search> a </search>",
        "\n<information>doc</information>\n",
    ]
    assert ctx == [i for p in parts for i in gen.encode(p)]


def test_agent_continues_partial_turns_on_servers_with_continue_final_message():
    gen = RecordingGenerator()
    agent = LLMAgent(gen)
    fresh, partial = (
        _traj("A"),
        _traj("B", [("<search> x </search>", "agent"), ("<information>i</information>", "env")]),
    )
    agent.act_batch([("A", {"trajectory": fresh}), ("B", {"trajectory": partial})])
    assert len(gen.batches) == 2  # different template flags → separate calls
    assert gen.batches[0] == [[{"role": "user", "content": "A"}]]
    assert gen.batches[1][0][-1] == {"role": "assistant", "content": "<search> x </search><information>i</information>"}
    assert gen.configs[1].extra == {"continue_final_message": True, "add_generation_prompt": False}


def test_agent_seed_stream_is_reproducible():
    a, b = RecordingGenerator(), RecordingGenerator()
    for g in (a, b):
        agent = LLMAgent(g, config=AgentConfig(seed=11))
        for _ in range(3):
            agent.act("P", {"trajectory": _traj("P")})
    assert [c.seed for c in a.configs] == [c.seed for c in b.configs]
    assert len({c.seed for c in a.configs}) == 3


def test_agent_needs_the_env_info():
    agent = LLMAgent(RecordingGenerator())
    with pytest.raises(ValueError, match="trajectory"):
        agent.act("P", {})
    with pytest.raises(ValueError, match="trajectories"):
        agent.act({"role": 1, "active": [1], "texts": ("",)}, {})


def test_agent_plays_a_real_solver_group_env(tiny_world):
    import gymnasium as gym

    import searchgym  # noqa: F401

    task = Task(id="q1", question="Where was Alice Varn born?", answers=["Tarsk"])
    env = gym.make("KGSolverGroup-v0", world=tiny_world, tasks=[task], group_size=3, max_turns=2)
    gen = RecordingGenerator("<think> t </think><answer> Tarsk </answer>")
    agent = LLMAgent(gen)
    obs, info = env.reset(seed=0)
    done, events = False, []
    while not done:
        obs, _, term, trunc, info = env.step(agent.act(obs, info))
        events += info["rewards"]
        done = term or trunc
    assert len(gen.batches) == 1 and len(gen.batches[0]) == 3
    assert [e["reward"] for e in events if e["role"] == "solver"] == [1.0, 1.0, 1.0]


# ---------------------------------------------------------------- GPU-only paths
def test_vllm_backend_import_is_lazy_and_missing_vllm_is_clear():
    import importlib.util

    import searchgym.llm.vllm_backend as vb  # importing the module never needs vllm

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is installed; the GPU test covers it")
    with pytest.raises(ImportError, match="searchgym\\[vllm\\]"):
        vb.VLLMGenerator("some-model")


@pytest.mark.gpu
def test_transformers_backend_on_cuda(tok):
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    model = build_model(tok)
    gen = TransformersGenerator(model, tok, device="cuda")
    cfg = GenerationConfig(max_new_tokens=8, temperature=1.0, seed=1)
    assert gen.generate(["Tarsk", "Merovia"], cfg) == gen.generate(["Tarsk", "Merovia"], cfg)
