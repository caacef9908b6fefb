"""Read access by key for the dataclasses that replaced the env contract's dicts.

Reward events (:class:`~searchgym.core.rewards.RewardEvent`) and validation results
(:class:`~searchgym.core.validation.ValidationResult`) were plain dicts in earlier versions, and user loops
read them by key (``ev["reward"]``, ``info["validation"].get("valid")``). :class:`MappingReads` keeps those
reads working on the typed records -- ``record["field"]``, ``record.get("field", default)``, ``"field" in
record``, ``dict(record)`` -- and a user wrapper's ``ev["reward"] = r`` still writes the field, while attribute
access (``ev.reward``) is the typed way. A key that is not a field is refused by name (it would have been a new
dict entry no reader knows).
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, Iterator

from ..errors import NotFoundError

__all__ = ["MappingReads"]


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    """The dataclass ``cls``'s field names, in declaration order (computed once per class: reward wrappers read
    events by key on every step)."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls))
    return names


class MappingReads:
    """Mixin for a dataclass: its fields read by key, as the dict it replaced did (see the module docstring)."""

    def keys(self) -> list[str]:
        """The field names, in declaration order (so ``dict(record)`` works)."""
        return list(_field_names(type(self)))

    def _field(self, key: str) -> str:
        """``key`` when it names a field, else :class:`NotFoundError` listing the fields."""
        names = _field_names(type(self))
        if key not in names:
            raise NotFoundError(f"{type(self).__name__} has no field {key!r}; its fields: {', '.join(names)}")
        return key

    def __getitem__(self, key: str) -> Any:
        return getattr(self, self._field(key))

    def __setitem__(self, key: str, value: Any) -> None:
        setattr(self, self._field(key), value)

    def get(self, key: str, default: Any = None) -> Any:
        """The field ``key``, or ``default`` when there is no such field."""
        return getattr(self, key) if key in _field_names(type(self)) else default

    def __contains__(self, key: object) -> bool:
        return key in _field_names(type(self))

    def __iter__(self) -> Iterator[str]:
        return iter(_field_names(type(self)))
