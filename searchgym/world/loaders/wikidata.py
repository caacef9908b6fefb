"""Wikidata JSON dump → :class:`~searchgym.world.World`, streamed in bounded memory.

Reads ``latest-all.json`` (or ``.json.gz`` / ``.json.bz2`` / ``.json.xz``): a JSON array with one
entity per line, each line ending with ``,``, the first line ``[`` and the last ``]``. Lines are
decoded one at a time, so the dump itself is never held in memory (only the world being built).

What becomes what:

* **Items** (``Q…``) become entities: the label in the first of ``languages`` that has one is the
  title, aliases of every listed language are aliases, the description is the description. The
  Wikipedia article titles (``enwiki`` sitelinks) are aliases too, so corpora titled by article
  link to items. The coarse type comes from ``instance of`` (P31) through a small class table (human → person,
  city/country/... → location, company/university/... → organisation, film/book/... → work, ...;
  otherwise ``other``). Items without a label in ``languages`` are dropped (counted).
* **Claims** (best-rank and normal-rank statements; deprecated ones are skipped):
  item-valued → entity triple; time-valued → date literal normalised by precision
  (``+1952-03-11T00:00:00Z`` → ``11 March 1952`` at day precision, ``March 1952``, ``1952``,
  ``1950s``, ``20th century``, ``-0500`` → ``500 BC``); quantity-valued → quantity literal
  (``+8000000`` → ``8000000``, with the unit's label: ``8848 metre``); string and
  monolingual-text values only with ``include_strings=True``. ``somevalue``/``novalue`` snaks are
  skipped. Triples to items not in the dump (or beyond ``max_entities``) are dropped and counted
  (``triple_to_missing_item``).
* **Properties** (``P…`` lines) give relation labels; properties the dump does not contain get
  their label from a built-in table of common properties, else the property id.
* **Corpus**: one short document per item with a description (``"Paris: capital of France. Also
  known as City of Light."``), linked to the item, unless ``corpus=`` names a Search-R1/FlashRAG
  JSONL corpus, which is then attached and linked by title instead.

Default relation blocklist (``relation_blocklist=DEFAULT_BLOCKLIST``): every claim whose datatype is
in :data:`~.wikidata_tables.DEFAULT_BLOCKED_DATATYPES` (``external-id``, ``commonsMedia``, ``url``,
``geo-shape``, ``tabular-data``, ``math``, ``musical-notation``, lexeme/form/sense/property values),
media properties (P18 image, P41 flag image, P94 coat of arms image, P154 logo image, P10 video,
P51 audio, P443 pronunciation audio, P242 locator map image, P109 signature, ...) and bookkeeping
properties (P373 Commons category, P910 topic's main category, P1343 described by source,
P935 Commons gallery, P646 Freebase ID, P8408 KBpedia ID, P856 official website, P1889 different
from, category/portal/template links, ...). ``instance of`` (P31) and ``subclass of`` (P279) are
kept. The full lists are :data:`~.wikidata_tables.MEDIA_PROPERTIES` and
:data:`~.wikidata_tables.BOOKKEEPING_PROPERTIES`. A claim is kept iff its property is in
``relation_allowlist`` (when one is given), not in ``relation_blocklist`` and its datatype is not
in ``blocked_datatypes``.

Malformed lines (bad JSON, not an entity object, missing ``id``/``type``, malformed claims or
values) are logged with ``file:line``, counted in ``world.metadata["load_report"]`` and skipped
(``on_error="skip"``) or raise :class:`~.common.LoaderError` (``on_error="raise"``).
"""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path
from typing import Iterable, Optional, Union

from ...errors import InvalidArgumentError, SearchGymError
from ..model import Literal
from ..world import World, WorldBuilder
from .common import LoadReport, check_on_error, iter_lines
from .wikidata_tables import (
    DEFAULT_BLOCKED_DATATYPES,
    DEFAULT_BLOCKLIST,
    PROPERTY_LABELS,
    UNIT_LABELS,
    type_from_classes,
)

logger = logging.getLogger(__name__)

