"""The wrappers on the real envs (gym.make) with the scripted agents: stacking, groups, lone rollouts."""

from __future__ import annotations

import gymnasium as gym
import pytest

import searchgym  # noqa: F401  (registers the envs)
from searchgym.agents.scripted import PathFollowingSolver, RandomAgent, ScriptedProposer
from searchgym.scoring.outcomes import information_materials
from searchgym.wrappers import (
    DynaSearcherReward,
    EvidenceVerifierReward,
    GraphDistanceReward,
    RewardShapingWrapper,
    WaypointCoverageReward,
    gdcr_step_rewards,
    retrieval_penalty,
    waypoint_coverage,
)
from tests.support.wrapper_fakes import PartialSolver, SlotMix, play


class FormatPenalty(RewardShapingWrapper):
    """−0.1 for a solver rollout without a valid, parseable answer."""

    name = "format_penalty"

    def shape_solver_group(self, events, info):
        for ev in events:
            t = ev["trajectory"]
            p = -0.1 if (t.answer is None or not t.valid) else 0.0
            self.set_reward(ev, ev["reward"] + p, format_penalty=p)


def test_wcr_on_solver_group_normalises_by_best_coverage():
    env = WaypointCoverageReward(gym.make("KGSolverGroup-v0", group_size=4))
    agent = SlotMix([PathFollowingSolver(), PartialSolver(1), PartialSolver(2), RandomAgent(0)])
    _, events, info = play(env, agent, seed=3)
    assert len(events) == 4
    trajs = [ev["trajectory"] for ev in events]
    k = len(trajs[0].task.waypoints)
    assert k >= 3
    # the path follower names every waypoint (g = 1 = g_max); the partial solvers name v0 (and v1)
    assert [ev["components"]["wcr_coverage"] for ev in events[:3]] == pytest.approx([1.0, 1 / k, 2 / k])
    for ev, t in zip(events, trajs):
        c = bool(t.correct)
        expected = 1.0 if c else (0.3 * ev["components"]["wcr_coverage"] if t.valid and t.answer is not None else 0.0)
        assert ev["reward"] == pytest.approx(expected)
        assert ev["components"]["outcome"] == float(c)  # the env's own component survives
    assert not trajs[1].correct and events[1]["reward"] == pytest.approx(0.3 / k)
    assert info["reward_components"]["solver"]["wcr_bonus"][1] == pytest.approx(0.3 / k)


def test_stack_on_selfplay_logs_every_component_by_name():
    env = FormatPenalty(WaypointCoverageReward(GraphDistanceReward(gym.make("KGSelfPlay-v0", group_size=3))))
    agent = SlotMix([PathFollowingSolver(), PartialSolver(1), RandomAgent(1)])
    obs, info = env.reset(seed=2)
    steps, done, total, events = [], False, 0.0, []
    while not done:
        obs, reward, term, trunc, info = env.step(agent.act(obs, info))
        assert reward == pytest.approx(sum(ev["reward"] for ev in info["rewards"]))
        steps.append(info["gdcr_step"])
        total += reward
        events.extend(info["rewards"])
        done = term or trunc
    solvers = [ev for ev in events if ev["role"] == "solver"]
    proposer = [ev for ev in events if ev["role"] == "proposer"]
    assert len(solvers) == 3 and len(proposer) == 1
    for ev in solvers:
        comp = ev["components"]
        for name in (
            "outcome",
            "gdcr_steps",
            "gdcr_total",
            "wcr_coverage",
            "wcr_normalised_coverage",
            "wcr_bonus",
            "correct",
            "format_penalty",
        ):
            assert name in comp, name
        assert ev["reward"] == pytest.approx(comp["outcome"] + comp["wcr_bonus"] + comp["format_penalty"])
        assert comp["gdcr_steps"] == pytest.approx(gdcr_step_rewards(ev["trajectory"]))
        assert ev["trajectory"].reward == pytest.approx(ev["reward"])
    p = proposer[0]
    assert not any(k.startswith(("wcr", "gdcr", "format")) for k in p["components"])
    if p["components"]["valid"]:
        assert p["reward"] == pytest.approx(1 - sum(ev["components"]["outcome"] for ev in solvers) / 3)
    rc = info["reward_components"]
    assert len(rc["solver"]["wcr_bonus"]) == 3 and rc["solver"]["format_penalty"][2] in (0.0, -0.1)
    assert any(isinstance(s, list) and any(v is not None and v > 0 for v in s) for s in steps)
    assert total == pytest.approx(sum(ev["reward"] for ev in events))
    # Gymnasium 1.x: lookups down the stack through get_wrapper_attr, writes through set_wrapper_attr
    assert env.get_wrapper_attr("world") is env.unwrapped.world and env.get_wrapper_attr("alpha") == 0.3
    with pytest.raises(AttributeError):
        env.get_wrapper_attr("no_such_attribute")


