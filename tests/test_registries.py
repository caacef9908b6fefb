"""The env-family and LLM-backend registries: one registration call makes a new env or backend reach every place
that reads them (gym.make, the CLI's choices and help, config validation, the trainer's envs, eval's agents)."""

from __future__ import annotations

import argparse

import gymnasium as gym
import pytest

import searchgym  # noqa: F401  (registers the envs)
from searchgym.agents.eval_agents import AgentSpec, agent_kinds, make_agent
from searchgym.core.llm import TextGenerator
from searchgym.envs import registration
from searchgym.envs.registration import EnvFamily, env_ids, env_spec, register_env_family
from searchgym.errors import InvalidArgumentError
from searchgym.llm import registry as backends
from searchgym.llm.registry import BackendRequest, BackendSpec, backend_names, register_backend
from searchgym.training.selfplay_config import TrainConfig


@pytest.fixture
def new_env_family():
    """A second self-play family (the same class under another id), removed again after the test."""
    family = register_env_family(
        EnvFamily("KGSelfPlayCopy-v0", "searchgym.envs.selfplay:KGSelfPlayEnv", "selfplay", ("proposer", "solver"))
    )
    yield family
    del registration._REGISTRY[family.env_id]
    del gym.registry[family.env_id]


class _EchoGenerator(TextGenerator):
    """A backend's generator that answers every prompt with the same text."""

    def __init__(self, request: BackendRequest) -> None:
        self.request = request

    def generate(self, prompts, config):  # noqa: D102 - TextGenerator's contract
        return ["<answer>x</answer>" for _ in prompts]


@pytest.fixture
def new_backend():
    """A served backend that can train and evaluate, removed again after the test."""
    spec = register_backend(BackendSpec("echo", _EchoGenerator, "server", "answers x", weights="server"))
    yield spec
    del backends._REGISTRY[spec.name]


def test_the_builtin_families_say_what_they_are():
    assert env_ids() == ("KGSolver-v0", "KGProposer-v0", "KGSolverGroup-v0", "KGSelfPlay-v0", "KGNavigate-v0")
    assert env_ids(group=True) == ("KGSolverGroup-v0", "KGSelfPlay-v0")
    assert env_ids(text=False) == ("KGNavigate-v0",)
    assert env_ids(kind="single", role="solver") == ("KGSolver-v0",)
    assert env_spec("KGSelfPlay-v0").roles == ("proposer", "solver")
    assert dict(registration.ENV_IDS)["KGSolver-v0"] == "searchgym.envs.solver:KGSolverEnv"
    with pytest.raises(InvalidArgumentError, match="did you mean KGSolver-v0"):
        env_spec("KGSolvr-v0")
    with pytest.raises(InvalidArgumentError, match="already registered"):
        register_env_family(EnvFamily("KGSolver-v0", "searchgym.envs.solver:KGSolverEnv", "single", ("solver",)))
    with pytest.raises(InvalidArgumentError, match="kind="):
        EnvFamily("X-v0", "m:C", "pair", ("solver",))  # type: ignore[arg-type]


def test_one_env_registration_reaches_gym_make_the_cli_the_config_and_the_trainer(new_env_family):
    from searchgym.cli import build_parser
    from searchgym.integrations.environments import EnvSpec
    from searchgym.training.selfplay_trainer import make_envs

    env_id = new_env_family.env_id
    assert env_id in registration.ENV_IDS and env_id in env_ids(group=True, text=True)
    env = gym.make(env_id, max_turns=2).unwrapped
    assert type(env).__name__ == "KGSelfPlayEnv"
    env.close()
    args = build_parser().parse_args(["play", "--env", env_id])  # a `searchgym play --env` choice
    assert args.env == env_id
    assert TrainConfig(env_id=env_id, group_size=3).env_id == env_id  # validated against the registry
    envs = make_envs(TrainConfig(env_id=env_id, group_size=3, max_turns=2), 1)
    assert envs[0].unwrapped.group_size == 3  # a slotted family gets the config's group_size
    assert EnvSpec(env_id).env_id == env_id  # the adapters play it (a text env)