# a buffered triple tail: an entity id, a Literal, or a quantity (amount dict, unit id) labelled at build time
_Tail = Union[str, Literal, tuple[dict, Optional[str]]]

__all__ = [
    "load_wikidata_dump",
    "description_document",
    "format_wikidata_time",
    "format_wikidata_quantity",
    "WikidataParseError",
]

_TIME_RE = re.compile(r"^([+-])(\d+)-(\d\d)-(\d\d)T")
_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_UNIT_HINT_PROPERTIES = (
    "P5061",
    "P2370",
    "P2442",
    "P111",
)  # unit symbol, conversion to SI/standard unit, measured quantity
_ENTITY_URI = "http://www.wikidata.org/entity/"


class WikidataParseError(SearchGymError, ValueError):
    """One entity line has a malformed part; the message says which (the loader adds file:line)."""


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def format_wikidata_time(value: dict) -> str:
    """Human form of a Wikidata time value, honouring its precision.

    ``{"time": "+1952-03-11T00:00:00Z", "precision": 11}`` → ``"11 March 1952"``; precision 10 →
    ``"March 1952"``, 9 → ``"1952"``, 8 → ``"1950s"``, 7 → ``"20th century"``, 6 → ``"2nd
    millennium"``; coarser precisions give the year. Negative years read ``"500 BC"``. Missing
    month/day parts (``00``) fall back to the coarser form. Raises :class:`WikidataParseError` on a
    malformed value.
    """
    if not isinstance(value, dict) or not isinstance(value.get("time"), str):
        raise WikidataParseError(f"time value without a 'time' string: {value!r}")
    m = _TIME_RE.match(value["time"])
    if not m:
        raise WikidataParseError(f"malformed time {value['time']!r} (expected e.g. '+1952-03-11T00:00:00Z')")
    precision = value.get("precision", 11)
    if not isinstance(precision, int):
        raise WikidataParseError(f"time precision must be an integer, got {precision!r}")
    sign, year, month, day = m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4))
    bc = sign == "-"
    era = " BC" if bc else ""
    if precision >= 11 and month and day:
        return f"{day} {_MONTHS[month - 1]} {year}{era}" if 1 <= month <= 12 else f"{year}{era}"
    if precision >= 10 and 1 <= month <= 12:
        return f"{_MONTHS[month - 1]} {year}{era}"
    if precision == 8:
        return f"{year // 10 * 10}s{era}"
    if precision == 7:
        return f"{_ordinal(max(1, (year - 1) // 100 + 1))} century{era}"
    if precision == 6:
        return f"{_ordinal(max(1, (year - 1) // 1000 + 1))} millennium{era}"
    return f"{year}{era}"


def format_wikidata_quantity(value: dict, unit_label: str | None = None) -> str:
    """Human form of a Wikidata quantity: the amount without its ``+`` sign, then the unit label.

    ``{"amount": "+8000000", "unit": "1"}`` → ``"8000000"``; with unit label ``"metre"`` →
    ``"8000000 metre"``. Raises :class:`WikidataParseError` when the amount is not a number.
    """
    if not isinstance(value, dict) or not isinstance(value.get("amount"), str):
        raise WikidataParseError(f"quantity value without an 'amount' string: {value!r}")
    amount = value["amount"].lstrip("+")
    try:
        float(amount)
    except ValueError:
        raise WikidataParseError(f"quantity amount {value['amount']!r} is not a number") from None
    return f"{amount} {unit_label}" if unit_label else amount


def description_document(label: str, description: str, aliases: Iterable[str] = ()) -> str:
    """The short corpus document made from an entity description (Wikidata and Wikidata5M-less
    dumps have no article text): ``"Paris: capital of France. Also known as City of Light."``"""
    text = f"{label}: {description.rstrip('.')}."
    others = [a for a in dict.fromkeys(aliases) if a != label]
    if others:
        text += " Also known as " + ", ".join(others) + "."
    return text


def _unit_id(value: dict) -> str | None:
    unit = value.get("unit", "1")
    if not isinstance(unit, str):
        raise WikidataParseError(f"quantity unit must be a string, got {unit!r}")
    if unit == "1":
        return None
    return unit[len(_ENTITY_URI) :] if unit.startswith(_ENTITY_URI) else unit


