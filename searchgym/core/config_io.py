"""YAML/dict I/O shared by the agents' config dataclasses (``TrainConfig``, ``SFTConfig``).

A subclass is a ``@dataclass`` with typed fields and a ``validate()`` method; it sets
``RESUME_MUTABLE`` (fields that may change between a checkpoint and its resume) and ``DUMP_HINT``
(the command that writes a config file, quoted in the error for a missing one).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import fields
from pathlib import Path
from types import UnionType
from typing import TYPE_CHECKING, Any, ClassVar, Mapping, Sequence, TypeVar, Union, get_args, get_origin, get_type_hints

from ..errors import InvalidArgumentError, MissingFileError
from .path_errors import not_there, unusable_path_reason
from .renamed import rename_keys

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_Config = TypeVar("_Config", bound="ConfigIO")
_T = TypeVar("_T", bound="DataclassInstance")


class ConfigIO:
    """Mixin: ``to_dict/from_dict``, YAML ``load/save``, ``key=value`` overrides and a resume fingerprint."""

    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]  # a subclass is a dataclass
    RESUME_MUTABLE: ClassVar[frozenset] = frozenset()
    DUMP_HINT: ClassVar[str] = "searchgym train --dump-config"
    #: old key -> new key: an old key still loads (file, ``--set``, a checkpoint's config) with a RenamedWarning
    RENAMED_KEYS: ClassVar[dict[str, str]] = {}

    def to_dict(self) -> dict:
        """Plain dict (YAML/JSON-ready)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls: type[_Config], d: dict) -> _Config:
        """Build from a dict; unknown keys are an error naming them, renamed keys warn and map to the new name."""
        return dataclass_from_mapping(cls, rename_keys(d, cls.RENAMED_KEYS, cls.__name__))

    @classmethod
    def load(cls: type[_Config], path: str | Path) -> _Config:
        """Read a YAML (or JSON) config file."""
        return cls.from_dict(cls.read_mapping(path))

    @classmethod
    def read_mapping(cls, path: str | Path) -> dict:
        """The ``key: value`` mapping of a YAML (or JSON) config file, unchecked against the fields
        (what a recipe-aware loader layers over a recipe's values)."""
        import yaml

        p = Path(path)
        if not p.is_file():
            where = p if not p.exists() else "FILE"  # a folder or a device: name a file to write, not it
            raise MissingFileError(f"config file {p} {not_there(p)}; write one with `{cls.DUMP_HINT} {where}`")
        try:
            data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            raise InvalidArgumentError(
                f"{p}: {_yaml_problem(exc)}; fix that line (`{cls.DUMP_HINT} FILE` writes a valid config to start from)"
            ) from None
        except UnicodeDecodeError as exc:
            raise InvalidArgumentError(f"{p} is not a UTF-8 text file ({exc}); give a YAML config file") from None
        if not isinstance(data, dict):
            raise InvalidArgumentError(f"{p}: a config file must be a mapping of key: value")
        return data

    def save(self, path: str | Path) -> None:
        """Write as YAML (its folder made if missing; an unwritable path is one line naming it)."""
        import yaml

        target = Path(path)
        text = yaml.safe_dump(self.to_dict(), sort_keys=False)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        except OSError as exc:
            why = unusable_path_reason(exc) or exc.strerror
            raise InvalidArgumentError(f"cannot write the config to {target}: {why}; give a writable path") from exc

    def with_overrides(self: _Config, items: Sequence[str]) -> _Config:
        """Apply ``key=value`` strings (values parsed as YAML, checked against the field's type). A dotted key
        sets one entry of a mapping field and keeps its others (``env_kwargs.filter_config={min_words: 8}``), where
        ``env_kwargs={...}`` replaces the whole mapping."""
        d = self.to_dict()
        hints = get_type_hints(type(self))
        for item in items:
            if "=" not in item:
                raise InvalidArgumentError(f"override {item!r} must look like key=value (e.g. batch_size=8)")
            key, raw = item.split("=", 1)
            key, *path = key.strip().split(".")
            key = next(iter(rename_keys({key: None}, self.RENAMED_KEYS, f"--set {key}")))
            if key not in d:
                raise InvalidArgumentError(f"unknown config key {key!r}; valid keys: {', '.join(sorted(d))}")
            value = override_value(raw, item)
            if path:
                d[key] = _set_entry(key, d[key], path, value, hints[key])
            else:
                d[key] = _coerce(key, value, hints[key])
        return type(self).from_dict(d)

    def fingerprint(self) -> dict:
        """The fields a checkpoint must agree on to be resumed under this config."""
        return {k: v for k, v in self.to_dict().items() if k not in self.RESUME_MUTABLE}

    def digest(self) -> str:
        """Short hash of :meth:`fingerprint`."""
        return hashlib.sha256(json.dumps(self.fingerprint(), sort_keys=True, default=str).encode()).hexdigest()[:16]


