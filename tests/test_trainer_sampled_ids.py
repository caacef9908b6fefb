"""The update trains on the token ids the policy sampled, in multi-turn rollouts, with the transformers backend.

A random tiny model writes byte-level noise that re-tokenises differently from how it was sampled
(and its end-of-turn token vanishes from decoded text), so training on re-tokenised text -- the old
behaviour -- fails these tests on the first rollout.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from searchgym.core.types import Segment, Task, Trajectory, Turn  # noqa: E402
from searchgym.llm.sequences import SAMPLED_IDS_KEY, encode_trajectory, record_sampled  # noqa: E402
from searchgym.llm.transformers_backend import TransformersGenerator  # noqa: E402
from searchgym.training.selfplay_config import TrainConfig  # noqa: E402
from searchgym.training.selfplay_trainer import SelfPlayTrainer  # noqa: E402
from tests.support.tiny_lm import build_model, build_tokenizer  # noqa: E402


class SpyGenerator(TransformersGenerator):
    """The real generator, also logging every (context ids, sampled ids) pair it produced."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.log: list[tuple[list[int], list[int]]] = []

    def generate_with_stats(self, prompts, config=None):
        res = super().generate_with_stats(prompts, config)
        self.log.extend(zip([list(p) for p in prompts], res.token_ids))
        return res


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


def _trainer(tmp_path, tok, world, *, group: int, turns: int, new_tokens: int, seed: int) -> SelfPlayTrainer:
    """A trainer on one multi-turn KGSolverGroup-v0 env with a random tiny policy."""
    import gymnasium as gym

    import searchgym  # noqa: F401

    env = gym.make("KGSolverGroup-v0", world=world, group_size=group, max_turns=turns)
    cfg = TrainConfig(
        device="cpu",
        batch_size=2,
        group_size=group,
        max_turns=turns,
        max_new_tokens=new_tokens,
        lr=1e-4,
        warmup_steps=0,
        output_dir=str(tmp_path / "run"),
        tensorboard=False,
        progress=False,
        save_every=0,
        mini_batch_size=16,
        micro_batch_size=16,
    )
    return SelfPlayTrainer(cfg, envs=[env], model=build_model(tok, seed=seed), tokenizer=tok)


def test_trained_agent_tokens_are_the_sampled_ones_in_multi_turn_rollouts(tmp_path, tok, default_world):
    tr = _trainer(tmp_path, tok, default_world, group=3, turns=3, new_tokens=10, seed=5)
    spy = SpyGenerator(tr.policy, tok, seed=0)
    tr.agent.generator = spy
    batch = tr.collect()
    trajs = [s.trajectory for s in batch.samples]
    assert len(trajs) == 6 and max(len(t.turns) for t in trajs) >= 2  # multi-turn: noise gets corrective messages
    enc, _ = tr.encode(trajs, [[1.0]] * len(trajs))
    differs = 0
    for t, e in zip(trajs, enc):
        assert e.retokenised == 0
        full = encode_trajectory(tok, t, for_generation=True).input_ids
        # every turn: the context the policy saw is a prefix of the trained sequence and the tokens
        # it sampled there follow it verbatim
        sampled = sorted(
            {
                len(ctx): ids
                for ctx, ids in spy.log
                if ctx == full[: len(ctx)] and full[len(ctx) : len(ctx) + len(ids)] == ids
            }.items()
        )
        assert len(sampled) == len(t.turns)
        kept = [ids for (_, ids), turn in zip(sampled, t.turns) if turn.action]
        assert e.agent_segments == kept
        assert e.input_ids == full[: len(e.input_ids)]
        differs += any(
            tok(turn.action, add_special_tokens=False)["input_ids"] != ids
            for turn, ids in zip([u for u in t.turns if u.action], kept)
        )
    assert differs > 0  # re-tokenising the text would have trained on other tokens


def test_update_tokens_equal_sampled_tokens_count(tmp_path, tok, default_world):
    """The 'tokens' the update reports per sequence equal the tokens the generator sampled."""
    tr = _trainer(tmp_path, tok, default_world, group=2, turns=2, new_tokens=8, seed=6)
    batch = tr.collect()
    solvers = [s.trajectory for s in batch.samples if s.role == "solver"]
    # advantages of 1: a random policy's group usually scores all 0, and a no-signal update is skipped
    stats = {f"solver/{k}": v for k, v in tr.optimise(solvers, [[1.0]] * len(solvers)).items()}
    sampled = sum(
        len(ids or [])
        for s in batch.samples
        for ids, turn in zip(s.trajectory.metadata[SAMPLED_IDS_KEY], s.trajectory.turns)
        if turn.action
    )
    assert stats["solver/tokens"] * stats["solver/sequences"] == pytest.approx(sampled)


def test_ids_that_do_not_match_the_text_are_refused(tok):
    t = Trajectory(role="solver", task=Task(id="t", question="q?", answers=["a"]), prompt="q?")
    t.segments = [Segment("q?", "prompt")]
    record_sampled(t, tok("<answer> b </answer>", add_special_tokens=False)["input_ids"])
    t.turns.append(Turn(index=0, action="<answer> a </answer>"))
    t.segments.append(Segment("<answer> a </answer>", "agent"))
    with pytest.raises(ValueError, match="does not belong to this trajectory"):
        encode_trajectory(tok, t)
