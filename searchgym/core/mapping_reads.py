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


class MappingReads:
    """Mixin for a dataclass: its fields read by key, as the dict it replaced did (see the module docstring)."""

    def keys(self) -> list[str]:
        """The field names, in declaration order (so ``dict(record)`` works)."""
        return [f.name for f in fields(self)]  # type: ignore[arg-type]

    def __getitem__(self, key: str) -> Any:
        if key not in self.keys():
            raise NotFoundError(f"{type(self).__name__} has no field {key!r}; its fields: {', '.join(self.keys())}")
        return getattr(self, key)

    def __setitem__(self, key: str, value: Any) -> None:
        if key not in self.keys():
            raise NotFoundError(f"{type(self).__name__} has no field {key!r}; its fields: {', '.join(self.keys())}")
        setattr(self, key, value)

    def get(self, key: str, default: Any = None) -> Any:
        """The field ``key``, or ``default`` when there is no such field."""
        return getattr(self, key) if key in self.keys() else default

    def __contains__(self, key: object) -> bool:
        return key in self.keys()

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())