def override_value(raw: str, item: str, *, what: str = "override") -> Any:
    """The VALUE of a ``KEY=VALUE`` override ``item`` (``raw``) read as YAML: ``false`` → ``False``, ``0.5`` → ``0.5``,
    ``{a: 1}`` → a mapping, nothing → ``""``. A YAML error is one line naming the ``what`` and ``item``."""
    import yaml

    try:
        return yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        raise InvalidArgumentError(
            f"{what} {item!r}: {_yaml_problem(exc, line=False)} in the value; fix it, or quote it to pass "
            "a plain string"
        ) from None


def dataclass_from_mapping(cls: type[_T], d: Mapping[str, Any], *, what: str = "config key") -> _T:
    """``cls(**d)`` for a dataclass ``cls``, each value checked against its field's type (YAML's spellings
    accepted: ``1e-6`` for a float); an unknown key is one line naming it (as a ``what``) and the valid keys."""
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(d) - known)
    if unknown:
        raise InvalidArgumentError(f"unknown {what}(s) {unknown}; valid keys: {', '.join(sorted(known))}")
    hints = get_type_hints(cls)
    return cls(**{k: _coerce(k, v, hints[k]) for k, v in d.items()})


def _set_entry(key: str, mapping: Any, path: list[str], value: Any, hint: Any) -> dict:
    """``mapping`` with the entry at ``path`` set to ``value`` (``--set env_kwargs.filter_config.min_words=8``):
    the other entries kept, missing levels made; only a mapping field takes a dotted key."""
    if hint is not dict and "dict" not in str(hint):
        raise InvalidArgumentError(
            f"--set {key}.{'.'.join(path)}: {key} is not a mapping, so it has no entries; set it whole with {key}=VALUE"
        )
    if not all(path):
        raise InvalidArgumentError(f"--set {key}.{'.'.join(path)}: an empty name between dots; write {key}.NAME=VALUE")
    out = dict(mapping or {})
    level, where = out, key
    for name in path[:-1]:
        where = f"{where}.{name}"
        inner = level.get(name)
        if inner is None:
            inner = {}
        elif not isinstance(inner, dict):
            raise InvalidArgumentError(
                f"--set {key}.{'.'.join(path)}: {where} is {inner!r}, not a mapping; set {where}={{...}} instead"
            )
        inner = dict(inner)  # a copy: the config's own mapping is never changed in place
        level[name] = inner
        level = inner
    level[path[-1]] = value
    return out


def _yaml_problem(exc: Exception, *, line: bool = True) -> str:
    """``YAML syntax error at line 3, column 7: mapping values are not allowed here`` from a PyYAML error."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None and line else ""
    return f"YAML syntax error{where}: {problem}"


def _without_none(hint: Any) -> Any:
    """``X`` of an optional hint ``X | None`` / ``Optional[X]``; any other hint unchanged."""
    args = get_args(hint)
    if get_origin(hint) in (Union, UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return rest[0] if len(rest) == 1 else hint
    return hint


def _coerce(key: str, value: Any, hint: Any) -> Any:
    """``value`` read for the field ``key`` of type ``hint``: YAML's strings of numbers as numbers, numbers as
    strings where a string is wanted; a value of another kind (a list for a model name, ``abc`` or ``.inf`` for
    a count, ``null`` for a field that cannot be empty) is one error naming the field, before anything runs."""
    text = str(hint)
    if value is None:
        if "None" in text:
            return None
        raise InvalidArgumentError(f"{key} cannot be null")
    hint = _without_none(hint)
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise InvalidArgumentError(f"{key} expects true/false, got {value!r}")
    if hint in (int, float) and isinstance(value, str):  # YAML 1.1 reads "1e-6" as a string
        try:
            value = float(value)
        except ValueError:
            raise InvalidArgumentError(
                f"{key} expects {'an integer' if hint is int else 'a number'}, got {value!r}"
            ) from None
    if hint is int:
        whole = isinstance(value, int) or (isinstance(value, float) and math.isfinite(value) and value.is_integer())
        if isinstance(value, bool) or not whole:
            raise InvalidArgumentError(f"{key} expects an integer, got {value!r}")
        return int(value)
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InvalidArgumentError(f"{key} expects a number, got {value!r}")
        return float(value)
    if hint is dict and not isinstance(value, dict):
        raise InvalidArgumentError(f"{key} expects a mapping like {key}={{a: 1}}, got {value!r}")
    if hint is list and not isinstance(value, list):
        raise InvalidArgumentError(f"{key} expects a list like {key}=[a, b], got {value!r}")
    if hint is str and isinstance(value, (dict, list)):
        raise InvalidArgumentError(f"{key} expects a string, got {value!r}")
    if "str" in text and not isinstance(value, (str, dict, list)):
        return str(value)
    return value
