"""Hand-built trajectories: proposer rollouts for filter and verifier tests, segmented solver
rollouts for trainer tests."""

from __future__ import annotations

from searchgym.core.types import SearchCall, Segment, Task, Trajectory, Turn
from searchgym.envs.protocol import format_information

INFO = '\n<information>Doc 1 (Title: "Tarsk") Tarsk is a city located in Merovia.</information>\n'


def segmented_trajectory(
    agent_texts: list[str], *, question: str = "Where was Alice Varn born?", info: str = INFO, role: str = "solver"
) -> Trajectory:
    """A rollout whose segments are the prompt, then each agent text with ``info`` between turns
    (no turns recorded: the trainer tokenises such agent text, as for a text-only backend)."""
    t = Trajectory(
        role=role,
        task=Task(id="t", question=question, answers=["Tarsk"]),
        prompt=f"Answer the question. Question: {question}\n",
    )
    t.segments = [Segment(t.prompt, "prompt")]
    for k, text in enumerate(agent_texts):
        t.segments.append(Segment(text, "agent"))
        if k < len(agent_texts) - 1:
            t.segments.append(Segment(info, "env"))
    return t


def proposer_trajectory(
    queries, *, information=True, answer="Ostrel", docs=('Doc 1 (Title: "Tarsk") text',)
) -> Trajectory:
    """A proposer rollout that searched ``queries`` (one per turn) and got ``docs`` back each time."""
    traj = Trajectory(role="proposer", task=Task(id="t", question="", answers=[answer]), prompt="p")
    for i, q in enumerate(queries):
        info = format_information(docs[i % len(docs)]) if information else "\nMy previous action is invalid.\n"
        traj.turns.append(
            Turn(index=i, action=f"<search>{q}</search>", searches=[SearchCall(query=q)], information=info)
        )
    return traj
