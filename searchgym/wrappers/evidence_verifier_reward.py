"""Evidence-verifier rewards (EVE-Agent; eve-agent §3, App. D; docs/rewards.md, EVE).

The Proposer emits a question q, an answer a and an evidence span e copied verbatim from a snippet
it retrieved (or a source document). Its reward (Eq. 16)::

    R_pro = ½ F_fmt + R_DZ + λ_V V + λ_B B(e),     λ_V = 0.5, λ_B = 0.1
    R_DZ  = 1{0<k<n} (n − k)/(n − 1)                (k of n solver rollouts correct, Eq. 2)
    V     = p₊ − p₋                                 (Eq. 11, Monte-Carlo with m = 5, Eq. 14)
    B(e)  = max(0, 1 − |e| / 256)                   (tokens, Eq. 15)
    F_fmt = ¼ (1 + F_think + F_tool(h) + F_ans)     (Eq. 9, App. D)

p₊ is the fraction of m single-turn, no-search answers given (q, e) that are correct, p₋ the same
given q alone (same model, as in the paper). The Solver's reward (Eq. 19–21)::

    R_sol = EM(â, a) + λ_E F1(ê, e),                λ_E = 0.3

An invalid question gets ½ F_fmt (Algorithm 1, lines 18–19); ``invalid_reward="zero"`` gives it 0
instead, like SSP's invalid questions. **Decisions** (docs/rewards.md, EVE and here): the verbatim check is
enforced and an empty span is invalid, as is a question the env rejected (rule filters, RAG
verification); "verbatim" compares with whitespace runs collapsed; |e| is
counted in whitespace tokens unless a ``count_tokens`` function is given; the Solver's evidence ê
is its last ``<evidence>`` tag (``solver_evidence="tag"``, default; no tag → F1 = 0) or its whole
think text (``"think"``); correctness in V and in R_sol is judged by EM (pluggable ``judge``).
"""

from __future__ import annotations

import logging
import random
import re
from typing import Callable, Optional, Sequence, TypeGuard, Union

import gymnasium as gym

from ..core.arg_checks import check_count, check_number
from ..core.llm import GenerationConfig, TextGenerator
from ..core.prompts import render_evidence_answer
from ..core.types import Task, Trajectory
from ..errors import InvalidArgumentError, InvalidTypeError
from ..scoring.judge import exact_match, normalize_answer, token_f1
from ..scoring.outcomes import information_materials
from .base import Event, MissingTaskDataError, RewardShapingWrapper, event_trajectory

logger = logging.getLogger(__name__)

Answerer = Callable[[str, Optional[str]], str]
AnswerJudge = Callable[[Optional[str], Sequence[str]], bool]
_WS = re.compile(r"\s+")
SOLVER_EVIDENCE_SOURCES = ("tag", "think")
MISSING_EVIDENCE_MODES = ("error", "answer_only")
INVALID_REWARDS = ("half_format", "zero")


def _squash(text: str) -> str:
    return _WS.sub(" ", text).strip()


def evidence_is_verbatim(evidence: Optional[str], sources: Sequence[str]) -> TypeGuard[str]:
    """True when the (non-empty) span occurs verbatim in one of ``sources`` (whitespace collapsed)."""
    if evidence is None:
        return False
    span = _squash(evidence)
    return bool(span) and any(span in _squash(s) for s in sources if s)


def whitespace_tokens(text: str) -> int:
    """Token count used by default for the brevity bonus: whitespace-separated pieces."""
    return len(text.split())


def brevity_bonus(
    evidence: str, max_tokens: int = 256, count_tokens: Callable[[str], int] = whitespace_tokens
) -> float:
    """B(e) = max(0, 1 − |e| / L_max) (Eq. 15)."""
    if max_tokens <= 0:
        raise InvalidArgumentError(f"max_tokens (L_max) must be positive (paper: 256); got {max_tokens}")
    return max(0.0, 1.0 - count_tokens(evidence) / max_tokens)


