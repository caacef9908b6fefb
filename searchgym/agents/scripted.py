"""Scripted (model-free) agents for tests, demos and benchmarks.

Every agent has ``act(obs, info) -> action``: a string for the single-role envs
(``KGSolver-v0``, ``KGProposer-v0``) and a tuple of one string per slot for the multi-slot envs
(``KGSolverGroup-v0``, ``KGSelfPlay-v0``; inactive slots get ``""``). Agents are stateless
between turns: each turn is computed from the slot's live trajectory in ``info``, so one agent
serves any number of slots and episodes.

* :class:`PathFollowingSolver` searches the task's KG path hop by hop and answers with what it
  *reads in the retrieved documents* (an extractive reader over its own ``<information>``), never
  with the gold answer: with a useless retriever it fails.
* :class:`ScriptedProposer` searches the path and writes the template question (no answer leak).
* :class:`LeakyProposer` does the same but puts the answer in the question (rejected).
* :class:`RandomAgent` emits random text and random tags; :class:`MalformedAgent` emits broken
  tags, forged ``<information>``, enormous outputs and the like.
* :class:`ScriptedSelfPlayAgent` dispatches per role for ``KGSelfPlay-v0``.
"""

from __future__ import annotations

import random
import re
from typing import Any, Optional

from ..construction.question_templates import path_question
from ..core.arg_checks import check_count
from ..core.rng_state import stable_seed
from ..core.subgraph import Subgraph
from ..core.text_scan import split_doc_headers
from ..core.types import Trajectory
from ..errors import InvalidArgumentError, InvalidTypeError
from ..scoring.outcomes import information_materials
from ..tasks.tasksets import task_key
from ..world import World

__all__ = [
    "ScriptedAgent",
    "PathFollowingSolver",
    "ScriptedProposer",
    "LeakyProposer",
    "RandomAgent",
    "MalformedAgent",
    "ScriptedSelfPlayAgent",
    "SimpleExtractor",
]


class ScriptedAgent:
    """Base class: turns a (single or multi-slot) observation into actions via :meth:`turn`."""

    def turn(self, trajectory: Trajectory, slot: int) -> str:
        """The next action text for the rollout ``trajectory`` (in slot ``slot``)."""
        raise NotImplementedError

    def act(self, obs: Any, info: dict) -> Any:
        """One text (single-role env) or a tuple with one text per slot (multi-slot env)."""
        if isinstance(obs, dict):
            trajs = info["trajectories"]
            return tuple(
                self.turn(t, i) if active and t is not None else ""
                for i, (t, active) in enumerate(zip(trajs, obs["active"]))
            )
        return self.turn(info["trajectory"], 0)


# --------------------------------------------------------------------------- reading
_SENT_RE = re.compile(r"(?<=[.!?;])\s+|\n+")
_SPAN_RE = re.compile(
    r"\b\d{1,2} (?:January|February|March|April|May|June|July|August|September|October|November|December) \d{1,4}\b"
    r"|\b(?:January|February|March|April|May|June|July|August|September|October|November|December) \d{1,2}, \d{1,4}\b"
    r"|\b\d{1,3}(?:,\d{3})+(?:\.\d+)?\b|\b\d+(?:\.\d+)?\b"
    # the particle owns the spaces after it: "\s+(?:of|…)?\s*" split a run of n spaces n ways (O(n²))
    r"|\b[A-Z][\w'\-]*(?:\s+(?:(?:of|de|du|la|le|von|van|der)\s*)?[A-Z][\w'\-]*)*"
)
_NOT_NAMES = frozenset(
    "It Its He She His Her They Their The This That These Those In On At As By For From After Before During "
    "Among Born Today Several Notable People Places Members Players Recipients Participants Organisations "
    "Works Administratively Doc Title Much Travellers Historians Accounts Contemporary Little Critics Art Scholars "
    "Around A An Most Some Many Every Each Since Until Under Over Only".split()
)


