"""Cold-start demonstrations: scripted experts play the real envs, and their good rollouts are exported.

A 135M model cannot follow the search protocol from instructions alone (its reward is 0 on every
rollout, so GRPO has nothing to learn from). The cold start teaches the protocol by supervised
fine-tuning on demonstrations, and these are made by driving the *real* envs — real searches, real
``<information>`` from the retriever — with experts that know the task's KG path:

* :class:`SolverExpert` thinks, searches one hop at a time with varied queries (the question's own
  phrase, ``entity relation``, entity + cue words), reads whether the bridge entity is in what came
  back, searches again with other words after a useless result, and answers with the name only once
  it has *read* it. Now and then it voices a wrong guess and corrects it from the text.
* :class:`ProposerExpert` (KG-grounded or answer-only Proposer) searches along the path with varied
  queries and writes the template question, which the env's rule filters and RAG verification judge.

Solver questions come in varied wordings by default (``wording="varied"``: the template or one of the
"train" rewordings of :mod:`searchgym.tasks.rewording`, per task), so the model learns to take any phrasing
apart into its hops rather than to parse the template; the plan in the first thought names the hops in the
template's phrases whatever the question's wording.

Only rollouts the env rewards (Solver reward 1, Proposer question valid) are kept, so no
demonstration claims an answer the retriever did not deliver. Each line of the output JSONL is a
:meth:`~searchgym.core.types.Trajectory.to_dict` with ``"reward"`` and ``"demo"`` keys: agent and env
segments stay apart, so SFT masks env text exactly as RL does.

Every random choice comes from ``random.Random`` seeded by ``(seed, task id)``: the same seed gives
the same file.
"""

from __future__ import annotations

import json
import logging
import random
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional, Sequence

from ..agents.scripted import RELATION_CUES, ScriptedAgent
from ..construction.question_templates import path_phrases, path_question, relation_phrase
from ..core.artefacts import check_output
from ..core.output_lock import OutputLock
from ..core.text_scan import doc_header_matches
from ..core.types import Trajectory
from ..errors import InvalidArgumentError
from ..evaluation.batch_runner import BatchRunner, EpisodeStart
from ..scoring.outcomes import information_materials
from ..tasks.rewording import DEFAULT_TRAINING_WORDING, TRAINING_WORDINGS, reword_tasks

logger = logging.getLogger(__name__)

__all__ = [
    "SolverExpert",
    "ProposerExpert",
    "DemoStats",
    "discovered_backwards",
    "hop_phrase",
    "plan_text",
    "nesting_text",
    "demo_tasks",
    "rl_tasks",
    "demonstrations_by_hops",
    "cold_start_env_kwargs",
    "generate_demonstrations",
    "opening_record",
    "COLD_START_TOP_K",
    "COLD_START_MAX_TURNS",
    "TASK_WORDINGS",
    "DEFAULT_WORDING",
]

COLD_START_TOP_K = 3
#: what ``wording`` :func:`demo_tasks`, :func:`rl_tasks` and :func:`demonstrations_by_hops` accept; the held-out
#: wordings (:mod:`searchgym.tasks.rewording`) are for scoring only
TASK_WORDINGS = TRAINING_WORDINGS
#: Solver questions in a train wording or the template, per task: teaches searching, not template parsing
DEFAULT_WORDING = DEFAULT_TRAINING_WORDING
COLD_START_MAX_TURNS = 5
COLD_START_PASSAGE_SENTENCES = 2


def cold_start_env_kwargs(world, *, max_turns: int = COLD_START_MAX_TURNS) -> dict:
    """Env settings the cold start, its benchmark and the demo share: 2-sentence passages (title kept)
    indexed with BM25, top 3 per search. Short observations are what a small model can read and what
    CPU training can afford. The passage index is built once per world (the retriever factory's cache)."""
    from ..retrieval import passage_retriever

    return {
        "world": world,
        "retriever": passage_retriever(world, sentences=COLD_START_PASSAGE_SENTENCES),
        "top_k": COLD_START_TOP_K,
        "max_turns": max_turns,
    }


def _task_rng(seed: int, traj: Trajectory, turn: int = 0) -> random.Random:
    """The choices of one turn of one rollout: a function of (seed, task, role, turn) alone."""
    return random.Random(f"{seed}:{traj.task.id}:{traj.role}:{turn}")


