"""Outcome rewards and question validation shared by every text env.

* :func:`score_solver` judges a finished Solver rollout (docs/game.md, judging): c = 1 iff the rollout is valid
  and its last answer is judged correct; the judge's verdict is kept in the trajectory metadata.
* :func:`validate_question` runs SSP's rule filters then RAG verification (docs/game.md, self-play game) on a finished
  Proposer rollout; it fails closed (a verifier error makes the question invalid).
* :func:`reward_event` builds the role-tagged :class:`~searchgym.core.rewards.RewardEvent` of the env contract.
"""

from __future__ import annotations

import logging
import random
import re
from typing import Any, Optional, Sequence

from ..core.rewards import RewardEvent
from ..core.types import Role, Trajectory
from ..core.validation import ValidationResult
from ..errors import InvalidArgumentError

logger = logging.getLogger(__name__)

__all__ = ["score_solver", "validate_question", "reward_event", "information_materials", "document_materials"]

_INFO_TAGS = re.compile(r"^\s*<information>|</information>\s*$")


def reward_event(
    role: Role, slot: int, reward: float, components: dict, trajectory: Optional[Trajectory]
) -> RewardEvent:
    """One reward event of the env contract (:class:`~searchgym.core.rewards.RewardEvent`)."""
    return RewardEvent(role, slot, reward, components, trajectory)


def score_solver(traj: Trajectory, judge: Any) -> float:
    """Judge a finished Solver rollout and store the outcome on it; returns c ∈ {0.0, 1.0}.

    No answer (truncated), an invalid rollout (too many answer tags) or a judge error count as
    wrong. Components: ``{"outcome": c}``.
    """
    correct = False
    if traj.answer is not None and traj.valid:
        verdict = judge.judge(traj.task.question, traj.answer, traj.task.answers)
        correct = bool(verdict.correct) and not getattr(verdict, "error", None)
        traj.metadata["verdict"] = {
            "correct": bool(verdict.correct),
            "method": getattr(verdict, "method", None),
            "score": getattr(verdict, "score", None),
            "error": getattr(verdict, "error", None),
        }
    traj.correct = correct
    # SSP's code scales a correct answer of a rollout with more than 10 answer tags to 0.25
    # (Rollout(too_many_answers="ssp")); 1 otherwise
    traj.reward = float(correct) * float(traj.metadata.get("reward_scale", 1.0))
    traj.reward_components = {"outcome": traj.reward}
    return traj.reward


def information_materials(traj: Trajectory) -> list[str]:
    """The retrieved-information texts of a rollout, one per search turn, without the tags."""
    out = []
    for t in traj.turns:
        info = _INFO_TAGS.sub("", t.information)  # either layout of format_information
        if info.strip():
            out.append(info)
    return out


_DOC_START = re.compile(r'^Doc \d+ ?\(Title: "', re.MULTILINE)


def document_materials(traj: Trajectory) -> list[str]:
    """The distinct retrieved documents of a rollout (one ``Doc i (Title: "t") text`` line each, plus
    any KG-fact lines), in retrieval order: SSP's unit of RAG-verification material and noise."""
    pieces: list[str] = []
    for block in information_materials(traj):
        starts = [m.start() for m in _DOC_START.finditer(block)] or [0]
        if starts[0] != 0:
            starts.insert(0, 0)
        pieces += [block[a:b].strip() for a, b in zip(starts, starts[1:] + [len(block)])]
    return [p for p in dict.fromkeys(pieces) if p]  # first occurrences, in order (a list scan each was O(n²))


def validate_question(
    traj: Trajectory,
    answers: Sequence[str],
    *,
    verifier: Any,
    filter_config: Any = None,
    noise_pool: Sequence[str] = (),
    rng: random.Random,
    materials: Optional[Sequence[str]] = None,
    required_searches: Optional[int] = None,
) -> ValidationResult:
    """Filters then RAG verification of a finished Proposer rollout: the ``info["validation"]``
    :class:`~searchgym.core.validation.ValidationResult`.

    ``verifier``: an object with ``verify(question, answers, materials, noise_pool, rng)``, or ``None`` to skip
    RAG verification (filters only). ``materials``: the rollout's :func:`document_materials`, if the caller
    already has them. ``required_searches``: the search count the Proposer's prompt asked for (enforced by
    ``FilterConfig.searches_at_least_required``). Also sets ``traj.valid`` and ``traj.metadata["validation"]``
    (the verdict without the filters' details).
    """
    from .question_filters import check_question

    if traj.role != "proposer":
        raise InvalidArgumentError("validate_question needs a proposer trajectory")
    if not traj.valid:
        result = ValidationResult(reason=traj.metadata.get("invalid_reason", "invalid_rollout"), stage="rollout")
    else:
        fr = check_question(traj.question, list(answers), traj, filter_config, required_searches=required_searches)
        details = dict(fr.details)
        if not fr.ok:
            result = ValidationResult(reason=fr.reason, stage="filters", details=details)
        elif verifier is None:
            result = ValidationResult(valid=True, details=details)
        else:
            mats = list(materials) if materials is not None else document_materials(traj)
            vr = verifier.verify(traj.question, list(answers), mats, list(noise_pool), rng)
            result = ValidationResult(
                valid=bool(vr.valid) and not vr.error,
                reason=vr.reason,
                stage="verifier",
                details=details,
                prediction=vr.prediction,
                error=vr.error,
            )
            if vr.error:
                logger.warning("RAG verification failed (question counted invalid): %s", vr.error)
    traj.valid = result.valid
    traj.metadata["validation"] = result.summary()
    return result