def _first_text(block: object, languages: tuple[str, ...], what: str) -> str:
    if block is None:
        return ""
    if not isinstance(block, dict):
        raise WikidataParseError(f"'{what}' must be an object keyed by language")
    for lang in languages:
        entry = block.get(lang)
        if entry is not None:
            if not isinstance(entry, dict) or not isinstance(entry.get("value"), str):
                raise WikidataParseError(f"'{what}.{lang}' has no 'value' string")
            return entry["value"]
    return ""


def _aliases(block: object, languages: tuple[str, ...]) -> list[str]:
    if block is None:
        return []
    if not isinstance(block, dict):
        raise WikidataParseError("'aliases' must be an object keyed by language")
    out: list[str] = []
    for lang in languages:
        entries = block.get(lang, [])
        if not isinstance(entries, list):
            raise WikidataParseError(f"'aliases.{lang}' must be a list")
        for e in entries:
            if not isinstance(e, dict) or not isinstance(e.get("value"), str):
                raise WikidataParseError(f"an alias in 'aliases.{lang}' has no 'value' string")
            out.append(e["value"])
    return out


def _sitelink_titles(block: object, languages: tuple[str, ...]) -> list[str]:
    """Wikipedia article titles (``enwiki`` etc.) of the item: aliases that let corpora whose
    documents are titled by Wikipedia article (Search-R1's wiki-18) link to the item."""
    if not isinstance(block, dict):
        return []
    out = []
    for lang in languages:
        link = block.get(f"{lang}wiki")
        if isinstance(link, dict) and isinstance(link.get("title"), str) and link["title"]:
            out.append(link["title"])
    return out