def _mentions(text: str, names: Iterable[str]) -> Optional[str]:
    """The first of ``names`` that stands in ``text`` as whole words (case as written)."""
    for name in names:
        if name and re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text):
            return name
    return None


def _queries(title: str, label: str, forward: bool = True) -> list[str]:
    """Distinct query formulations for one hop, best first after the question's own phrase."""
    cues = " ".join(RELATION_CUES.get(" ".join(label.lower().split()), ())[:2])
    phrase = relation_phrase(label, title, forward=forward)
    out = [phrase.removeprefix("the ").removeprefix("a "), f"{title} {label}", f"{title} {cues}".strip(), title]
    return list(dict.fromkeys(q for q in out if q))


def hop_phrase(sg, hop: int, subject: str) -> str:
    """The noun phrase of hop ``hop`` (0-based) of ``sg``'s path, described from ``subject``."""
    return relation_phrase(sg.relations[hop], subject, forward=sg.forward[hop])


def plan_text(sg) -> str:
    """The question taken apart, one numbered step per hop: the seed is named in step 1, each later
    step refers to the previous step's result as "it". Written in the first thought, it tells the
    model how many searches the question needs and what each one is for; later thoughts copy from it."""
    steps = [hop_phrase(sg, 0, sg.nodes[sg.path[0]].title)] + [hop_phrase(sg, h, "it") for h in range(1, sg.hops)]
    return "Plan: " + "; ".join(f"{i}) {p}" for i, p in enumerate(steps, 1)) + "."


def nesting_text(sg) -> str:
    """The question built inside out: for each step ``k`` from 2 on, the plan's step ``k`` with the nested
    step ``k - 1`` in place of "it", so the last line is the question's phrase (one step for a 1-hop path).
    Written in a Proposer's last thought, it turns composing a nested question into a copy from the plan
    and the line before; a small model asked to nest the whole plan at once wrote wrong relations and
    dropped hops (docs/sft.md). Step 1 is the plan's own, so it is left out: a 3-hop thought and its
    question stay near 100 tokens, inside a 128-token turn."""
    shown = list(enumerate(path_phrases(sg), 1))[1 if sg.hops > 1 else 0 :]
    return "Nesting: " + "; ".join(f"{i}) {p}" for i, p in shown) + "."


@dataclass
class _Progress:
    """Where a rollout stands on its path: the hop being solved and how many searches it has failed."""

    hop: int = 0
    failures: int = 0
    found: list[str] = field(default_factory=list)
    last_failed: bool = False
    last_found: Optional[str] = None
    distractor: Optional[str] = None


