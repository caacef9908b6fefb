"""The held-out Proposer check: valid-question rate with its reasons, and one record per rollout."""

import json

from searchgym.agents.demonstrations import ProposerExpert
from searchgym.agents.eval_agents import ScriptedEvalAgent
from searchgym.agents.learning import heldout_proposer_tasks, proposer_valid_rate
from searchgym.agents.scripted import ScriptedAgent
from searchgym.world.synthetic import default_world


class _AnswersOnly(ScriptedAgent):
    """A Proposer that never writes a question (answers instead): every rollout must count as invalid."""

    def turn(self, traj, slot):
        return "<think>I answer.</think>\n<answer>Dask</answer>"


def test_proposer_rate_counts_reasons_and_writes_one_record_per_rollout(tmp_path):
    world = default_world()
    tasks = heldout_proposer_tasks(world, 8)
    rate = proposer_valid_rate(ScriptedEvalAgent(ProposerExpert(0), "expert"), world, tasks, out_dir=tmp_path)
    rows = [json.loads(x) for x in (tmp_path / "proposer.jsonl").read_text().splitlines()]
    assert rate["n"] == len(rows) == 8 and sum(rate["reasons"].values()) == 8
    assert sorted(r["task"] for r in rows) == sorted(t.id for t in tasks)
    assert rate["valid_rate"] == sum(r["valid"] for r in rows) / 8 > 0.5  # expert: 23/32 in bench_learning
    for r in rows:
        assert r["question"] and r["queries"] and (r["reason"] is None) == r["valid"]

    none = proposer_valid_rate(ScriptedEvalAgent(_AnswersOnly(), "mute"), world, tasks)
    assert none["valid_rate"] == 0.0 and set(none["reasons"]) == {"no_question"}, none