def test_lone_solver_rollout_uses_raw_coverage():
    env = WaypointCoverageReward(gym.make("KGSolver-v0"))
    _, events, info = play(env, SlotMix([PartialSolver(1)]), seed=1)
    (ev,) = events
    k = len(ev["trajectory"].task.waypoints)
    assert ev["reward"] == pytest.approx(0.3 / k)
    assert info["reward_components"]["wcr_coverage"] == pytest.approx(1 / k)
    assert info["reward_components"]["wcr_normalised_coverage"] == pytest.approx(1 / k)


def test_dynasearcher_on_solver_env():
    env = DynaSearcherReward(gym.make("KGSolver-v0"))
    _, (ev,), _ = play(env, SlotMix([PathFollowingSolver()]), seed=0)
    t, c = ev["trajectory"], ev["components"]
    assert c["dyna_penalty"] == pytest.approx(retrieval_penalty(t.num_searches, t.task.hops))
    assert 0.0 < c["dyna_recall"] <= 1.0
    assert ev["reward"] == pytest.approx(c["dyna_acc"] + 0.5 * (c["dyna_recall"] - c["dyna_penalty"]))


class EvidenceProposer(ScriptedProposer):
    """The scripted proposer, plus an ``<evidence>`` span copied from its last retrieved document."""

    def turn(self, traj, slot):
        text = super().turn(traj, slot)
        if "<question>" in text:
            doc = information_materials(traj)[-1]
            span = doc.split(")", 1)[1].split(".")[0].strip() + "."
            text += f"\n<evidence>{span}</evidence>"
        return text


class AcceptAll:
    """A verifier that accepts every question that passed the rule filters (EVE is under test)."""

    def verify(self, question, answers, materials, noise_pool, rng):
        from searchgym.scoring.rag_verifier import VerifierResult

        return VerifierResult(valid=True, reason=None, prediction=answers[0])


def test_eve_on_selfplay():
    base = gym.make("KGSelfPlay-v0", group_size=3, verifier=AcceptAll())
    env = EvidenceVerifierReward(base, lambda q, e: "unknown", m=2, missing_evidence="answer_only")
    agent = SlotMix([PathFollowingSolver()], proposer=EvidenceProposer())
    _, events, info = play(env, agent, seed=2)
    prop = [ev for ev in events if ev["role"] == "proposer"][0]
    assert info["validation"]["valid"], info["validation"]
    c = prop["components"]
    assert c["eve_valid"] == 1 and c["eve_verifier"] == 0.0
    assert prop["reward"] == pytest.approx(0.5 * c["eve_format"] + c["eve_difficulty"] + 0.1 * c["eve_brevity"])
    for ev in (e for e in events if e["role"] == "solver"):
        assert ev["trajectory"].task.evidence == prop["trajectory"].evidence
        assert ev["reward"] == pytest.approx(ev["components"]["eve_em"])  # no <evidence> from this solver


def test_reset_checks_the_task():
    from searchgym.core.types import Task
    from searchgym.wrappers import MissingTaskDataError

    bare = Task(id="bare", question="Who?", answers=["x"])
    env = WaypointCoverageReward(gym.make("KGSolver-v0"))
    with pytest.raises(MissingTaskDataError, match="no waypoints"):
        env.reset(options={"task": bare})
    assert waypoint_coverage("a", ["a"])[0] == 1.0