class _DumpReader:
    """State of one streamed load: the builder, buffered triples, property and unit labels."""

    def __init__(
        self,
        *,
        name: str,
        languages: tuple[str, ...],
        allowlist: frozenset[str] | None,
        blocklist: frozenset[str],
        blocked_datatypes: frozenset[str],
        include_strings: bool,
        description_docs: bool,
        report: LoadReport,
    ) -> None:
        self.description_docs = description_docs
        self.languages = languages
        self.allowlist = allowlist
        self.blocklist = blocklist
        self.blocked_datatypes = blocked_datatypes
        self.include_strings = include_strings
        self.report = report
        self.builder = WorldBuilder(name)
        self.property_labels: dict[str, str] = {}
        self.unit_labels: dict[str, str] = {}
        self.units_used: set[str] = set()
        self.relation_order: dict[str, None] = {}
        # Triples are buffered until every property label is known (property lines may come last).
        self.heads: list[str] = []
        self.props: list[str] = []
        self.tails: list[_Tail] = []
        self.items = 0

    # ---------------------------------------------------------------- lines
    def line(self, path: Path, lineno: int, text: str) -> None:
        """Parse one dump line; malformed lines go to the report."""
        s = text.strip()
        if s.endswith(","):
            s = s[:-1].rstrip()
        if s in ("", "[", "]"):
            return
        try:
            obj = json.loads(s)
        except json.JSONDecodeError as exc:
            self.report.bad_line(path, lineno, f"bad JSON ({exc.msg} at column {exc.colno})", kind="bad JSON")
            return
        try:
            self.entity(obj)
        except WikidataParseError as exc:
            self.report.bad_line(path, lineno, str(exc), kind="malformed entity")

    def entity(self, obj: object) -> None:
        """Add one decoded entity object (item or property); raises WikidataParseError if malformed."""
        if not isinstance(obj, dict):
            raise WikidataParseError(f"expected an entity object, got {type(obj).__name__}")
        eid, etype = obj.get("id"), obj.get("type")
        if not isinstance(eid, str) or not eid:
            raise WikidataParseError("entity has no 'id'")
        if not isinstance(etype, str):
            raise WikidataParseError(f"entity {eid} has no 'type'")
        label = _first_text(obj.get("labels"), self.languages, "labels")
        if etype == "property":
            if label:
                self.property_labels[eid] = label
            self.report.counts["properties"] += 1
            return
        if etype != "item":
            self.report.drop(f"{etype}_entity")
            return
        if self.builder.has_entity(eid):
            raise WikidataParseError(f"duplicate entity {eid} (already read from an earlier line)")
        claims = obj.get("claims", {})
        if not isinstance(claims, dict):
            raise WikidataParseError(f"entity {eid}: 'claims' must be an object keyed by property")
        aliases = _aliases(obj.get("aliases"), self.languages) + _sitelink_titles(obj.get("sitelinks"), self.languages)
        description = _first_text(obj.get("descriptions"), self.languages, "descriptions")
        parsed, classes = self.claims(eid, claims)
        if not label:
            self.report.drop("item_without_label")
            return
        if eid in self.units_used or any(p in claims for p in _UNIT_HINT_PROPERTIES):
            self.unit_labels[eid] = label
        self.builder.add_entity(eid, label, aliases, description, type_from_classes(classes))
        if self.description_docs and description:
            self.builder.add_document(eid, label, description_document(label, description, aliases), entity=eid)
        for pid, tail in parsed:
            self.relation_order.setdefault(pid, None)
            self.heads.append(eid)
            self.props.append(pid)
            self.tails.append(tail)
        self.items += 1

    def claims(self, eid: str, claims: dict) -> tuple[list[tuple[str, _Tail]], list[str]]:
        """Kept (property, tail) pairs of one item, and its ``instance of`` classes."""
        out: list[tuple[str, _Tail]] = []
        classes: list[str] = []
        for pid, statements in claims.items():
            if not isinstance(statements, list):
                raise WikidataParseError(f"entity {eid}: claims of {pid} must be a list")
            allowed = (self.allowlist is None or pid in self.allowlist) and pid not in self.blocklist
            if not allowed and pid != "P31":  # P31 is still read for the entity type
                self.report.drop("blocked_property", len(statements))
                continue
            for st in statements:
                if not isinstance(st, dict) or not isinstance(st.get("mainsnak"), dict):
                    raise WikidataParseError(f"entity {eid}: a {pid} statement has no 'mainsnak'")
                if st.get("rank") == "deprecated":
                    continue
                snak = st["mainsnak"]
                if snak.get("snaktype", "value") != "value":
                    continue
                tail = self.value(eid, pid, snak)
                if pid == "P31" and isinstance(tail, str):
                    classes.append(tail)
                if tail is None:
                    continue
                if not allowed:
                    self.report.drop("blocked_property")
                    continue
                out.append((pid, tail))
        return out, classes

    def value(self, eid: str, pid: str, snak: dict) -> _Tail | None:
        """The tail a snak stands for, or None when its datatype/value type is not kept."""
        datatype = snak.get("datatype")
        dv = snak.get("datavalue")
        if not isinstance(dv, dict) or "type" not in dv or "value" not in dv:
            raise WikidataParseError(f"entity {eid}: a {pid} value snak has no 'datavalue' with 'type' and 'value'")
        vtype, v = dv["type"], dv["value"]
        if datatype in self.blocked_datatypes:
            self.report.drop(f"blocked_datatype:{datatype}")
            return None
        if vtype == "wikibase-entityid":
            if not isinstance(v, dict):
                raise WikidataParseError(f"entity {eid}: {pid} entity value must be an object")
            if v.get("entity-type", "item") != "item":
                self.report.drop("non_item_value")
                return None
            target = v.get("id")
            if target is None and isinstance(v.get("numeric-id"), int):
                target = f"Q{v['numeric-id']}"
            if not isinstance(target, str):
                raise WikidataParseError(f"entity {eid}: {pid} entity value has no 'id'")
            return target
        try:
            if vtype == "time":
                return Literal(format_wikidata_time(v), "date")
            if vtype == "quantity":
                format_wikidata_quantity(v)  # validate now, label the unit later
                unit = _unit_id(v)
                if unit is not None:
                    self.units_used.add(unit)
                return (v, unit)
        except WikidataParseError as exc:
            raise WikidataParseError(f"entity {eid}: {pid}: {exc}") from None
        if not self.include_strings:
            self.report.drop(f"value_type:{vtype}")
            return None
        if vtype == "string" and isinstance(v, str):
            return Literal(v, "string") if v else None
        if vtype == "monolingualtext" and isinstance(v, dict):
            if v.get("language") in self.languages and isinstance(v.get("text"), str) and v["text"]:
                return Literal(v["text"], "string")
            return None
        self.report.drop(f"value_type:{vtype}")
        return None

    # -------------------------------------------------------------- finish
    def build(self) -> World:
        """Register relations with their final labels, resolve quantity units, build the world."""
        b = self.builder
        # Triples to items that are not in the dump (or beyond max_entities) are dropped here, so
        # relations that only had such triples do not appear in the world.
        keep = [isinstance(t, (tuple, Literal)) or b.has_entity(t) for t in self.tails]
        if not all(keep):
            self.report.drop("triple_to_missing_item", keep.count(False))
        used = {p for p, k in zip(self.props, keep) if k}
        for pid in self.relation_order:
            if pid in used:
                b.add_relation(pid, self.property_labels.get(pid) or PROPERTY_LABELS.get(pid) or pid)
        for h, p, t, k in zip(self.heads, self.props, self.tails, keep):
            if not k:
                continue
            if isinstance(t, tuple):
                value, unit = t
                label = None
                if unit is not None:
                    label = self.unit_labels.get(unit) or UNIT_LABELS.get(unit) or unit
                t = Literal(format_wikidata_quantity(value, label), "quantity")
            b.add_triple(h, p, t)
        self.heads, self.props, self.tails = [], [], []
        return b.build(drop_dangling=True)


