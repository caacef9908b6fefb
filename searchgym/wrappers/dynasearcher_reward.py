"""DynaSearcher multi-reward (dynasearcher §3.2, docs/rewards.md, DynaSearcher).

::

    r_acc     = max(0.1, r_ans) if the format is correct else 0                      (Eq. 1)
    r_ans     = F1(pred, gold) if L_pred ≥ n·L_gt words else CEM(pred, gold), n = 3   (Eq. 2)
    r_recall  = TP / (TP + FN): share of gold supporting documents retrieved          (Eq. 3)
    r_penalty = max(β, 1 − γ^(t − i)), γ = 0.9, β = −0.2                              (Eq. 5)
    r_gain    = α (r_recall − r_penalty), α = 0.5                                     (Eq. 4)
    r         = r_acc + r_gain                                                         (Eq. 6)

t = retrieval actions in the rollout (searches issued), i = the task's gold hop count. For t < i
the penalty is negative (floored at β), i.e. a slight bonus, as the paper describes.

Notes against the paper: Eq. 6 writes ``r_overall = r_outcome + r_gain``; r_outcome is the
accuracy reward r_acc of Eq. 1 (docs/rewards.md's reading, used here). With several gold aliases, r_ans
is the maximum over aliases, each alias choosing F1 or CEM by its own length. "Format correct"
is the env's validity (tags followed, a parseable answer). Gold documents match retrieved ones by
title, case-insensitively and whitespace-trimmed. The wrapper *replaces* the solver reward, so
stack it innermost.
"""

from __future__ import annotations

import logging
from typing import Optional, Sequence

import gymnasium as gym

from ..core.arg_checks import check_number
from ..core.types import Task, Trajectory
from ..errors import InvalidArgumentError
from ..scoring.judge import cover_exact_match, token_f1
from .base import Event, MissingTaskDataError, RewardShapingWrapper, event_trajectory

logger = logging.getLogger(__name__)


def answer_score(pred: Optional[str], golds: Sequence[str], n: float = 3) -> float:
    """r_ans: token F1 when the prediction is ≥ n× the gold's length in words, else cover-EM."""
    if not pred or not pred.strip():
        return 0.0
    l_pred = len(pred.split())
    best = 0.0
    for gold in golds:
        if l_pred >= n * len(gold.split()):
            score = token_f1(pred, [gold])
        else:
            score = float(cover_exact_match(pred, [gold], whole_words=True))
        best = max(best, score)
    return best


def accuracy_reward(pred: Optional[str], golds: Sequence[str], format_ok: bool, n: float = 3) -> float:
    """r_acc = max(0.1, r_ans) when the format is correct, else 0 (Eq. 1)."""
    return max(0.1, answer_score(pred, golds, n)) if format_ok else 0.0


def _norm_title(t: str) -> str:
    return " ".join(t.split()).casefold()


def recall_reward(retrieved_titles: Sequence[str], gold_titles: Sequence[str]) -> float:
    """r_recall: fraction of distinct gold titles among the retrieved titles (Eq. 3)."""
    gold = {_norm_title(t) for t in gold_titles}
    if not gold:
        raise InvalidArgumentError("recall needs at least one gold supporting title")
    got = {_norm_title(t) for t in retrieved_titles}
    return len(gold & got) / len(gold)


def retrieval_penalty(t: int, i: int, gamma: float = 0.9, beta: float = -0.2) -> float:
    """r_penalty = max(β, 1 − γ^(t − i)) (Eq. 5)."""
    if not 0 < gamma < 1:
        raise InvalidArgumentError(f"gamma must lie in (0, 1) (paper: 0.9); got {gamma}")
    return max(beta, 1.0 - gamma ** (t - i))


def dynasearcher_reward(
    pred: Optional[str],
    golds: Sequence[str],
    *,
    format_ok: bool,
    retrieved_titles: Sequence[str],
    gold_titles: Sequence[str],
    retrievals: int,
    hops: int,
    alpha: float = 0.5,
    gamma: float = 0.9,
    beta: float = -0.2,
    n: float = 3,
) -> dict:
    """r = r_acc + α (r_recall − r_penalty) with every term (keys ``reward``, ``dyna_*``)."""
    r_acc = accuracy_reward(pred, golds, format_ok, n)
    r_recall = recall_reward(retrieved_titles, gold_titles)
    r_penalty = retrieval_penalty(retrievals, hops, gamma, beta)
    r_gain = alpha * (r_recall - r_penalty)
    return {
        "reward": r_acc + r_gain,
        "dyna_acc": r_acc,
        "dyna_recall": r_recall,
        "dyna_penalty": r_penalty,
        "dyna_gain": r_gain,
    }


def _require(task: Task) -> int:
    if not task.gold_titles:
        raise MissingTaskDataError(
            f"task {task.id!r} has no gold_titles; DynaSearcher's recall term needs the gold supporting "
            "documents (KG tasks built by task_from_subgraph carry them; add gold_titles to your JSONL tasks)"
        )
    return require_hops(task, "the retrieval penalty")


def require_hops(task: Optional[Task], purpose: str) -> int:
    """The task's gold hop count; :class:`MissingTaskDataError` naming ``purpose`` and the fix when it has none."""
    if task is None or task.hops is None:
        task_id = None if task is None else task.id
        raise MissingTaskDataError(
            f"task {task_id!r} has no hop count for {purpose}; give it a subgraph or metadata['hops']"
        )
    return int(task.hops)


def trajectory_dynasearcher_reward(trajectory: Trajectory, **params) -> dict:
    """:func:`dynasearcher_reward` of a finished solver rollout on its task."""
    task = trajectory.task
    hops = _require(task)
    return dynasearcher_reward(
        trajectory.answer,
        task.answers,
        format_ok=bool(trajectory.valid) and trajectory.answer is not None,
        retrieved_titles=trajectory.retrieved_titles,
        gold_titles=task.gold_titles,
        retrievals=trajectory.num_searches,
        hops=hops,
        **params,
    )


class DynaSearcherReward(RewardShapingWrapper):
    """Replaces each solver event's reward with r_acc + r_gain; proposer events untouched.

    Components: ``dyna_acc``, ``dyna_recall``, ``dyna_penalty``, ``dyna_gain``. Tasks lacking
    ``gold_titles`` or a hop count raise :class:`~searchgym.wrappers.MissingTaskDataError`.
    """

    name = "dynasearcher"
    replaces_reward = True

    def __init__(self, env, alpha: float = 0.5, gamma: float = 0.9, beta: float = -0.2, n: float = 3):
        gym.utils.RecordConstructorArgs.__init__(
            self, alpha=alpha, gamma=gamma, beta=beta, n=n
        )  # gym.make(env.spec) rebuilds it
        super().__init__(env)
        check_number("alpha", alpha, least=0, hint="paper: 0.5")
        check_number("gamma", gamma, hint="paper: 0.9")
        check_number("beta", beta, hint="the penalty's floor, paper: -0.2")
        check_number("n", n, above=0, hint="the length ratio choosing F1 over cover-EM, paper: 3")
        retrieval_penalty(0, 0, gamma, beta)
        self.params = {"alpha": alpha, "gamma": gamma, "beta": beta, "n": n}

    def check_task(self, task: Optional[Task]) -> None:
        """The task needs gold titles and a hop count."""
        if task is not None:
            _require(task)

    def shape_solver_group(self, events: list[Event], info: dict) -> None:
        """Score every rollout on its own (DynaSearcher has no group term)."""
        for ev in events:
            terms = trajectory_dynasearcher_reward(event_trajectory(ev), **self.params)
            self.set_reward(ev, terms.pop("reward"), **terms)