class SolverExpert(ScriptedAgent):
    """A Solver that searches hop by hop and answers only with what it has read.

    ``p_question_query``: chance that the first search is the whole question (a realistic first try
    that may or may not find the first bridge); ``p_wrong_guess``: chance of voicing a wrong guess
    (another title in the results) and correcting it; ``max_failures``: searches per hop before it
    gives up (it then answers "unknown", and the rollout is not kept as a demonstration).
    """

    def __init__(
        self, seed: int = 0, *, p_question_query: float = 0.15, p_wrong_guess: float = 0.1, max_failures: int = 2
    ) -> None:
        self.seed = seed
        self.p_question_query = p_question_query
        self.p_wrong_guess = p_wrong_guess
        self.max_failures = max_failures

    def _replay(self, traj: Trajectory) -> _Progress:
        sg = traj.task.subgraph
        assert sg is not None, "turn() checks the task has a subgraph"
        state = _Progress()
        for info in information_materials(traj) if traj.turns else []:
            nxt = sg.nodes[sg.path[state.hop + 1]]
            name = _mentions(info, nxt.names)
            if name is not None:
                state.found.append(name)
                state.hop += 1
                state.failures = 0
                state.last_failed, state.last_found = False, name
                titles = [
                    t
                    for t in _titles(info)
                    if t.lower() not in {n.lower() for n in nxt.names} and t != sg.nodes[sg.path[state.hop - 1]].title
                ]
                state.distractor = titles[0] if titles else None
            else:
                state.failures += 1
                state.last_failed, state.last_found = True, None
            if state.hop == sg.hops:
                break
        return state

    def turn(self, traj: Trajectory, slot: int) -> str:
        sg = traj.task.subgraph
        if sg is None:
            raise InvalidArgumentError(
                "SolverExpert needs tasks with a KG subgraph (e.g. from searchgym.tasks.heldout.hop_tasks)"
            )
        rng = _task_rng(self.seed, traj)
        # draw every choice for every turn up front, so a turn's choices do not depend on how many came before
        u_question, u_wrong, u_query = rng.random(), rng.random(), rng.random()
        state = self._replay(traj)
        max_turns = traj.metadata.get("max_turns") or 10
        turns_left = max_turns - len(traj.turns)
        if state.hop == sg.hops:
            answer = state.found[-1]
            thought = self._step_thought(sg, state, u_wrong, final=True)
            return f"<think>{thought}</think>\n<answer>{answer}</answer>"
        if state.failures >= self.max_failures or turns_left <= 1:
            return "<think>I could not find it in the documents.</think>\n<answer>unknown</answer>"
        title = state.found[-1] if state.found else sg.nodes[sg.path[0]].title
        options = self._hop_queries(sg, state.hop, title)
        used = {call.query for t in traj.turns for call in t.searches}
        fresh = [q for q in options if q not in used] or options
        if not traj.turns and u_question < self.p_question_query:
            query = traj.task.question
        elif state.failures == 0:  # the question's own phrase most often, another formulation otherwise
            query = fresh[0] if u_query < 0.6 or len(fresh) == 1 else fresh[1 + int(u_query * 997) % (len(fresh) - 1)]
        else:  # recovery: a formulation not tried yet
            query = fresh[0]
        step = f"Step {state.hop + 1}: {hop_phrase(sg, state.hop, title)}"
        if not traj.turns:  # the plan's first step is the first search
            thought = plan_text(sg)
        elif state.last_failed:
            thought = f"{step}. The results do not say it. Let me search with other words."
        else:
            thought = f"{self._step_thought(sg, state, u_wrong, final=False)} {step}."
        return f"<think>{thought}</think>\n<search>{query}</search>"

    def _hop_queries(self, sg, hop: int, title: str) -> list[str]:
        """Query formulations for hop ``hop`` from ``title`` (the entity reached so far), best first."""
        return _queries(title, sg.relations[hop], sg.forward[hop])

    def _step_thought(self, sg, state: _Progress, u_wrong: float, *, final: bool) -> str:
        """What the last search established ("Step k: <phrase> is <name>."), sometimes after a wrong
        guess corrected from the text, then either the final answer or nothing (the caller adds the
        next step)."""
        prev = state.found[-2] if len(state.found) > 1 else sg.nodes[sg.path[0]].title
        found = state.found[-1]
        fact = f"{hop_phrase(sg, state.hop - 1, prev)} is {found}."
        if state.distractor and u_wrong < self.p_wrong_guess:
            fact = f"Is it {state.distractor}? No, {fact}"
        fact = f"Step {state.hop}: {fact}"
        if final:
            return f"{fact} That was the last step, so the answer is {found}."
        return fact


_TITLE_HEADER = re.compile(r'Doc \d+ \(Title: "')


def _titles(info: str) -> list[str]:
    """``re.findall(r'Doc \\d+ \\(Title: "(.*?)"\\)', info)``, in linear time."""
    return [info[start:end] for _, start, end in doc_header_matches(info, _TITLE_HEADER)]