def load_wikidata_dump(
    path: str | os.PathLike,
    *,
    max_entities: int | None = None,
    languages: Iterable[str] = ("en",),
    relation_allowlist: Iterable[str] | None = None,
    relation_blocklist: Iterable[str] = DEFAULT_BLOCKLIST,
    blocked_datatypes: Iterable[str] = DEFAULT_BLOCKED_DATATYPES,
    include_strings: bool = False,
    corpus: str | os.PathLike | None = None,
    on_error: str = "skip",
    progress: bool = False,
    name: str | None = None,
) -> World:
    """Stream a Wikidata JSON dump (plain, ``.gz``, ``.bz2`` or ``.xz``) into a :class:`World`.

    ``max_entities`` stops after that many items (property lines do not count); ``languages`` is
    the label/description preference order (aliases of all of them are kept). See the module
    docstring for the relation filters and the value conversions. ``corpus`` replaces the
    description corpus with a Search-R1/FlashRAG JSONL corpus linked by title. The load report
    (lines, malformed lines with file:line, dropped records by reason, counts) is
    ``world.metadata["load_report"]``.
    """
    check_on_error(on_error)
    langs = tuple(languages)
    if not langs:
        raise InvalidArgumentError("languages must name at least one language code, e.g. ('en',)")
    if max_entities is not None and max_entities < 1:
        raise InvalidArgumentError(f"max_entities must be a positive integer or None, got {max_entities!r}")
    p = Path(path)
    report = LoadReport(source="wikidata", on_error=on_error)
    reader = _DumpReader(
        name=name or "wikidata",
        languages=langs,
        allowlist=frozenset(relation_allowlist) if relation_allowlist is not None else None,
        blocklist=frozenset(relation_blocklist),
        blocked_datatypes=frozenset(blocked_datatypes),
        include_strings=include_strings,
        description_docs=corpus is None,
        report=report,
    )
    for lineno, text in iter_lines(p, report, progress=progress, desc="wikidata dump"):
        reader.line(p, lineno, text)
        if max_entities is not None and reader.items >= max_entities:
            report.counts["stopped_at_max_entities"] = 1
            break
    world = reader.build()
    report.attach(world, reader.builder.dropped, p)
    report.check_usable(p, world.num_entities, "entities")
    logger.info("%s", report.summary())
    if corpus is not None:
        from .flashrag import load_flashrag_corpus

        world = load_flashrag_corpus(corpus, world=world, on_error=on_error, progress=progress)
    return world