def test_play_cli_stacks_reward_wrappers_and_reports_their_components(capsys):
    from searchgym.cli import main as cli_main

    assert cli_main(["play", "--games", "2", "--reward", "dynasearcher,wcr,gdcr"]) == 0
    out = capsys.readouterr().out
    line = next(row for row in out.splitlines() if row.startswith("mean solver reward components"))
    for name in ("dyna_acc", "dyna_recall", "wcr_coverage", "wcr_bonus", "gdcr_total"):
        assert name in line


@pytest.mark.parametrize(
    "spec, message",
    [("wcr,dynasearcher", "must come first"), ("wcr,bogus", "unknown reward 'bogus'"), ("wcr,wcr", "twice")],
)
def test_play_cli_rejects_bad_reward_stacks(spec, message, capsys):
    from searchgym.cli import main as cli_main

    assert cli_main(["play", "--games", "1", "--reward", spec]) == 2
    assert message in capsys.readouterr().err


def test_play_cli_passes_reward_options_to_the_wrappers(capsys, monkeypatch):
    from searchgym.cli import main as cli_main
    from searchgym.wrappers import registry

    built = []  # the envs play wrapped, to read the wrapper's settings
    real_wrap = registry.RewardPlan.wrap

    def wrap(self, env, **kwargs):
        built.append(real_wrap(self, env, **kwargs))
        return built[-1]

    monkeypatch.setattr(registry.RewardPlan, "wrap", wrap)
    argv = ["play", "--games", "1", "--reward", "wcr"]
    options = ["--reward-option", "wcr.waypoint_answer_credit=false", "--reward-option", "wcr.alpha=0.5"]
    assert cli_main([*argv, *options]) == 0
    out = capsys.readouterr().out
    line = next(row for row in out.splitlines() if row.startswith("mean solver reward components"))
    assert "wcr_answered_waypoint" in line  # reported only without credit for an answer at a waypoint
    (env,) = built
    assert env.get_wrapper_attr("waypoint_answer_credit") is False and env.get_wrapper_attr("alpha") == 0.5
    assert cli_main(argv) == 0  # without the option: Eq. 6, the default
    assert "wcr_answered_waypoint" not in capsys.readouterr().out
    assert built[1].get_wrapper_attr("waypoint_answer_credit") is True


def test_play_reward_options_read_yaml_values_and_dotted_wrapper_paths():
    from searchgym.wrappers.registry import reward_options_from_items

    items = ["wcr.alpha=0.5", "wcr.case_insensitive=yes", "pkg.mod:Mine.label= a b ", "pkg.mod:Mine.size=[1, 2]"]
    assert reward_options_from_items(items) == {
        "wcr": {"alpha": 0.5, "case_insensitive": True},
        "pkg.mod:Mine": {"label": "a b", "size": [1, 2]},
    }
    assert reward_options_from_items([]) == {}


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--reward", "wcr", "--reward-option", "wcr.credit=false"], "reward 'wcr' has no option credit; its options:"),
        (["--reward", "wcr", "--reward-option", "gdcr.x=1"], "reward options for 'gdcr', which is not in the reward"),
        (["--reward", "wcr", "--reward-option", "wcr=false"], "'wcr=false' must look like NAME.KEY=VALUE"),
        (["--reward", "wcr", "--reward-option", "wcr.alpha"], "'wcr.alpha' must look like NAME.KEY=VALUE"),
        (["--reward", "wcr", "--reward-option", "wcr.alpha=["], "--reward-option 'wcr.alpha=[': YAML syntax error"),
        (["--reward-option", "wcr.alpha=0.5"], "--reward-option configures a reward of --reward; add it"),
    ],
)
def test_play_cli_refuses_bad_reward_options_in_one_line(extra, message, capsys):
    from searchgym.cli import main as cli_main

    assert cli_main(["play", "--games", "1", *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_only_reward_replacing_wrappers_are_marked_and_must_stack_innermost():
    from searchgym.wrappers import wrap_rewards

    assert DynaSearcherReward.replaces_reward and EvidenceVerifierReward.replaces_reward
    assert not WaypointCoverageReward.replaces_reward and not GraphDistanceReward.replaces_reward
    env = wrap_rewards(gym.make("KGSolverGroup-v0"), ["dynasearcher", "wcr"])
    assert isinstance(env, WaypointCoverageReward) and isinstance(env.env, DynaSearcherReward)