def test_play_picks_the_scripted_agent_from_the_family(new_env_family):
    from searchgym.agents import scripted
    from searchgym.commands.play import _agent

    assert isinstance(_agent("scripted", new_env_family.env_id, 0), scripted.ScriptedSelfPlayAgent)
    assert isinstance(_agent("scripted", "KGProposer-v0", 0), scripted.ScriptedProposer)
    with pytest.raises(InvalidArgumentError, match="KGProposer-v0 or KGSelfPlay-v0 or KGSelfPlayCopy-v0"):
        _agent("leaky", "KGSolver-v0", 0)


def test_the_builtin_backends_say_what_they_can_do():
    assert backend_names(trains=True) == ("transformers", "vllm", "vllm-server")
    assert backend_names(evaluates=True) == ("transformers", "vllm", "openai")
    assert agent_kinds() == ("scripted", "random", "transformers", "vllm", "openai")
    with pytest.raises(InvalidArgumentError, match="rollout_backend='openai' cannot be used to train"):
        TrainConfig(rollout_backend="openai")
    with pytest.raises(InvalidArgumentError, match="not a registered backend"):
        TrainConfig(rollout_backend="tgi")
    with pytest.raises(InvalidArgumentError, match="unknown agent 'vllm-server'"):
        AgentSpec("vllm-server", endpoint="http://x")
    with pytest.raises(InvalidArgumentError, match="needs a server URL"):
        backends.get_backend("openai").make(BackendRequest())


def test_one_backend_registration_reaches_train_eval_and_the_cli(new_backend, tmp_path):
    from searchgym.cli import build_parser

    # train: the config accepts it (and asks for its server URL), the trainer builds it through the factory
    with pytest.raises(InvalidArgumentError, match="rollout_backend=echo needs vllm_server_url"):
        TrainConfig(rollout_backend="echo")
    config = TrainConfig(rollout_backend="echo", vllm_server_url="http://127.0.0.1:1")
    assert "echo" in backend_names(trains=True)
    # eval: an agent kind, built by the same factory from the spec's request
    assert "echo" in agent_kinds()
    agent = make_agent(AgentSpec("echo", endpoint="http://127.0.0.1:1", model="m", concurrency=3))
    assert agent.name == "echo:m@http://127.0.0.1:1"
    assert isinstance(agent.generator, _EchoGenerator) and agent.generator.request.concurrency == 3
    assert agent.settings["endpoint"] == "http://127.0.0.1:1" and "dtype" not in agent.settings
    # the CLI: eval --help and train --help name it with its help text
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert "echo (answers x)" in " ".join(sub.choices["eval"].format_help().split())
    assert "echo (answers x)" in " ".join(sub.choices["train"].format_help().split())
    assert config.rollout_backend == "echo"


def test_the_trainer_builds_its_generator_through_the_registry(new_backend, monkeypatch):
    from searchgym.training import rollout_backend

    pushed = []
    monkeypatch.setattr(rollout_backend, "sync_weights", lambda gen, policy: pushed.append(gen))
    config = TrainConfig(rollout_backend="echo", vllm_server_url="http://127.0.0.1:1", seed=7)
    built = rollout_backend.make_rollout_generator(config, None, None)
    generator = built.generator
    assert isinstance(generator, _EchoGenerator)
    assert generator.request.purpose == "train" and generator.request.seed == 7
    assert generator.request.endpoint == "http://127.0.0.1:1"
    assert pushed == [generator]  # a server backend starts from the policy's weights
    assert built.rollout_correction is False


def test_moved_tables_name_the_registry_calls():
    import searchgym.agents as agents
    import searchgym.integrations.environments as environments
    import searchgym.training.selfplay_config as selfplay_config
    import searchgym.training.selfplay_trainer as selfplay_trainer

    with pytest.raises(AttributeError, match="env_ids\\(group=True\\)"):
        selfplay_trainer.GROUP_ENVS  # noqa: B018
    with pytest.raises(AttributeError, match="env_ids\\(text=True\\)"):
        environments.TEXT_ENV_IDS  # noqa: B018
    with pytest.raises(AttributeError, match="backend_names\\(trains=True\\)"):
        selfplay_config.ROLLOUT_BACKENDS  # noqa: B018
    with pytest.raises(AttributeError, match="agent_kinds"):
        agents.AGENTS  # noqa: B018
