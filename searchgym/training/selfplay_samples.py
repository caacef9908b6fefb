"""What a self-play rollout phase hands to the update: one :class:`Sample` per reward event, the
:class:`RolloutBatch` with its timings, and the rollout metrics logged per step (per-role rewards, valid-question
rate and rejection reasons, the step's questions)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from ..core.types import Trajectory

__all__ = ["RolloutBatch", "Sample", "mean", "question_record", "rollout_metrics", "written_on"]


@dataclass
class Sample:
    """One finished rollout to train on: its role, trajectory, reward, GRPO group key and step rewards."""

    role: str
    trajectory: Trajectory
    reward: float
    components: dict = field(default_factory=dict)
    group: Any = None
    step_rewards: Optional[list] = None

    @classmethod
    def from_event(cls, event: dict, group: Any, step_rewards_key: Optional[str] = None) -> "Sample":
        """Build from an env reward event (``{"role", "slot", "reward", "components", "trajectory"}``);
        ``step_rewards_key``: the component holding per-step rewards (the reward's registry entry)."""
        comps = dict(event.get("components") or {})
        steps = comps.get(step_rewards_key) if step_rewards_key else None
        return cls(
            event["role"],
            event["trajectory"],
            float(event["reward"]),
            comps,
            group,
            list(steps) if isinstance(steps, (list, tuple)) else None,
        )


@dataclass
class RolloutBatch:
    """What one rollout phase produced, with its timings."""

    samples: list
    games: int
    rollout_s: float
    env_s: float
    new_tokens: int


#: a search-count discount's reward component -> the metric: the share of Solver rollouts whose reward it cut
#: (right answers, or WCR bonuses, after more searches than the hops / fewer)
SEARCH_DISCOUNT_METRICS = {
    "search_discount": "solver/search_discounted",
    "short_search_discount": "solver/short_search_discounted",
}


def rollout_metrics(samples: Sequence[Sample]) -> dict:
    """Per-role reward means, valid-question rate and rejection reasons, the step's questions (text, hops,
    verdict, reward), Solver groups with signal, the Solvers' reward on model-written questions (``solver/proposed_*``;
    task source ``proposer``, fresh or replayed, as opposed to the fallback task), WCR coverage, the share of Solver
    rollouts the extra-search discount cut (``solver/search_discounted``) and the short-search one
    (``solver/short_search_discounted``), search turns, and the share of Proposer
    rollouts that searched fewer times than their target has hops (``proposer/searched_short``)."""
    m: dict = {}
    solver = [s for s in samples if s.role == "solver"]
    prop = [s for s in samples if s.role == "proposer"]
    if solver:
        m["solver/reward"] = mean(s.reward for s in solver)
        m["solver/correct"] = mean(float(bool(s.trajectory.correct)) for s in solver)
        m["solver/searches"] = mean(s.trajectory.num_searches for s in solver)
        m["solver/turns"] = mean(len(s.trajectory.turns) for s in solver)
        m["solver/n"] = len(solver)
        cov = [s.components.get("wcr_coverage", s.components.get("coverage")) for s in solver]
        cov = [float(x) for x in cov if isinstance(x, (int, float))]
        if cov:
            m["solver/wcr_coverage"] = mean(cov)
        stopped = [s.components["wcr_answered_waypoint"] for s in solver if "wcr_answered_waypoint" in s.components]
        if stopped:  # WCR with waypoint_answer_credit=false: the rollouts that answered a waypoint (no bonus)
            m["solver/answered_waypoint"] = mean(float(x) for x in stopped)
        for term, metric in SEARCH_DISCOUNT_METRICS.items():  # the rollouts each search-count discount cut
            cut = [s.components[term] for s in solver if term in s.components]
            if cut:
                m[metric] = mean(float(x < 0) for x in cut)
        groups: dict[Any, list[float]] = {}
        for s in solver:
            groups.setdefault(s.group, []).append(s.reward)
        m["solver/groups_with_signal"] = mean(float(len(set(r)) > 1) for r in groups.values())
        # the Solvers' share and score on questions the model wrote (this step's or replayed), not fallback tasks
        proposed = [s for s in solver if s.trajectory.task.source == "proposer"]
        m["solver/on_proposed"] = len(proposed) / len(solver)
        if proposed:
            m["solver/proposed_reward"] = mean(s.reward for s in proposed)
            m["solver/proposed_correct"] = mean(float(bool(s.trajectory.correct)) for s in proposed)
    if prop:
        m["proposer/reward"] = mean(s.reward for s in prop)
        valid = [s.components.get("valid", 1.0 if s.trajectory.valid else 0.0) for s in prop]
        m["proposer/valid_rate"] = mean(float(v) for v in valid)
        m["proposer/searches"] = mean(s.trajectory.num_searches for s in prop)
        m["proposer/n"] = len(prop)
        questions = [question_record(s) for s in prop]
        for reason in sorted({q["reason"] for q in questions if not q["valid"]}):
            m[f"proposer/rejected/{reason}"] = mean(float(not q["valid"] and q["reason"] == reason) for q in questions)
        words = [len(q["question"].split()) for q in questions if q["question"]]
        if words:
            m["proposer/question_words"] = mean(words)
        m["proposer/hops"] = mean(float(q["hops"] or 0) for q in questions)
        # searched fewer times than the target has hops: the early sign of a Proposer that learns to stop short
        known = [q for q in questions if q["hops"]]
        if known:
            m["proposer/searched_short"] = mean(float(q["searches"] < q["hops"]) for q in known)
        m["proposer/questions"] = questions
    return m


def question_record(sample: Sample) -> dict:
    """One Proposer rollout as the metrics log keeps it: the question, its target (``answer``, and ``target``: the
    id of the subgraph it was written on, None without one), hops, verdict and reward (``reason`` is the rule
    filter or verification stage that rejected it; ``no_question`` when none was written)."""
    traj = sample.trajectory
    verdict = traj.metadata.get("validation") or {}
    valid = bool(sample.components.get("valid", 1.0 if traj.valid else 0.0)) and bool(verdict.get("valid", True))
    reason = None if valid else (verdict.get("reason") or ("no_question" if not traj.question else "invalid"))
    return {
        "question": traj.question or "",
        "answer": traj.task.answer,
        "target": written_on(sample),
        "hops": traj.task.hops,
        "valid": valid,
        "reason": reason,
        "reward": sample.reward,
        "searches": traj.num_searches,
    }


def written_on(sample: Sample) -> Optional[str]:
    """The id of the pool subgraph a rollout's task was built on (what a Proposer question was written on); None for a
    task without one."""
    subgraph = sample.trajectory.task.subgraph
    return subgraph.id if subgraph is not None else None


def mean(xs) -> float:
    """The mean of ``xs``; NaN when empty."""
    xs = list(xs)
    return float(sum(xs) / len(xs)) if xs else float("nan")
