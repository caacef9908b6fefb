"""Small builders for reward-wrapper tests: tasks, finished trajectories, and a contract-true fake env.

``EventEnv`` follows the env contract of docs/architecture.md (events in ``info["rewards"]``, scalar =
sum of events, ``reward_components`` per slot) with pre-built trajectories, so the wrappers' event
handling is tested independently of the real envs (which have their own integration tests).
"""

from __future__ import annotations

from typing import Optional, Sequence

import gymnasium as gym
from gymnasium import spaces

from searchgym.core.subgraph import Branch, Subgraph, SubgraphNode
from searchgym.core.types import SearchCall, Task, Trajectory, Turn


def chain_subgraph(
    titles: Sequence[str],
    *,
    aliases: Optional[dict] = None,
    sid: str = "sg",
    forward=None,
    distractors: Sequence[Branch] = (),
    extra_nodes: Sequence[str] = (),
) -> Subgraph:
    """A path subgraph over ``titles`` (node ids n0…nK, last = answer), with optional distractors."""
    aliases = aliases or {}
    ids = [f"n{i}" for i in range(len(titles))]
    nodes = {i: SubgraphNode(i, t, tuple(aliases.get(t, ()))) for i, t in zip(ids, titles)}
    for j, t in enumerate(extra_nodes):
        nodes[f"x{j}"] = SubgraphNode(f"x{j}", t, tuple(aliases.get(t, ())))
    rels = [f"r{i}" for i in range(len(titles) - 1)]
    return Subgraph(
        id=sid,
        seed=ids[0],
        path=ids,
        relations=rels,
        relation_ids=rels,
        nodes=nodes,
        distractors=list(distractors),
        forward=list(forward) if forward else [],
    )


def make_task(
    tid: str = "t1",
    *,
    waypoints: Sequence[str] = (),
    answers: Sequence[str] = ("Bern",),
    subgraph: Optional[Subgraph] = None,
    gold_titles: Sequence[str] = (),
    evidence=None,
    hops=None,
) -> Task:
    """A Task with the given fields (``hops`` goes to metadata when there is no subgraph)."""
    meta = {"hops": hops} if hops is not None else {}
    return Task(
        id=tid,
        question=f"question {tid}?",
        answers=list(answers),
        subgraph=subgraph,
        waypoints=list(waypoints),
        gold_titles=list(gold_titles),
        evidence=evidence,
        metadata=meta,
    )


def make_traj(
    task: Task,
    thinks: Sequence[str] = (),
    infos: Sequence[str] = (),
    *,
    answer: Optional[str] = "x",
    correct: bool = False,
    valid: bool = True,
    role: str = "solver",
    titles: Sequence[Sequence[str]] = (),
    searches_per_turn: Optional[Sequence[int]] = None,
    question=None,
    evidence=None,
    actions=None,
) -> Trajectory:
    """A finished trajectory: turn i has think ``thinks[i]`` and information ``infos[i]``.

    A turn with information issues one search (retrieving ``titles[i]``) unless
    ``searches_per_turn`` says otherwise.
    """
    n = max(len(thinks), len(infos))
    turns = []
    for i in range(n):
        info = infos[i] if i < len(infos) else ""
        k = searches_per_turn[i] if searches_per_turn is not None else (1 if info else 0)
        ts = list(titles[i]) if i < len(titles) else []
        searches = [SearchCall(query=f"q{i}.{j}", titles=ts if j == 0 else []) for j in range(k)]
        think = thinks[i] if i < len(thinks) else ""
        action = actions[i] if actions is not None else f"<think>{think}</think>"
        turns.append(Turn(index=i, action=action, think=think, searches=searches, information=info))
    return Trajectory(
        role=role,
        task=task,
        prompt="p",
        turns=turns,
        answer=answer,
        correct=correct,
        valid=valid,
        question=question,
        evidence=evidence,
        terminated=True,
    )