class ProposerExpert(SolverExpert):
    """A Proposer that confirms the path by searching, then writes the template question.

    ``mode="kg"`` (the prompt shows the subgraph): it walks the path from the seed hop by hop like
    :class:`SolverExpert` (retrying a hop whose fact did not come back), searching each hop's two
    ends together first, so the retrieved materials hold every fact RAG verification needs.
    ``mode="vanilla"`` (the prompt shows only the answer): it searches the answer first and then each
    earlier path entity, backwards; the rollout is a demonstration only when each entity it searches
    was named in an earlier result (see :func:`discovered_backwards`). The question names only the
    seed, never the answer or a bridge.
    """

    def __init__(self, seed: int = 0, *, mode: str = "kg") -> None:
        super().__init__(seed, p_question_query=0.0, p_wrong_guess=0.0)
        if mode not in ("kg", "vanilla"):
            raise InvalidArgumentError(f"mode must be 'kg' or 'vanilla', got {mode!r}")
        self.mode = mode

    def _final(self, sg) -> str:
        return f"<think>{nesting_text(sg)}</think>\n<question>{path_question(sg)}</question>"

    def _hop_queries(self, sg, hop: int, title: str) -> list[str]:
        """The KG Proposer knows both ends of each hop (its prompt shows the subgraph), so it searches
        them together first ("<from> <to>"), then the far end with the relation, then the Solver's
        formulations: a passage naming both ends is what RAG verification needs to chain the hop."""
        nxt = sg.nodes[sg.path[hop + 1]].title
        both = [f"{title} {nxt}", f"{nxt} {sg.relations[hop]}"]
        return list(dict.fromkeys(both + super()._hop_queries(sg, hop, title)))

    def turn(self, traj: Trajectory, slot: int) -> str:
        sg = traj.task.subgraph
        if sg is None:
            raise InvalidArgumentError("ProposerExpert needs tasks with a KG subgraph")
        if self.mode == "vanilla":
            n = len(traj.turns)
            if n <= sg.hops and n < (traj.metadata.get("max_turns") or 10) - 1:
                if n == 0:
                    answer = sg.nodes[sg.path[-1]].title
                    return (
                        f"<think>Which entity leads to {answer}? Let me look it up.</think>\n<search>{answer}</search>"
                    )
                node, label, nxt = sg.nodes[sg.path[-1 - n]], sg.relations[-n], sg.nodes[sg.path[-n]]
                return (
                    f"<think>{node.title} is linked to {nxt.title}. Let me confirm "
                    f"{relation_phrase(label, node.title, forward=sg.forward[-n])}."
                    f"</think>\n<search>{node.title} {label}</search>"
                )
            return self._final(sg)
        action = super().turn(traj, slot)
        return action if "<answer>" not in action else self._final(sg)


def discovered_backwards(traj: Trajectory) -> bool:
    """Whether the entity each search after the first is about (walking the task's path backwards from
    the answer) was named in an earlier result: a walk the model could have made from what it read."""
    sg = traj.task.subgraph
    assert sg is not None, "discovered_backwards reads a KG-grounded trajectory"
    seen = ""
    for i, t in enumerate(traj.turns):
        if t.searches and 0 < i <= sg.hops and _mentions(seen, sg.nodes[sg.path[-1 - i]].names) is None:
            return False
        seen += t.information
    return True


@dataclass
class DemoStats:
    """What a demonstration run produced: kept and dropped rollouts per role, and why."""

    written: Counter = field(default_factory=Counter)
    dropped: Counter = field(default_factory=Counter)
    searches: Counter = field(default_factory=Counter)

    def as_dict(self) -> dict:
        """JSON-ready counts."""
        return {"written": dict(self.written), "dropped": dict(self.dropped), "searches": dict(self.searches)}


def _check_wording(wording: str) -> None:
    if wording not in TASK_WORDINGS:
        raise InvalidArgumentError(
            f"wording must be one of {', '.join(TASK_WORDINGS)} (held-out wordings are for scoring only); "
            f"got {wording!r}"
        )


def demo_tasks(
    world, counts: dict[int, int], *, seed: int = 0, role: str = "solver", wording: str = DEFAULT_WORDING
) -> list:
    """Training-side tasks for one demonstration role: ``counts[h]`` tasks of ``h`` hops each. The task
    draws of the three roles use disjoint seeds, so ``searchgym demos`` and the learning benchmark make
    the same lists from the same seed. ``wording`` (Solver roles; a Proposer's prompt shows no question):
    ``"varied"`` rewords each question in a train wording or keeps the template, drawn from ``seed`` and the
    task (:func:`~searchgym.tasks.rewording.reword_task`), so the model learns to search whatever the phrasing;
    ``"template"`` keeps every template question (the behaviour before wordings); ``"train"`` rewords all."""
    from ..tasks.heldout import hop_tasks

    _check_wording(wording)
    offset = {"solver": 1, "proposer-kg": 2, "proposer-vanilla": 3, "solver-opening": 4, "proposer-kg-opening": 5}[role]
    tasks = []
    for hops, n in sorted(counts.items()):
        # none at all is refused before the output is opened: an empty file helps no one
        tasks.extend(hop_tasks(world, hops, n, seed=seed * 1000 + offset + 100 * hops, required=True))
    return reword_tasks(tasks, wording, seed=seed) if role.startswith("solver") else tasks


