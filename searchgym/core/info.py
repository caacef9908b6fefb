"""The ``info`` discriminator: which env family's schema an ``info`` dict follows (docs/envs.md, ``info``).

Every searchgym env puts ``info["kind"]`` in the ``info`` of ``reset`` and ``step``:

* ``"single"``: ``KGSolver-v0``, ``KGProposer-v0`` -- one rollout, ``info["trajectory"]``;
* ``"group"``: ``KGSolverGroup-v0`` -- G Solver slots, ``info["trajectories"]`` and per-slot lists;
* ``"selfplay"``: ``KGSelfPlay-v0`` -- the group schema plus the Proposer's keys;
* ``"navigate"``: ``KGNavigate-v0`` -- the numeric navigation env's own keys.

Each kind's keys are a ``TypedDict`` here (:class:`SingleInfo`, :class:`ProposerInfo`, :class:`GroupInfo`,
:class:`SelfPlayInfo`, :class:`NavigateInfo`; :data:`EnvInfo` is any of them). Wrappers and agents read the
kind instead of guessing the shape from which keys are present.
:func:`info_kind` still accepts an ``info`` without the key (from an env written before it existed, or
built by hand) and infers the kind from its keys, as earlier versions did.
"""

from __future__ import annotations

from typing import Any, Literal, Mapping, Optional, TypedDict, Union

from ..errors import InvalidArgumentError
from .rewards import RewardEvent
from .subgraph import Subgraph
from .types import Role, Task, Trajectory, Turn
from .validation import ValidationResult

__all__ = [
    "INFO_KINDS",
    "SLOTTED_KINDS",
    "KIND_SINGLE",
    "KIND_GROUP",
    "KIND_SELFPLAY",
    "KIND_NAVIGATE",
    "InfoKind",
    "ReplaySource",
    "REPLAY_SOURCES",
    "SingleInfo",
    "ProposerInfo",
    "GroupInfo",
    "SelfPlayInfo",
    "NavigateInfo",
    "EnvInfo",
    "SlotComponents",
    "info_kind",
    "has_slots",
]

InfoKind = Literal["single", "group", "selfplay", "navigate"]
KIND_SINGLE: Literal["single"] = "single"
KIND_GROUP: Literal["group"] = "group"
KIND_SELFPLAY: Literal["selfplay"] = "selfplay"
KIND_NAVIGATE: Literal["navigate"] = "navigate"
INFO_KINDS: tuple[InfoKind, ...] = (KIND_SINGLE, KIND_GROUP, KIND_SELFPLAY, KIND_NAVIGATE)

#: where the Solvers' question of a self-play game came from: the Proposer's own (valid) question, one
#: replayed from the buffer (the Proposer's was invalid), or the subgraph's template question (invalid and
#: the buffer empty), or the subgraph's template question in a solver-only game (no Proposer phase:
#: ``KGSelfPlay-v0``'s ``solver_only_hops``). Earlier versions said ``False`` / ``True`` / ``"dummy"``.
ReplaySource = Literal["proposed", "replayed", "dummy", "solver_only"]
REPLAY_SOURCES: tuple[ReplaySource, ...] = ("proposed", "replayed", "dummy", "solver_only")


class SingleInfo(TypedDict):
    """``info`` of ``KGSolver-v0`` and ``KGProposer-v0`` (one rollout)."""

    kind: Literal["single"]
    trajectory: Trajectory
    task: Task
    turn: Optional[Turn]  # the last turn (None at reset)
    inserted: str  # the text the env inserted this step
    rewards: list[RewardEvent]  # the events that became known on this step
    reward_components: dict[str, Any]  # {name: value} of the finished trajectory
    game: int  # how many games this env had finished when this one started


class ProposerInfo(SingleInfo):
    """``info`` of ``KGProposer-v0``: the single keys plus the verdict on the question."""

    validation: Optional[ValidationResult]  # None until the question is in


class SlotComponents(TypedDict):
    """``reward_components`` of the group and self-play envs."""

    solver: dict[str, list[Any]]  # {name: [value per slot]} (None for a slot not yet scored)
    proposer: dict[str, Any]


class GroupInfo(TypedDict):
    """``info`` of ``KGSolverGroup-v0`` (G Solver rollouts of one task)."""

    kind: Literal["group"]
    trajectories: list[Trajectory]
    task: Task
    turn: list[Optional[Turn]]  # per slot
    inserted: list[str]  # per slot
    rewards: list[RewardEvent]
    role: Role
    reward_components: SlotComponents
    game: int


class SelfPlayInfo(TypedDict):
    """``info`` of ``KGSelfPlay-v0``: the group keys plus the Proposer's."""

    kind: Literal["selfplay"]
    role: Role  # which role acts now
    trajectories: list[Optional[Trajectory]]  # proposer phase: [proposer, None, ...]; then the G Solvers
    proposer: Optional[Trajectory]  # None in a solver-only game (no Proposer phase)
    task: Task
    turn: list[Optional[Turn]]
    inserted: list[str]
    rewards: list[RewardEvent]
    reward_components: SlotComponents
    validation: Optional[ValidationResult]  # None until the question is validated
    game: int
    replay: ReplaySource
    subgraph: Optional[Subgraph]


class NavigateInfo(TypedDict):
    """``info`` of ``KGNavigate-v0`` (numeric navigation)."""

    kind: Literal["navigate"]
    success: bool
    task_id: str
    hops: Optional[int]
    node: str
    target: str
    steps: int


EnvInfo = Union[SingleInfo, ProposerInfo, GroupInfo, SelfPlayInfo, NavigateInfo]
#: the kinds whose envs step G Solver slots together (per-slot lists in ``info``; they take ``group_size=``)
SLOTTED_KINDS: frozenset[InfoKind] = frozenset({KIND_GROUP, KIND_SELFPLAY})


def info_kind(info: Mapping) -> InfoKind:
    """The schema family of ``info``: its ``"kind"``, else inferred from its keys (``trajectories``:
    group or, with ``proposer``, self-play; ``trajectory``: single; ``success`` and ``steps``: navigate).
    Raises :class:`InvalidArgumentError` for an unknown kind or an ``info`` of no known shape."""
    kind = info.get("kind")
    if kind is not None:
        if kind not in INFO_KINDS:
            raise InvalidArgumentError(f"info['kind'] is {kind!r}; searchgym envs use one of {', '.join(INFO_KINDS)}")
        return kind
    if "trajectories" in info:
        return KIND_SELFPLAY if "proposer" in info else KIND_GROUP
    if "trajectory" in info:
        return KIND_SINGLE
    if "success" in info and "steps" in info:
        return KIND_NAVIGATE
    raise InvalidArgumentError(
        f"info with keys {sorted(info)} is not from a searchgym env (no 'kind', 'trajectory' or 'trajectories'); "
        "pass the info that reset/step returned"
    )


def has_slots(info: Mapping) -> bool:
    """Whether ``info`` holds per-slot lists (``trajectories``, ``turn``, ``inserted``): the group and
    self-play envs. An ``info`` of no known shape has none."""
    kind = info.get("kind")
    if kind is None:
        return "trajectories" in info  # an info from before the discriminator: the earlier test
    return info_kind(info) in SLOTTED_KINDS
