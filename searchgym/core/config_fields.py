"""Help text of config dataclass fields, read from ``field(metadata={"help": ...})`` (as TRL's configs do).

Every field of a config users set carries one sentence of help: what it does, its unit, when to change it.
:func:`config_fields` reads them; :func:`fields_help_text` renders them for a command's ``--help``
(``searchgym train --help`` lists every ``--set`` key) and :func:`fields_markdown` as the tables of
docs/config.md (written by ``python docs/gen_config.py``).
"""

from __future__ import annotations

import dataclasses
import textwrap
from dataclasses import dataclass
from typing import Any

__all__ = ["FieldHelp", "config_fields", "fields_help_text", "fields_markdown", "missing_help"]


@dataclass(frozen=True)
class FieldHelp:
    """One config field as the docs show it: its name, type and default as text, and its help sentence."""

    name: str
    type: str
    default: str
    help: str


def _type_text(tp: Any) -> str:
    """``int | None`` for an annotation (a string under ``from __future__ import annotations``, else a type)."""
    if isinstance(tp, str):
        return tp
    return getattr(tp, "__name__", str(tp))


def _value_text(value: Any) -> str:
    """A default spelled as in a YAML config file: ``null``, ``true``, ``[q_proj, k_proj]``, ``{}``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value) if isinstance(value, (set, frozenset)) else value
        return "[" + ", ".join(_value_text(v) for v in items) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_value_text(v)}" for k, v in value.items()) + "}"
    return str(value)


def _default_text(f: dataclasses.Field) -> str:
    if f.default is not dataclasses.MISSING:
        return _value_text(f.default)
    if f.default_factory is not dataclasses.MISSING:
        return _value_text(f.default_factory())
    return "(required)"


def config_fields(cls: type) -> list[FieldHelp]:
    """The fields of the dataclass ``cls`` in declaration order, with their help (``""`` when a field has none)."""
    return [
        FieldHelp(f.name, _type_text(f.type), _default_text(f), str(f.metadata.get("help", "")).strip())
        for f in dataclasses.fields(cls)
        if f.init
    ]


def missing_help(cls: type) -> list[str]:
    """Names of the fields of ``cls`` without help text (a test keeps this empty for every user-set config)."""
    return [f.name for f in config_fields(cls) if not f.help]


def fields_help_text(cls: type, title: str, *, width: int = 100) -> str:
    """``title`` and one entry per field (``name (type, default X)`` then its help, indented) for an argparse
    epilog printed as written (``formatter_class=argparse.RawDescriptionHelpFormatter``)."""
    lines = [f"{title}:"]
    for f in config_fields(cls):
        lines.append(f"  {f.name} ({f.type}, default {f.default})")
        lines.extend(textwrap.wrap(f.help, width=width, initial_indent=" " * 6, subsequent_indent=" " * 6))
    return "\n".join(lines)


def fields_markdown(cls: type) -> str:
    """A Markdown table of the fields of ``cls``: field, type, default, help."""
    rows = ["| field | type | default | help |", "|---|---|---|---|"]
    for f in config_fields(cls):
        cells = (f"`{f.name}`", f"`{f.type}`", f"`{f.default}`", f.help)
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(rows)