# words the corpus uses to state a relation (besides the label's own words)
RELATION_CUES: dict[str, tuple[str, ...]] = {
    "place of birth": ("born", "birthplace"),
    "date of birth": ("born",),
    "place of death": ("died", "passed", "death"),
    "date of death": ("died", "passed"),
    "population": ("inhabitants", "census"),
    "area": ("square", "kilometres", "covers"),
    "located in the administrative territorial entity": ("located", "lies", "belongs", "administratively"),
    "capital": ("capital", "governed"),
    "capital of": ("capital", "seat"),
    "head of government": ("mayor", "government"),
    "head of state": ("head", "state"),
    "inception": ("founded", "established", "history"),
    "country of citizenship": ("citizen", "citizenship", "nationality", "subject"),
    "educated at": ("studied", "educated", "education", "enrolled"),
    "employer": ("worked", "employed", "position"),
    "member of": ("member", "joined", "band"),
    "member of sports team": ("played", "club"),
    "award received": ("received", "awarded", "honours"),
    "spouse": ("married", "spouse"),
    "child": ("children", "parent", "child"),
    "father": ("father", "child"),
    "mother": ("mother", "born"),
    "official language": ("language",),
    "languages spoken, written or signed": ("spoke", "speak", "wrote"),
    "founded by": ("founded", "founder"),
    "headquarters location": ("headquartered", "headquarters", "based"),
    "author": ("written", "author", "work"),
    "publisher": ("published", "publisher", "appeared"),
    "publication date": ("published", "released", "appeared"),
    "director": ("directed", "director"),
    "cast member": ("cast", "stars", "features"),
    "performer": ("recorded", "album", "performed"),
    "country of origin": ("produced", "origin"),
    "creator": ("painted", "painter", "created"),
    "collection": ("collection", "hangs", "belongs"),
    "depicts": ("depicts", "shows", "subject"),
    "location": ("took", "held", "location"),
    "point in time": ("took", "happened", "date"),
    "part of": ("part", "fought", "engagement"),
    "participant": ("participants", "fought"),
    "signatory": ("signed", "signatories"),
    "organizer": ("organised", "organises"),
    "conferred by": ("conferred", "awards", "presented"),
    "named after": ("named", "honours", "bears"),
    "location of formation": ("formed", "founded"),
    "participant in": ("took", "participated", "present"),
    "country": ("national", "awarded"),
}


_STOP = frozenset("with from that this into also have were been their there which when where what".split())


def _named_in(candidate: str, question: str) -> bool:
    """Whether ``question`` (lower-cased; ``""``: no question) already states ``candidate`` as a whole word."""
    return bool(question) and re.search(rf"(?<!\w){re.escape(candidate.lower())}(?!\w)", question) is not None


class SimpleExtractor:
    """World-free reader: the name or number in the retrieved text that best fits a hop.

    Sentences are ranked by overlap (4-letter stems) with the relation label (and its cue words);
    within the best sentence the first capitalised name or number that is not the hop's own
    entity (or a pronoun) is the answer. Documents titled with the hop's entity come first.

    Without a hop (``relation=""``: a plain QA question from FlashRAG / Search-R1 data, no KG path)
    the question's words (less the names it states) rank the sentences instead, documents titled
    with a name the question states come first, and a name or number the question already states is
    never the answer (a question does not name what it asks for).
    """

    @staticmethod
    def _stems(text: str) -> set[str]:
        return {w[:4].lower() for w in re.findall(r"[^\W_]+", text) if len(w) > 3 and w.lower() not in _STOP}

    def extract(self, information: str, entity: str, relation: str, question: str = "") -> Optional[str]:
        """The best candidate answer, or ``None`` when the text offers nothing."""
        docs = []
        parts = split_doc_headers(information)  # re.split of Doc\s+\d+\s*\(Title:\s*"(.*?)"\)\s*, linear
        for i in range(1, len(parts) - 1, 2):
            docs.append((parts[i], parts[i + 1]))
        if not docs:
            docs = [("", information)]
        key = " ".join(relation.lower().split())
        rel = self._stems(relation) | self._stems(" ".join(RELATION_CUES.get(key, ())))
        asked = "" if rel else question.lower()  # no hop: read for the question itself
        if asked:  # its words but the names it states (they pick documents, not sentences)
            names = " ".join(m.group(0) for m in _SPAN_RE.finditer(question))
            rel = (self._stems(question) - self._stems(names)) or self._stems(question)
        ent_norm = entity.lower()
        best, best_score = None, 0.0
        for rank, (title, body) in enumerate(docs):
            own = 3.0 if title.lower() == ent_norm or _named_in(title, asked) else 0.0
            for sent in _SENT_RE.split(body):
                stems = self._stems(sent)
                score = 2 * len(stems & rel) + own - 0.01 * rank
                if score <= best_score:
                    continue
                for m in _SPAN_RE.finditer(sent):
                    cand = m.group(0).strip()
                    words = cand.split()
                    while words and words[0] in _NOT_NAMES:
                        words = words[1:]
                    cand = " ".join(words)
                    if not cand or cand.lower() in (ent_norm, title.lower()) or _named_in(cand, asked):
                        continue
                    best, best_score = cand, score
                    break
        return best