def difficulty_reward(k: int, n: int) -> float:
    """R_DZ = 1{0<k<n} (n − k)/(n − 1) (Eq. 2): k of n solver rollouts correct."""
    if n < 1 or not 0 <= k <= n:
        raise InvalidArgumentError(f"need 0 <= k <= n and n >= 1; got k={k}, n={n}")
    return (n - k) / (n - 1) if 0 < k < n else 0.0


def evidence_verifier_score(
    answerer: Union[TextGenerator, Answerer],
    question: str,
    evidence: str,
    golds: Sequence[str],
    *,
    m: int = 5,
    judge: Optional[AnswerJudge] = None,
    seed: Optional[int] = None,
) -> tuple[float, float, float]:
    """V = p₊ − p₋ from m answers with the evidence and m without (Eq. 14); returns (V, p₊, p₋)."""
    if m < 1:
        raise InvalidArgumentError(f"m (Monte-Carlo budget) must be >= 1 (paper: 5); got {m}")
    judge = judge or exact_match
    with_e, without_e = _sample_answers(answerer, question, evidence, m, seed)
    p_plus = sum(bool(judge(a, golds)) for a in with_e) / m
    p_minus = sum(bool(judge(a, golds)) for a in without_e) / m
    return p_plus - p_minus, p_plus, p_minus


def _first_line(text: str) -> str:
    text = text.strip()
    return text.splitlines()[0].strip() if text else ""


def _sample_answers(answerer, question: str, evidence: str, m: int, seed: Optional[int]) -> tuple[list[str], list[str]]:
    if isinstance(answerer, TextGenerator):
        prompts = [render_evidence_answer(question, evidence)] * m + [render_evidence_answer(question, None)] * m
        config = GenerationConfig(max_new_tokens=32, temperature=1.0, stop=("\n",), seed=seed)
        outs = answerer.generate(prompts, config)
        if len(outs) != 2 * m:
            raise InvalidArgumentError(f"generator returned {len(outs)} completions for {2 * m} prompts")
        answers = [_first_line(o) for o in outs]
        return answers[:m], answers[m:]
    if not callable(answerer):
        raise InvalidTypeError("answerer must be a TextGenerator or a callable (question, evidence | None) -> answer")
    return [str(answerer(question, evidence)) for _ in range(m)], [str(answerer(question, None)) for _ in range(m)]


def format_score(trajectory: Trajectory, hops: int, sources: Sequence[str] = ()) -> float:
    """F_fmt = ¼ (1 + F_think + F_tool(h) + F_ans) of a proposer rollout (Eq. 9, App. D).

    F_think: share of turns that start with ``<think>``; F_tool(h): 1 for h = 1, else
    min((1 + T_tc)/h, 1) when every search got a response (0 otherwise); F_ans: 1 for yes/no or a
    ≤ 5-word answer found in the source text + responses, ½ for 6–10 words found there, else 0.
    Empty question or answer → 0.
    """
    question, answer = trajectory.question, _proposer_answer(trajectory)
    if not (question and question.strip()) or not (answer and answer.strip()):
        return 0.0
    turns = trajectory.turns
    f_think = sum(t.action.lstrip().startswith("<think>") for t in turns) / max(1, len(turns))
    calls = sum(len(t.searches) for t in turns)
    answered = sum(len(t.searches) for t in turns if t.information)
    if hops <= 1:
        f_tool = 1.0
    else:
        f_tool = min((1 + calls) / hops, 1.0) if calls == answered else 0.0
    a = normalize_answer(answer)
    # the retrieved text without its <information> tags: normalising "Paris</information>" would fuse the
    # last word with the tag ("parisinformation") and miss an answer that ends a block
    context = normalize_answer(" ".join([*sources, *information_materials(trajectory)]))
    words = len(a.split())
    in_context = bool(a) and f" {a} " in f" {context} "
    if a in ("yes", "no") or (in_context and words <= 5):
        f_ans = 1.0
    elif in_context and words <= 10:
        f_ans = 0.5
    else:
        f_ans = 0.0
    return 0.25 * (1.0 + f_think + f_tool + f_ans)


