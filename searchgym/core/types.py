"""Tasks and trajectories: the data every env emits and every wrapper / trainer reads.

A :class:`Trajectory` records one rollout of one role. Its ``segments`` partition the full
text the policy saw and wrote into ``prompt`` / ``agent`` / ``env`` pieces, so a trainer can
mask env-inserted tokens exactly and a reward wrapper can read only the agent's own text.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal as _Lit
from typing import Optional

from ..errors import InvalidArgumentError
from .subgraph import Subgraph

Role = _Lit["solver", "proposer"]
SegmentSource = _Lit["prompt", "agent", "env"]

#: Joins ``<think>`` texts (of one turn and across turns) into WCR's T_i. A waypoint name may not
#: contain it (``WaypointMatcher`` refuses one), so no title can match across two think spans.
THINK_SEPARATOR = "\n"


@dataclass
class Task:
    """One question for a Solver (or one answer target for a Proposer).

    ``answers`` holds every accepted gold string (canonical first). ``waypoints`` are the
    titles WCR matches (defaults to the subgraph's); ``gold_titles`` the supporting documents
    DynaSearcher's recall term needs; ``evidence`` the EVE evidence span if one exists.
    """

    id: str
    question: str
    answers: list[str]
    subgraph: Optional[Subgraph] = None
    waypoints: list[str] = field(default_factory=list)
    gold_titles: list[str] = field(default_factory=list)
    evidence: Optional[str] = None
    source: str = "jsonl"
    metadata: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.answers:
            raise InvalidArgumentError(f"task {self.id!r} has no gold answer")
        if not self.waypoints and self.subgraph is not None:
            self.waypoints = self.subgraph.waypoints

    @property
    def answer(self) -> str:
        """Canonical gold answer."""
        return self.answers[0]

    @property
    def hops(self) -> Optional[int]:
        """Target-path length when the task is KG-grounded."""
        return self.subgraph.hops if self.subgraph is not None else self.metadata.get("hops")

    def to_dict(self) -> dict:
        """JSON-serialisable form."""
        d = asdict(self)
        d["subgraph"] = self.subgraph.to_dict() if self.subgraph is not None else None
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Task":
        """Inverse of :meth:`to_dict`."""
        d = dict(d)
        sg = d.pop("subgraph", None)
        return cls(**d, subgraph=Subgraph.from_dict(sg) if sg else None)


@dataclass
class SearchCall:
    """One search the agent issued and what it got back."""

    query: str
    entities: list[str] = field(default_factory=list)
    relations: list[str] = field(default_factory=list)
    doc_ids: list[str] = field(default_factory=list)
    titles: list[str] = field(default_factory=list)
    kg_triples: list[str] = field(default_factory=list)


@dataclass
class Turn:
    """One agent turn: the raw action text, what was parsed from it, and the env's reply.

    ``think`` holds only the agent's own ``<think>`` text (forged ``<information>`` removed).
    ``information`` is the retrieved information of this turn as the tag protocol inserts it ('' if
    none). ``messages`` are the messages the env sent after this turn in the function-calling
    protocol (``role: tool`` results or a ``role: user`` correction; empty in the tag protocol).
    """

    index: int
    action: str
    think: str = ""
    searches: list[SearchCall] = field(default_factory=list)
    answer: Optional[str] = None
    question: Optional[str] = None
    evidence: Optional[str] = None
    information: str = ""
    error: Optional[str] = None
    forged_information: bool = False
    messages: list[dict] = field(default_factory=list)


@dataclass
class Segment:
    """A contiguous piece of the rollout text and who produced it.

    ``turn`` is the index of the :class:`Turn` that wrote (``agent``) or caused (``env``) the
    piece; ``None`` for the prompt and for hand-built segments. Step-level advantages (SAPO) are
    keyed by it, since an empty agent turn is a Turn (and a GDCR step) without an agent segment.
    """

    text: str
    source: SegmentSource
    turn: Optional[int] = None


@dataclass
class Trajectory:
    """A complete (or in-progress) rollout of one role on one task."""

    role: Role
    task: Task
    prompt: str
    turns: list[Turn] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)
    answer: Optional[str] = None
    question: Optional[str] = None
    evidence: Optional[str] = None
    correct: Optional[bool] = None
    valid: bool = True
    terminated: bool = False
    truncated: bool = False
    reward: float = 0.0
    reward_components: dict = field(default_factory=dict)
    metadata: dict = field(default_factory=dict)

    @property
    def text(self) -> str:
        """Prompt + agent turns + env insertions, in order: what the policy conditioned on."""
        return "".join(s.text for s in self.segments)

    @property
    def completion(self) -> str:
        """Everything after the prompt (agent text and env insertions)."""
        return "".join(s.text for s in self.segments if s.source != "prompt")

    def spans(self, source: SegmentSource) -> list[tuple[int, int]]:
        """Character spans ``[start, end)`` in :attr:`text` produced by ``source``."""
        out, pos = [], 0
        for s in self.segments:
            if s.source == source and s.text:
                out.append((pos, pos + len(s.text)))
            pos += len(s.text)
        return out

    @property
    def env_spans(self) -> list[tuple[int, int]]:
        """Spans the environment inserted (to be masked out of the loss)."""
        return self.spans("env")

    @property
    def think_text(self) -> str:
        """T_i of WCR: the agent's ``<think>`` texts in order, joined by :data:`THINK_SEPARATOR`."""
        return THINK_SEPARATOR.join(t.think for t in self.turns if t.think)

    @property
    def num_searches(self) -> int:
        """Searches issued over the whole rollout."""
        return sum(len(t.searches) for t in self.turns)

    @property
    def retrieved_titles(self) -> list[str]:
        """Titles of every document retrieved, in order (with repeats)."""
        return [title for t in self.turns for s in t.searches for title in s.titles]

    @property
    def information_text(self) -> str:
        """Every env-inserted ``<information>`` text concatenated."""
        return "".join(t.information for t in self.turns)

    def to_dict(self) -> dict:
        """JSON-serialisable form (used by trajectory export)."""
        d = asdict(self)
        d["task"] = self.task.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Trajectory":
        """Inverse of :meth:`to_dict`."""
        d = dict(d)
        task = Task.from_dict(d.pop("task"))
        turns = [
            Turn(**{**t, "searches": [SearchCall(**s) for s in t.get("searches", [])]}) for t in d.pop("turns", [])
        ]
        segments = [Segment(**s) for s in d.pop("segments", [])]
        return cls(task=task, turns=turns, segments=segments, **d)