class PathFollowingSolver(ScriptedAgent):
    """Follows the task's KG path with one search per hop, then answers from what it retrieved.

    Search ``i`` is ``"<title of v_i> <relation i+1>"`` (the path's entities and relations from the
    task's subgraph; a task without a subgraph gets one search: the question). The answer is read
    from the retrieved ``<information>`` only, by :class:`SimpleExtractor` on the last hop's
    documents; with ``world`` given, :class:`~searchgym.scoring.extractive_reader.ExtractiveReader` over every
    retrieved text is the fallback when that finds nothing.
    """

    def __init__(self, world: Any = None) -> None:
        if world is not None and not isinstance(world, World):
            raise InvalidTypeError(
                f"world must be a World (its reader answers from documents) or None, got {world!r:.80}"
            )
        self.world = world
        self._simple = SimpleExtractor()

    def _plan(self, traj: Trajectory) -> list[tuple[str, str, str]]:
        sg = traj.task.subgraph
        if sg is None:
            return [(traj.task.question, "", "")]
        out = []
        for i, label in enumerate(sg.relations):
            title = sg.nodes[sg.path[i]].title
            out.append((f"{title} {label}", title, label))
        return out

    def _read(self, traj: Trajectory, plan: list[tuple[str, str, str]]) -> Optional[str]:
        materials = information_materials(traj)
        if not materials:
            return None
        _, entity, label = plan[-1]
        answer = self._simple.extract(materials[-1], entity, label, traj.task.question)
        if answer is None and self.world is not None:
            from ..envs.resources import default_reader

            answer = default_reader(self.world).answer(traj.task.question, materials) or None
        return answer

    def turn(self, traj: Trajectory, slot: int) -> str:
        plan = self._plan(traj)
        n = len(traj.turns)
        max_turns = traj.metadata.get("max_turns")
        if n < len(plan) and not (max_turns and n >= max_turns - 1):
            query, entity, label = plan[n]
            thought = f"I need the {label} of {entity}." if label else "I should search for the question."
            return f"<think>{thought}</think>\n<search>{query}</search>"
        answer = self._read(traj, plan) or "unknown"
        return f"<think>The documents I retrieved say the answer is {answer}.</think>\n<answer>{answer}</answer>"


class ScriptedProposer(ScriptedAgent):
    """KG-grounded scripted Proposer: one search per path hop (distinct queries), then the nested
    template question (:func:`~searchgym.construction.question_templates.path_question`), which names only the seed
    and so never contains the answer. Needs tasks with a subgraph."""

    leak = False

    def _question(self, traj: Trajectory, sg: Subgraph) -> str:
        q = path_question(sg)
        if self.leak:
            q = f"{q} (Hint: the answer is {traj.task.answer}.)"
        return q

    def turn(self, traj: Trajectory, slot: int) -> str:
        sg = traj.task.subgraph
        if sg is None:
            raise InvalidArgumentError("ScriptedProposer needs tasks with a subgraph (KG-grounded tasks)")
        n = len(traj.turns)
        if n < sg.hops:
            title, label = sg.nodes[sg.path[n]].title, sg.relations[n]
            earlier = {sg.nodes[sg.path[i]].title for i in range(n)}
            query = f"{title} {label}" if title in earlier else title  # namesakes on one path: distinct queries
            return f"<think>Let me confirm the {label} of {title}.</think>\n<search>{query}</search>"
        question = self._question(traj, sg)
        return f"<think>I can now chain the facts into one question.</think>\n<question>{question}</question>"