class EventEnv(gym.Env):
    """Emits the given trajectories' reward events on its first step (binary solver reward c_i).

    ``proposer``: an optional proposer trajectory whose event (R_p = 1 − mean c, or 0 when invalid,
    with ``components["valid"]``) arrives with the solver events. ``single=True`` mimics a
    single-role env (``info["trajectory"]``).
    """

    def __init__(self, solvers: Sequence[Trajectory], proposer: Optional[Trajectory] = None, single: bool = False):
        self.solvers, self.proposer, self.single = list(solvers), proposer, single
        self.observation_space = spaces.Text(1000)
        self.action_space = spaces.Text(1000)
        self.resets = 0

    def _task(self):
        return self.proposer.task if self.proposer is not None else self.solvers[0].task

    def _base_info(self) -> dict:
        if self.single:
            return {"trajectory": self.solvers[0], "task": self._task()}
        return {"trajectories": list(self.solvers), "task": self._task()}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.resets += 1
        return "prompt", {**self._base_info(), "rewards": [], "reward_components": {}}

    def step(self, action):
        events = []
        for slot, t in enumerate(self.solvers):
            c = float(bool(t.correct))
            events.append(
                {"role": "solver", "slot": slot, "reward": c, "components": {"correct": int(c)}, "trajectory": t}
            )
        if self.proposer is not None:
            valid = bool(self.proposer.valid)
            rp = 1.0 - sum(bool(t.correct) for t in self.solvers) / len(self.solvers) if valid else 0.0
            events.append(
                {
                    "role": "proposer",
                    "slot": 0,
                    "reward": rp,
                    "components": {"valid": int(valid)},
                    "trajectory": self.proposer,
                }
            )
        info = {**self._base_info(), "rewards": events}
        if self.single:
            info["reward_components"] = dict(events[0]["components"])
        else:
            info["reward_components"] = {
                "solver": {"correct": [e["components"]["correct"] for e in events if e["role"] == "solver"]},
                "proposer": {"valid": int(bool(self.proposer.valid))} if self.proposer is not None else {},
            }
        return "done", sum(e["reward"] for e in events), True, False, info


class TurnEnv(gym.Env):
    """Single-role env replaying ``script`` (a finished trajectory) one turn per step.

    The live trajectory grows turn by turn; the last step emits the solver event (reward c).
    """

    def __init__(self, script: Trajectory):
        self.script = script
        self.observation_space = spaces.Text(1000)
        self.action_space = spaces.Text(1000)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        s = self.script
        self.live = Trajectory(role=s.role, task=s.task, prompt=s.prompt, answer=None, correct=None, valid=s.valid)
        return "prompt", {"trajectory": self.live, "task": s.task, "rewards": [], "reward_components": {}}

    def step(self, action):
        s, live = self.script, self.live
        live.turns.append(s.turns[len(live.turns)])
        done = len(live.turns) == len(s.turns)
        info = {"trajectory": live, "task": s.task, "rewards": [], "reward_components": {}}
        if done:
            live.answer, live.correct, live.terminated = s.answer, s.correct, True
            c = float(bool(s.correct))
            info["rewards"] = [
                {"role": "solver", "slot": 0, "reward": c, "components": {"correct": int(c)}, "trajectory": live}
            ]
            info["reward_components"] = {"correct": int(c)}
            return "end", c, True, False, info
        return "info", 0.0, False, False, info


class PartialSolver:
    """Follows only the first ``hops`` searches of the path-following solver, then answers wrong,
    so its think text names some waypoints but not all (an informative failure for WCR)."""

    def __init__(self, hops: int = 1):
        from searchgym.agents.scripted import PathFollowingSolver

        self.hops, self.inner = hops, PathFollowingSolver()

    def turn(self, traj: Trajectory, slot: int) -> str:
        if len(traj.turns) < self.hops:
            return self.inner.turn(traj, slot)
        return "<think>I am not sure, I will guess.</think>\n<answer>unknown</answer>"


class SlotMix:
    """A multi-slot agent: slot i is played by ``solvers[i % len(solvers)]`` (each has ``turn``);
    in the self-play proposer phase the ``proposer`` plays slot 0."""

    def __init__(self, solvers: Sequence, proposer=None):
        from searchgym.agents.scripted import ScriptedProposer

        self.solvers, self.proposer = list(solvers), proposer or ScriptedProposer()

    def act(self, obs, info):
        if isinstance(obs, dict) and int(obs["role"]) == 0:
            return self.proposer.act(obs, info)
        if not isinstance(obs, dict):
            return self.solvers[0].turn(info["trajectory"], 0)
        return tuple(
            self.solvers[i % len(self.solvers)].turn(t, i) if a and t is not None else ""
            for i, (t, a) in enumerate(zip(info["trajectories"], obs["active"]))
        )


def play(env, agent, seed):
    """One episode; returns (sum of scalar rewards, every step's events, last info)."""
    obs, info = env.reset(seed=seed)
    total, events, done = 0.0, [], False
    while not done:
        obs, reward, term, trunc, info = env.step(agent.act(obs, info))
        total += reward
        events.extend(info["rewards"])
        done = term or trunc
    return total, events, info
