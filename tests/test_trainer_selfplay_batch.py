"""The trainer's batched self-play follows SSP: one replay buffer shared by the batch's env clones and
cleared every ``replay_reset_steps`` training steps; RAG-verification noise drawn from the other
Proposer trajectories of the same batch; config keys that are also env kwargs resolve one way."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import gymnasium as gym  # noqa: E402

import searchgym  # noqa: E402,F401
from searchgym.agents.scripted import ScriptedSelfPlayAgent  # noqa: E402
from searchgym.core.types import Task  # noqa: E402
from searchgym.scoring.outcomes import document_materials  # noqa: E402
from searchgym.training.selfplay_config import TrainConfig  # noqa: E402
from searchgym.training.selfplay_trainer import SelfPlayTrainer  # noqa: E402
from tests.support.env_helpers import RecordingVerifier  # noqa: E402
from tests.support.tiny_lm import build_model, build_tokenizer  # noqa: E402


class ScriptedBatchAgent:
    """The trainer's ``act_batch`` interface over the model-free self-play agent (real searches,
    real verification; no language model in the loop). RNG state is the replaced LLM agent's, so
    checkpoints work unchanged."""

    def __init__(self, llm_agent) -> None:
        self.inner = ScriptedSelfPlayAgent()
        self.stats = SimpleNamespace(new_tokens=0)
        self.get_rng_state, self.set_rng_state = llm_agent.get_rng_state, llm_agent.set_rng_state

    def act_batch(self, items, *, config=None):
        return [self.inner.act(obs, info) for obs, info in items]


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


def _trainer(tmp_path, tok, *, n_envs=2, verifier=None, env_kwargs=None, **kw):
    cfg = dict(
        device="cpu",
        batch_size=24,
        group_size=2,
        max_turns=10,
        max_new_tokens=8,
        tensorboard=False,
        progress=False,
        output_dir=str(tmp_path / "run"),
        save_every=0,
        val_every=0,
    )
    cfg.update(kw)
    config = TrainConfig(**cfg)
    extra = {"verifier": verifier} if verifier is not None else {}
    extra.update(env_kwargs or {})
    first = gym.make("KGSelfPlay-v0", group_size=config.group_size, max_turns=config.max_turns, **extra)
    envs = [first] + [first.unwrapped.clone() for _ in range(n_envs - 1)]
    tr = SelfPlayTrainer(config, envs=envs, model=build_model(tok), tokenizer=tok)
    tr.agent = ScriptedBatchAgent(tr.agent)
    return tr


def _valid_questions(batch) -> list[str]:
    return [s.trajectory.question for s in batch.samples if s.role == "proposer" and s.components.get("valid") == 1.0]


def test_one_replay_buffer_for_the_batch_not_cleared_by_game_count(tmp_path, tok):
    tr = _trainer(tmp_path, tok)
    replay = tr.replay  # the runner's: no env's own buffer, and no env attribute written to share it
    assert replay is tr.runner.replay and replay.reset_every is None
    assert all(e.unwrapped.replay is not replay for e in tr.envs)
    valid = _valid_questions(tr.collect())  # 24 games over 2 clones: 12 each, past the env-level 10-game reset
    assert valid
    assert {id(e.unwrapped.replay) for e in tr.envs} == {id(replay)}  # every clone's games used it
    assert all(len(e.unwrapped.own_replay) == 0 for e in tr.envs)
    assert sorted(t.question for t in replay._items) == sorted(valid)  # every valid question of the batch, kept


def test_replay_buffer_cleared_every_replay_reset_steps_training_steps(tmp_path, tok):
    tr = _trainer(tmp_path, tok, replay_reset_steps=2)
    replay = tr.replay
    valid0 = _valid_questions(tr.collect())
    assert valid0 and len(replay) == len(valid0)
    tr.step = 1
    valid1 = _valid_questions(tr.collect())
    assert len(replay) == len(valid0) + len(valid1)  # kept across steps until the period is over
    tr.step = 2
    valid2 = _valid_questions(tr.collect())
    assert sorted(t.question for t in replay._items) == sorted(valid2)  # cleared at step 2, once
    assert replay.resets == 1
    tr.collect(n_games=2)  # a second collect in the same step does not clear again
    assert len(replay) >= len(valid2)


def test_replay_never_cleared_with_period_zero(tmp_path, tok):
    tr = _trainer(tmp_path, tok, replay_reset_steps=0, batch_size=12)
    replay = tr.replay
    sizes = []
    for step in range(3):
        tr.step = step
        tr.collect()
        sizes.append(len(replay))
    assert sizes[0] < sizes[1] < sizes[2] and replay.resets == 0


def test_noise_documents_come_from_the_other_proposer_trajectories_of_the_batch(tmp_path, tok):
    rec = RecordingVerifier()
    tr = _trainer(tmp_path, tok, verifier=rec, batch_size=4)
    for step in range(2):
        tr.step = step
        rec.calls.clear()
        batch = tr.collect()
        proposers = [s.trajectory for s in batch.samples if s.role == "proposer"]
        assert len(proposers) == 4 and len(rec.calls) == 4
        by_question = {t.question: document_materials(t) for t in proposers}
        for call in rec.calls:
            own = by_question[call["question"]]
            others = {m for t in proposers if t.question != call["question"] for m in document_materials(t)}
            assert call["noise_pool"], "the first games of a batch are verified with noise too"
            assert set(call["noise_pool"]) <= others  # only this batch's other trajectories
            assert not set(call["noise_pool"]) & (set(own) - others)


def test_env_kwargs_that_repeat_a_config_field_resolve_one_way(tmp_path, tok):
    # the reported crash: max_turns in env_kwargs and as a config field, plus val_tasks
    with pytest.raises(ValueError, match=r"max_turns.*env_kwargs|env_kwargs.*max_turns"):
        TrainConfig().with_overrides(['env_kwargs={"tasks": "t.jsonl", "max_turns": 2}'])
    with pytest.raises(ValueError, match="group_size"):
        TrainConfig(group_size=5, env_kwargs={"group_size": 3})
    with pytest.raises(ValueError, match="replay_reset_steps"):
        TrainConfig(env_kwargs={"replay_reset_every": 3})
    same = TrainConfig(max_turns=2, env_kwargs={"max_turns": 2})  # agreeing values are fine
    task = Task(id="q", question="Where was Alice Varn born?", answers=["Tarsk"])
    tr = SelfPlayTrainer(
        TrainConfig(**{**same.to_dict(), "device": "cpu", "output_dir": str(tmp_path)}),
        envs=[object()],
        model=build_model(tok),
        tokenizer=tok,
        val_tasks=[task],
    )
    env = tr._val_env()  # crashed with "got multiple values for keyword argument 'max_turns'"
    assert env.unwrapped.max_turns == 2


def _checkpoint_after_one_batch(tmp_path, tok):
    """A trainer that played one batch (its shared buffer holds questions), its checkpoint, the stored questions."""
    tr = _trainer(tmp_path, tok, batch_size=6)
    tr.collect()
    tr.step = 1
    path = tr.save_checkpoint()
    stored = [t.question for t in tr.replay._items]
    assert stored
    return tr, path, stored


def test_shared_replay_buffer_survives_a_checkpoint(tmp_path, tok):
    tr, path, stored = _checkpoint_after_one_batch(tmp_path, tok)
    fresh = _trainer(tmp_path, tok, batch_size=6)
    fresh.load_checkpoint(path)
    assert [t.question for t in fresh.replay._items] == stored and fresh.replay.reset_every is None
    fresh.collect(n_games=2)
    assert {id(e.unwrapped.replay) for e in fresh.envs} == {id(fresh.replay)}  # the restored buffer is played


def test_a_checkpoint_from_before_the_runner_restores_the_shared_buffer(tmp_path, tok):
    """Older checkpoints kept the shared buffer only in the env states (every env held it then)."""
    import json

    tr, path, stored = _checkpoint_after_one_batch(tmp_path, tok)
    plain = json.loads((path / "trainer_state.json").read_text())
    del plain["runner"]
    for env_state in plain["envs"]:  # as an old trainer saved it: every env held the shared buffer
        env_state["state_dict"]["replay"] = plain["envs"][0]["state_dict"]["replay"]
    (path / "trainer_state.json").write_text(json.dumps(plain))
    fresh = _trainer(tmp_path, tok, batch_size=6)
    fresh.load_checkpoint(path)
    assert [t.question for t in fresh.replay._items] == stored


def test_collect_with_a_generation_config_seeds_every_batched_call_from_the_trainer_rng(tmp_path, tok):
    import random

    from searchgym.core.llm import GenerationConfig

    tr = _trainer(tmp_path, tok, batch_size=2)
    configs = []
    inner = tr.agent.act_batch

    def recording(items, *, config=None):
        configs.append(config)
        return inner(items, config=config)

    tr.agent.act_batch = recording
    twin = random.Random()
    twin.setstate(tr.rng.getstate())
    tr.collect(generation=GenerationConfig(max_new_tokens=5, temperature=0.5))
    for _ in range(2):  # the two games' reset seeds are drawn first
        twin.randrange(2**31)
    assert configs and all(c.max_new_tokens == 5 and c.temperature == 0.5 for c in configs)
    assert [c.seed for c in configs] == [twin.randrange(2**31) for _ in configs]


def test_proposer_group_size_plays_each_subgraph_that_many_times_and_target_baseline_compares_them(tmp_path, tok):
    """``proposer_group_size`` 2: games 0-1 of a step are on one pool subgraph, 2-3 on the next (each its own seed),
    and ``proposer_baseline: target`` centres each question's reward on its own subgraph's questions."""
    tr = _trainer(tmp_path, tok, batch_size=4, proposer_group_size=2, proposer_baseline="target")
    batch = tr.collect()
    prop = [s for s in batch.samples if s.role == "proposer"]
    ids = [s.trajectory.task.subgraph.id for s in prop]
    assert len(ids) == 4 and ids[0] == ids[1] and ids[2] == ids[3] and ids[0] != ids[2]
    assert len({s.group for s in prop}) == 4  # four games: each its own Solver group
    for s, r in zip(prop, (0.5, 0.0, 1.0, 1.0)):  # rewards to centre: one contrast, one tie
        s.reward = r
    adv = [t[0] for s, t in zip(batch.samples, tr.advantages(batch.samples)) if s.role == "proposer"]
    assert adv == pytest.approx([0.25, -0.25, 0.0, 0.0])
    assert tr.games_played == 4
    nxt = [s.trajectory.task.subgraph.id for s in tr.collect().samples if s.role == "proposer"]
    assert nxt[0] == nxt[1] and nxt[2] == nxt[3] and len(set(nxt) | set(ids)) == 4  # pool subgraphs 2 and 3


def test_target_baseline_needs_groups_and_a_dividing_batch():
    with pytest.raises(ValueError, match="proposer_group_size to 2 or more"):
        TrainConfig(proposer_baseline="target")
    with pytest.raises(ValueError, match="target_or_all compares"):
        TrainConfig(proposer_baseline="target_or_all", proposer_group_size=1)
    with pytest.raises(ValueError, match="divide batch_size=6"):
        TrainConfig(batch_size=6, proposer_group_size=4)


def test_solver_only_games_give_solver_samples_and_no_proposer_sample(tmp_path, tok):
    """A pool of 1- and 2-hop subgraphs with ``solver_only_hops=[1]``: every game gives its Solver group, only the
    2-hop games a Proposer sample, and the step's metrics and advantages take the mix."""
    from searchgym.training.selfplay_samples import rollout_metrics

    tr = _trainer(tmp_path, tok, batch_size=4, env_kwargs={"pool_hops": [1, 2], "solver_only_hops": [1]})
    batch = tr.collect()
    prop = [s for s in batch.samples if s.role == "proposer"]
    solver = [s for s in batch.samples if s.role == "solver"]
    assert batch.games == 4 and len(solver) == 8
    assert prop and all(s.trajectory.task.hops == 2 for s in prop)
    one_hop = [s for s in solver if s.trajectory.task.hops == 1]
    assert len(prop) + len(one_hop) // 2 == 4 and all(s.trajectory.task.source == "subgraph" for s in one_hop)
    m = rollout_metrics(batch.samples)
    assert m["proposer/n"] == len(prop) and m["solver/n"] == 8
    assert len(tr.advantages(batch.samples)) == len(batch.samples)
