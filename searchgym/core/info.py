"""The ``info`` discriminator: which env family's schema an ``info`` dict follows (docs/envs.md, ``info``).

Every searchgym env puts ``info["kind"]`` in the ``info`` of ``reset`` and ``step``:

* ``"single"``: ``KGSolver-v0``, ``KGProposer-v0`` -- one rollout, ``info["trajectory"]``;
* ``"group"``: ``KGSolverGroup-v0`` -- G Solver slots, ``info["trajectories"]`` and per-slot lists;
* ``"selfplay"``: ``KGSelfPlay-v0`` -- the group schema plus the Proposer's keys;
* ``"navigate"``: ``KGNavigate-v0`` -- the numeric navigation env's own keys.

Wrappers and agents read the kind instead of guessing the shape from which keys are present.
:func:`info_kind` still accepts an ``info`` without the key (from an env written before it existed, or
built by hand) and infers the kind from its keys, as earlier versions did.
"""

from __future__ import annotations

from typing import Mapping

from ..errors import InvalidArgumentError

__all__ = ["INFO_KINDS", "KIND_SINGLE", "KIND_GROUP", "KIND_SELFPLAY", "KIND_NAVIGATE", "info_kind", "has_slots"]

KIND_SINGLE, KIND_GROUP, KIND_SELFPLAY, KIND_NAVIGATE = "single", "group", "selfplay", "navigate"
INFO_KINDS = (KIND_SINGLE, KIND_GROUP, KIND_SELFPLAY, KIND_NAVIGATE)
_SLOTTED = frozenset({KIND_GROUP, KIND_SELFPLAY})


def info_kind(info: Mapping) -> str:
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
    return info_kind(info) in _SLOTTED
