"""Write your own reward-shaping wrapper and compare it with WCR on the scripted agents.

The wrapper below (``SearchEfficiencyBonus``, the part a user writes: under 40 lines) rewards
incorrect-but-valid solver rollouts for each search that brought back a new document, capped, and
costs every search beyond the question's hop count a little. It is compared against
``WaypointCoverageReward`` (WCR) and the bare binary reward on ``KGSolverGroup-v0`` (and
``KGSelfPlay-v0`` with ``--selfplay``), with a group mixing a path-following solver, two solvers
that give up part-way and a random one.

    .venv/bin/python examples/reward_wrapper_experiment.py [--episodes 8] [--selfplay]
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import gymnasium as gym

import searchgym  # noqa: F401  (registers the envs)
from searchgym.agents.scripted import PathFollowingSolver, RandomAgent, ScriptedProposer
from searchgym.wrappers import RewardShapingWrapper, WaypointCoverageReward


# ----------------------------------------------------------------- the user's wrapper
class SearchEfficiencyBonus(RewardShapingWrapper):
    """+bonus per search that retrieved an unseen document (incorrect, valid rollouts only, capped
    at ``cap``); −cost per search beyond the task's hop count (every rollout)."""

    name = "search_efficiency"

    def __init__(self, env, bonus: float = 0.05, cap: float = 0.3, cost: float = 0.02):
        super().__init__(env)
        self.bonus, self.cap, self.cost = bonus, cap, cost

    def shape_solver_group(self, events, info):
        for ev in events:
            traj = ev["trajectory"]
            seen, useful = set(), 0
            for call in (s for turn in traj.turns for s in turn.searches):
                new = set(call.doc_ids) - seen
                useful += bool(new)
                seen |= new
            credit = 0.0
            if not traj.correct and traj.valid and traj.answer is not None:
                credit = min(self.cap, self.bonus * useful)
            extra = max(0, traj.num_searches - (traj.task.hops or 0))
            penalty = -self.cost * extra
            self.set_reward(
                ev, ev["reward"] + credit + penalty, search_useful=useful, search_credit=credit, search_penalty=penalty
            )


# ------------------------------------------------------------------ the experiment
class GiveUpSolver:
    """Follows the first ``hops`` searches of the path, then guesses (a partially on-track failure)."""

    def __init__(self, hops: int):
        self.hops, self.inner = hops, PathFollowingSolver()

    def turn(self, traj, slot):
        if len(traj.turns) < self.hops:
            return self.inner.turn(traj, slot)
        return "<think>I will guess.</think>\n<answer>unknown</answer>"


class MixedGroup:
    """Slot i is played by ``solvers[i]``; the scripted proposer plays the self-play proposer phase."""

    def __init__(self, solvers):
        self.solvers, self.proposer = solvers, ScriptedProposer()

    def act(self, obs, info):
        if int(obs["role"]) == 0:
            return self.proposer.act(obs, info)
        return tuple(
            s.turn(t, i) if active else ""
            for i, (s, t, active) in enumerate(zip(self.solvers, info["trajectories"], obs["active"]))
        )


def run(make_env, episodes: int) -> dict:
    """Mean solver reward per slot over ``episodes`` games (seeds 0..episodes-1)."""
    names = ["path-following", "gives up after 1 hop", "gives up after 2 hops", "random"]
    agent = MixedGroup([PathFollowingSolver(), GiveUpSolver(1), GiveUpSolver(2), RandomAgent(seed=0)])
    totals = defaultdict(float)
    env = make_env()
    for seed in range(episodes):
        obs, info = env.reset(seed=seed)
        done = False
        while not done:
            obs, _, term, trunc, info = env.step(agent.act(obs, info))
            for ev in info["rewards"]:
                if ev["role"] == "solver":
                    totals[names[ev["slot"]]] += ev["reward"] / episodes
            done = term or trunc
    env.close()
    return dict(totals)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=8)
    ap.add_argument("--selfplay", action="store_true", help="use KGSelfPlay-v0 instead of KGSolverGroup-v0")
    args = ap.parse_args(argv)
    env_id = "KGSelfPlay-v0" if args.selfplay else "KGSolverGroup-v0"
    base = lambda: gym.make(env_id, group_size=4)  # noqa: E731
    variants = {
        "binary": base,
        "WCR": lambda: WaypointCoverageReward(base()),
        "search-efficiency": lambda: SearchEfficiencyBonus(base()),
        "WCR + search-efficiency": lambda: SearchEfficiencyBonus(WaypointCoverageReward(base())),
    }
    results = {name: run(make, args.episodes) for name, make in variants.items()}
    solvers = list(next(iter(results.values())))
    print(f"Mean solver reward per rollout on {env_id}, {args.episodes} episodes\n")
    print("| solver | " + " | ".join(results) + " |")
    print("|---|" + "---:|" * len(results))
    for s in solvers:
        print(f"| {s} | " + " | ".join(f"{results[v][s]:.3f}" for v in results) + " |")


if __name__ == "__main__":
    main()