def rl_tasks(world, counts: dict[int, int], *, seed: int, wording: str = DEFAULT_WORDING) -> list:
    """Training-side Solver tasks for RL after the cold start: other draws than the demonstrations' (their
    seed is 0, these 1), in an order drawn from the run's ``seed``. The trainer deals a task list in order,
    so without the shuffle every RL seed would see the same questions in the same order. ``wording`` as in
    :func:`demo_tasks` (the same questions in every RL seed)."""
    tasks = demo_tasks(world, counts, seed=1, wording=wording)
    random.Random(seed).shuffle(tasks)
    return tasks


def _play(env, agent, seed: int) -> tuple[Trajectory, float, dict]:
    """One episode of ``env`` with ``agent`` from ``reset(seed=seed)``: its trajectory, last reward and info."""
    (episode,) = BatchRunner([env]).play(agent, [EpisodeStart(seed=seed)]).episodes
    return episode.info["trajectory"], episode.reward, episode.info


def _record(traj: Trajectory, reward: float, kind: str, extra: Optional[dict] = None) -> dict:
    rec = traj.to_dict()
    rec["reward"] = reward
    rec["demo"] = {"kind": kind, "searches": sum(len(t.searches) for t in traj.turns), **(extra or {})}
    return rec


def opening_record(rec: dict) -> dict:
    """A demonstration cut after its first agent turn: the prompt, the plan and the first search, without
    the env's reply. Openings teach the step the small model finds hardest -- taking the question (or the
    subgraph) apart into one step per hop -- at a fraction of a whole rollout's tokens."""
    segments, cut = rec["segments"], None
    for i, seg in enumerate(segments):
        if seg["source"] == "agent":
            cut = i
            break
    if cut is None:
        raise InvalidArgumentError("a demonstration without an agent turn has no opening")
    first = dict(rec["turns"][0], information="")
    return {
        **rec,
        "segments": segments[: cut + 1],
        "turns": [first],
        "demo": {**rec["demo"], "kind": rec["demo"]["kind"] + "-opening", "searches": len(first["searches"])},
    }


@dataclass
class _DemoPlan:
    """One role's share of a demonstration run: the env it plays, its tasks and its expert; ``opening``
    keeps only the first turn of each rewarded rollout."""

    kind: str
    env_id: str
    env_extra: dict
    tasks: list
    agent: SolverExpert
    opening: bool = False

    def rewarded(self, reward: float, info: dict, traj: Trajectory) -> tuple[bool, str]:
        """Whether the env rewarded the rollout, and the reason when it did not."""
        if self.kind == "solver":
            return reward >= 1.0, "wrong"
        validation = info.get("validation") or {}
        if not validation.get("valid"):
            return False, str(validation.get("reason"))
        if self.kind == "proposer-vanilla" and not discovered_backwards(traj):
            return False, "not_discovered"
        return True, ""