def _proposer_answer(trajectory: Trajectory) -> str:
    return trajectory.answer or trajectory.task.answer


def eve_proposer_reward(
    *,
    format_score: float,
    k: int,
    n: int,
    verifier: float,
    evidence: str,
    lambda_v: float = 0.5,
    lambda_b: float = 0.1,
    max_tokens: int = 256,
    count_tokens: Callable[[str], int] = whitespace_tokens,
) -> dict:
    """R_pro = ½ F_fmt + R_DZ + λ_V V + λ_B B(e) (Eq. 16) with its terms, for a valid triple."""
    if not 0.0 <= format_score <= 1.0 or not -1.0 <= verifier <= 1.0:
        raise InvalidArgumentError(
            f"format_score must be in [0, 1] and verifier in [-1, 1]; got {format_score}, {verifier}"
        )
    r_dz = difficulty_reward(k, n)
    b = brevity_bonus(evidence, max_tokens, count_tokens)
    reward = 0.5 * format_score + r_dz + lambda_v * verifier + lambda_b * b
    return {
        "reward": reward,
        "eve_format": format_score,
        "eve_difficulty": r_dz,
        "eve_verifier": verifier,
        "eve_brevity": b,
    }


def eve_solver_reward(
    answer: Optional[str],
    golds: Sequence[str],
    solver_evidence: Optional[str],
    gold_evidence: str,
    lambda_e: float = 0.3,
) -> dict:
    """R_sol = EM(â, a) + λ_E F1(Norm ê, Norm e) (Eq. 19–21) with its terms."""
    em = float(exact_match(answer, golds))
    f1 = token_f1(solver_evidence, [gold_evidence]) if solver_evidence else 0.0
    return {"reward": em + lambda_e * f1, "eve_em": em, "eve_evidence_f1": f1}


def solver_evidence_text(trajectory: Trajectory, source: str = "tag") -> Optional[str]:
    """ê: the solver's last ``<evidence>`` tag (``"tag"``) or its concatenated think text (``"think"``)."""
    if source not in SOLVER_EVIDENCE_SOURCES:
        raise InvalidArgumentError(
            f"unknown solver evidence source {source!r}; choose one of {SOLVER_EVIDENCE_SOURCES}"
        )
    if source == "think":
        return trajectory.think_text or None
    if trajectory.evidence:
        return trajectory.evidence
    tagged = [t.evidence for t in trajectory.turns if t.evidence]
    return tagged[-1] if tagged else None


def proposer_sources(trajectory: Trajectory) -> list[str]:
    """Where a verbatim span may come from: every ``<information>`` the proposer received, plus
    source documents the task lists in ``metadata["source_documents"]``."""
    docs = trajectory.task.metadata.get("source_documents") or []
    return [t.information for t in trajectory.turns if t.information] + [str(d) for d in docs]