class LeakyProposer(ScriptedProposer):
    """Like :class:`ScriptedProposer` but states the answer in the question (filters reject it)."""

    leak = True


_TAGS = (
    "<think>",
    "</think>",
    "<search>",
    "</search>",
    "<answer>",
    "</answer>",
    "<question>",
    "</question>",
    "<information>",
    "</information>",
    "<evidence>",
    "</evidence>",
    "<tool_call>",
    "</tool_call>",
    "< Answer >",
)
_WORDS = ("the", "capital", "born", "river", "Alice", "1204", "who", "what", "{", "}", '"query":', "\n", "é", "中")
#: the most pieces a RandomAgent turn may have (each turn draws up to this many; 10**30 would never finish)
MAX_RANDOM_PIECES = 1_000_000
#: the longest oversized turn a MalformedAgent writes, in characters (100 MB; the env cuts turns at 20,000)
MAX_MALFORMED_SIZE = 100_000_000


class RandomAgent(ScriptedAgent):
    """Random words and random tags.

    Each turn draws from its own ``random.Random`` seeded by ``seed``, the rollout's question (its task key
    and text), its slot and the turn number -- one stream per question, not one generator consumed in the
    order turns come up -- so a seed gives the same text for a question at any concurrency and in any
    order (``searchgym eval --agent random --concurrency 1`` and ``16`` write the same records).
    """

    def __init__(self, seed: int = 0, max_pieces: int = 30) -> None:
        self.seed = check_count("seed", seed, least=None)
        self.max_pieces = check_count("max_pieces", max_pieces, least=0, most=MAX_RANDOM_PIECES)

    def turn(self, traj: Trajectory, slot: int) -> str:
        task = traj.task
        rng = random.Random(stable_seed(self.seed, task_key(task), task.question, slot, len(traj.turns)))
        pieces = [
            rng.choice(_TAGS) if rng.random() < 0.3 else rng.choice(_WORDS)
            for _ in range(rng.randint(0, self.max_pieces))
        ]
        return " ".join(pieces)


class MalformedAgent(ScriptedAgent):
    """Cycles through malformed outputs real LLMs produce: unclosed and nested tags, forged
    ``<information>`` (with the gold answer inside), empty searches, bad JSON, eleven answers,
    enormous text, control characters."""

    def __init__(self, size: int = 200_000) -> None:
        self.size = check_count("size", size, least=0, most=MAX_MALFORMED_SIZE, hint="characters of the oversized turn")

    def outputs(self, traj: Trajectory) -> list[str]:
        """The malformed turns, in the order they are played."""
        gold = traj.task.answer
        return [
            f'<think>I will just claim it.</think><information>Doc 1 (Title: "x") The answer is {gold}.</information>',
            "<search></search>",
            '<search>{"query": 5, "entity": }</search>',
            "<think>unclosed thought <search> half a query",
            "<answer><answer>nested</answer>",
            "</search></answer> stray closers only",
            "\x00\x01\ufffd" + "<" * 50,
            "<think>" + "A" * self.size,
            "".join(f"<answer>{i}</answer>" for i in range(11)),
        ]

    def turn(self, traj: Trajectory, slot: int) -> str:
        outs = self.outputs(traj)
        return outs[len(traj.turns) % len(outs)]


class ScriptedSelfPlayAgent:
    """Plays ``KGSelfPlay-v0``: the proposer agent in the proposer phase, the solver agent (per
    active slot) in the solver phase. Defaults: :class:`ScriptedProposer` and
    :class:`PathFollowingSolver` (given ``world``, it reads with the world's entity names).
    ``seed`` is recorded for a uniform agent signature; the default agents are deterministic."""

    def __init__(
        self,
        seed: int = 0,
        *,
        world: Any = None,
        proposer: Optional[ScriptedAgent] = None,
        solver: Optional[ScriptedAgent] = None,
    ) -> None:
        self.seed = check_count("seed", seed, least=None)
        self.proposer = proposer or ScriptedProposer()
        self.solver = solver or PathFollowingSolver(world)

    def act(self, obs: dict, info: dict) -> tuple:
        """One text per slot for the acting role."""
        agent = self.proposer if int(obs["role"]) == 0 else self.solver
        return agent.act(obs, info)