def generate_demonstrations(
    world,
    out: str | Path,
    *,
    solver_tasks: Sequence = (),
    proposer_tasks: Sequence = (),
    vanilla_tasks: Sequence = (),
    solver_openings: Sequence = (),
    proposer_openings: Sequence = (),
    seed: int = 0,
    env_kwargs: Optional[dict] = None,
    progress: bool = False,
    filter_config: Optional[dict] = None,
) -> DemoStats:
    """Play each task list with its expert through the real envs and write the rewarded rollouts.

    ``solver_tasks`` go through ``KGSolver-v0``; ``proposer_tasks`` through ``KGProposer-v0`` in
    ``kg`` mode and ``vanilla_tasks`` in ``vanilla`` (answer-only) mode. ``solver_openings`` and
    ``proposer_openings`` are played the same way (Solver, KG Proposer) but only the first turn of each
    rewarded rollout is written (:func:`opening_record`, kinds ``solver-opening`` and
    ``proposer-kg-opening``). ``env_kwargs`` default to :func:`cold_start_env_kwargs`; ``filter_config``
    (``FilterConfig`` fields) sets the Proposer envs' rule filters (by default SSP's, which drop a 1-hop question
    written after its one search: ``{"min_searches_at_most_required": True}`` keeps it). Writes ``out``
    (JSONL, truncated first; it must be new or demonstrations, and is locked while written) and returns
    the counts.
    """
    import gymnasium as gym

    from ..tasks.sources import ListTaskSource

    out = Path(out)
    check_output(out, "demonstrations")
    kwargs = dict(env_kwargs) if env_kwargs is not None else cold_start_env_kwargs(world)
    stats = DemoStats()
    out.parent.mkdir(parents=True, exist_ok=True)
    filters = {"filter_config": dict(filter_config)} if filter_config else {}
    kg, vanilla = {"mode": "kg", **filters}, {"mode": "vanilla", **filters}
    plans = [
        _DemoPlan("solver", "KGSolver-v0", {}, list(solver_tasks), SolverExpert(seed)),
        _DemoPlan("proposer-kg", "KGProposer-v0", kg, list(proposer_tasks), ProposerExpert(seed)),
        _DemoPlan(
            "proposer-vanilla", "KGProposer-v0", vanilla, list(vanilla_tasks), ProposerExpert(seed, mode="vanilla")
        ),
        _DemoPlan("solver", "KGSolver-v0", {}, list(solver_openings), SolverExpert(seed), opening=True),
        _DemoPlan("proposer-kg", "KGProposer-v0", kg, list(proposer_openings), ProposerExpert(seed), opening=True),
    ]
    bar = _bar(sum(len(p.tasks) for p in plans), progress)
    with OutputLock(out, what="--out"), out.open("w", encoding="utf-8") as f:
        for plan in plans:
            name = plan.kind + ("-opening" if plan.opening else "")
            for i, task in enumerate(plan.tasks):
                env = gym.make(plan.env_id, tasks=ListTaskSource([task]), **plan.env_extra, **kwargs)
                traj, reward, info = _play(env, plan.agent, seed * 1_000_003 + i)
                env.close()
                ok, reason = plan.rewarded(reward, info, traj)
                if ok:
                    rec = _record(traj, reward, plan.kind, {"hops": task.metadata.get("hops")})
                    rec = opening_record(rec) if plan.opening else rec
                    f.write(json.dumps(rec, ensure_ascii=False) + "\n")
                    stats.written[name] += 1
                    stats.searches[f"{name}:{rec['demo']['searches']}"] += 1
                else:
                    stats.dropped[f"{name}:{reason}"] += 1
                bar.update(1)
    bar.close()
    logger.info("demonstrations: %s", stats.as_dict())
    return stats


def demonstrations_by_hops(
    world,
    out: str | Path,
    *,
    solver: dict[int, int],
    proposer: Optional[dict[int, int]] = None,
    vanilla: Optional[dict[int, int]] = None,
    openings: Optional[dict[int, int]] = None,
    proposer_openings: Optional[dict[int, int]] = None,
    seed: int = 0,
    progress: bool = False,
    wording: str = DEFAULT_WORDING,
    filter_config: Optional[dict] = None,
) -> DemoStats:
    """:func:`generate_demonstrations` over :func:`demo_tasks` lists given as ``{hops: count}`` per role
    (Solver, KG Proposer, answer-only Proposer, Solver openings, KG Proposer openings): what
    ``searchgym demos`` and the learning benchmark run. ``wording``: the Solver questions' (see
    :func:`demo_tasks`); ``filter_config``: the Proposer envs' rule filters (see :func:`generate_demonstrations`)."""

    def tasks(counts, role):
        return demo_tasks(world, counts or {}, seed=seed, role=role, wording=wording)

    return generate_demonstrations(
        world,
        out,
        solver_tasks=tasks(solver, "solver"),
        proposer_tasks=tasks(proposer, "proposer-kg"),
        vanilla_tasks=tasks(vanilla, "proposer-vanilla"),
        solver_openings=tasks(openings, "solver-opening"),
        proposer_openings=tasks(proposer_openings, "proposer-kg-opening"),
        seed=seed,
        progress=progress,
        filter_config=filter_config,
    )


def _bar(total: int, enabled: bool):
    from ..core.progress import Progress

    return Progress(total, "demonstrations", unit="task", enabled=enabled)