class EvidenceVerifierReward(RewardShapingWrapper):
    """EVE rewards on ``KGSelfPlay-v0``: replaces the proposer's and the solvers' rewards.

    ``answerer`` is the model handle for V: a :class:`~searchgym.agents.TextGenerator` (prompted with
    :func:`~searchgym.core.prompts.render_evidence_answer`, sampled at temperature 1) — the policy
    itself or an external model — or any callable ``(question, evidence | None) -> answer``.

    Proposer events (solver events of the same step give k and n) get ``eve_valid``,
    ``eve_format``, ``eve_difficulty``, ``eve_verifier``, ``eve_p_plus``, ``eve_p_minus`` and
    ``eve_brevity``; a question the env rejected, or whose evidence is empty / not verbatim, is
    invalid (``eve_valid`` = 0) and gets ½ F_fmt (paper Alg. 1 l. 18–19, ``invalid_reward="half_format"``,
    default) or 0 (``invalid_reward="zero"``).
    Solver events get ``eve_em`` and ``eve_evidence_f1``; the gold span is the solver task's
    ``evidence`` (or the proposer's span in the same step). A solver task without one (e.g. the
    self-play dummy task after an invalid question) raises, unless ``missing_evidence="answer_only"``
    (EM alone, component ``eve_evidence_missing`` = 1). Replaces rewards, so stack it innermost.
    """

    name = "eve"
    replaces_reward = True

    def __init__(
        self,
        env,
        answerer: Union[TextGenerator, Answerer],
        m: int = 5,
        *,
        judge: Optional[AnswerJudge] = None,
        lambda_v: float = 0.5,
        lambda_b: float = 0.1,
        lambda_e: float = 0.3,
        max_evidence_tokens: int = 256,
        count_tokens: Callable[[str], int] = whitespace_tokens,
        solver_evidence: str = "tag",
        missing_evidence: str = "error",
        invalid_reward: str = "half_format",
        hops: Optional[int] = None,
        seed: int = 0,
    ):
        gym.utils.RecordConstructorArgs.__init__(  # gym.make(env.spec) rebuilds it
            self,
            answerer=answerer,
            m=m,
            judge=judge,
            lambda_v=lambda_v,
            lambda_b=lambda_b,
            lambda_e=lambda_e,
            max_evidence_tokens=max_evidence_tokens,
            count_tokens=count_tokens,
            solver_evidence=solver_evidence,
            missing_evidence=missing_evidence,
            invalid_reward=invalid_reward,
            hops=hops,
            seed=seed,
        )
        super().__init__(env)
        if not (isinstance(answerer, TextGenerator) or callable(answerer)):
            raise InvalidTypeError(
                "answerer must be a TextGenerator or a callable (question, evidence | None) -> answer"
            )
        m = check_count("m", m, hint="the Monte-Carlo budget, paper: 5")
        max_evidence_tokens = check_count("max_evidence_tokens", max_evidence_tokens, hint="L_max, paper: 256")
        for name, value in (("lambda_v", lambda_v), ("lambda_b", lambda_b), ("lambda_e", lambda_e)):
            check_number(name, value)
        hops = check_count("hops", hops, optional=True, hint="None: each task's own hop count")
        seed = check_count("seed", seed, least=None, optional=True)
        if solver_evidence not in SOLVER_EVIDENCE_SOURCES:
            raise InvalidArgumentError(
                f"solver_evidence must be one of {SOLVER_EVIDENCE_SOURCES}; got {solver_evidence!r}"
            )
        if missing_evidence not in MISSING_EVIDENCE_MODES:
            raise InvalidArgumentError(
                f"missing_evidence must be one of {MISSING_EVIDENCE_MODES}; got {missing_evidence!r}"
            )
        if invalid_reward not in INVALID_REWARDS:
            raise InvalidArgumentError(
                f"invalid_reward must be one of {INVALID_REWARDS} (paper: half_format); got {invalid_reward!r}"
            )
        brevity_bonus("", max_evidence_tokens)
        self.invalid_reward = invalid_reward
        self.missing_evidence = missing_evidence
        self.answerer = answerer
        self.m = m
        self.judge = judge or exact_match
        self.lambda_v, self.lambda_b, self.lambda_e = lambda_v, lambda_b, lambda_e
        self.max_evidence_tokens = max_evidence_tokens
        self.count_tokens = count_tokens
        self.solver_evidence = solver_evidence
        self.hops = hops
        self._rng = random.Random(seed)

    def _hops(self, task: Task) -> int:
        h = self.hops if self.hops is not None else task.hops
        if h is None:
            raise MissingTaskDataError(
                f"task {task.id!r} has no hop count for F_tool(h); give it a subgraph or metadata['hops'], "
                "or pass hops= to EvidenceVerifierReward"
            )
        return int(h)

    def check_task(self, task: Optional[Task]) -> None:
        """The proposer's task needs a hop count (F_tool)."""
        if task is not None:
            self._hops(task)

    def shape_proposer(self, event: Event, events: list[Event], info: dict) -> None:
        """Score the (q, a, e) triple once the solvers' k of n is known."""
        traj = event_trajectory(event)
        doc_sources = traj.task.metadata.get("source_documents") or []
        f_fmt = format_score(traj, self._hops(traj.task), doc_sources)
        if not event.components.get("valid", 1) or not traj.valid:
            self._reward_invalid(event, f_fmt, "rejected by the env")
            return
        question, evidence = traj.question, traj.evidence
        if question is None:
            self._reward_invalid(event, f_fmt, "no question")
            return
        sources = proposer_sources(traj)
        if not evidence_is_verbatim(evidence, sources):
            reason = "empty evidence span" if not (evidence and evidence.strip()) else "evidence not verbatim"
            logger.debug("EVE: proposer question invalid: %s", reason)
            self._reward_invalid(event, f_fmt, reason)
            return
        solvers = [event_trajectory(ev) for ev in events if ev.role == "solver"]
        if not solvers:
            raise InvalidArgumentError(
                "EVE needs the solver rollouts of the proposer's question in the same step (k of n for R_DZ); "
                "use it on KGSelfPlay-v0"
            )
        k = sum(bool(s.correct) for s in solvers)
        answer = _proposer_answer(traj)
        golds = list(traj.task.answers) if self.judge(answer, traj.task.answers) else [answer]
        v, p_plus, p_minus = evidence_verifier_score(
            self.answerer, question, evidence, golds, m=self.m, judge=self.judge, seed=self._rng.randrange(2**31)
        )
        terms = eve_proposer_reward(
            format_score=f_fmt,
            k=k,
            n=len(solvers),
            verifier=v,
            evidence=evidence,
            lambda_v=self.lambda_v,
            lambda_b=self.lambda_b,
            max_tokens=self.max_evidence_tokens,
            count_tokens=self.count_tokens,
        )
        reward = terms.pop("reward")
        self.set_reward(event, reward, eve_valid=1, eve_p_plus=p_plus, eve_p_minus=p_minus, **terms)

    def _reward_invalid(self, event: Event, f_fmt: float, reason: str) -> None:
        """An invalid question: ½ F_fmt (Alg. 1 l. 19) or 0, per ``invalid_reward``."""
        reward = 0.5 * f_fmt if self.invalid_reward == "half_format" else 0.0
        self.set_reward(event, reward, eve_valid=0, eve_format=f_fmt, eve_reason=reason)

    def shape_solver_group(self, events: list[Event], info: dict) -> None:
        """EM + λ_E F1(ê, e) for each solver rollout."""
        proposer_span = next(
            (
                event_trajectory(ev).evidence
                for ev in info.get("rewards", [])
                if ev.get("role") == "proposer" and (ev.get("components") or {}).get("valid", 1)  # env events: any kind
            ),
            None,
        )
        for ev in events:
            traj = event_trajectory(ev)
            gold = traj.task.evidence or proposer_span
            if not gold:
                if self.missing_evidence == "error":
                    raise MissingTaskDataError(
                        f"task {traj.task.id!r} has no evidence span for the solver's evidence-F1 term; "
                        "EVE solver tasks need Task.evidence (the proposer's span), or pass "
                        "missing_evidence='answer_only' to score such tasks by EM alone"
                    )
                terms = eve_solver_reward(traj.answer, traj.task.answers, None, "", self.lambda_e)
                self.set_reward(ev, terms.pop("reward"), eve_evidence_missing=1, **terms)
                continue
            terms = eve_solver_reward(
                traj.answer, traj.task.answers, solver_evidence_text(traj, self.solver_evidence), gold, self.lambda_e
            )
            self.set_reward(ev, terms.pop("reward"), **terms)
