"""Small Wikidata vocabularies the loaders need when a dump excerpt lacks them.

* :data:`PROPERTY_LABELS`: English labels of common properties, used when the dump has no
  property entity line for a property (the full dump has them all; excerpts usually do not).
* :data:`UNIT_LABELS`: English labels of common units of measurement for quantity values.
* :data:`CLASS_TYPES`: ``instance of`` (P31) classes → searchgym entity type; anything else is
  ``"other"``. Deliberately small: it covers the classes most entities of a KG-QA world belong to.
* :data:`MEDIA_PROPERTIES` and :data:`BOOKKEEPING_PROPERTIES`: the property ids of the default
  relation blocklist (together with every property of a blocked datatype, see
  :data:`DEFAULT_BLOCKED_DATATYPES`).
"""

from __future__ import annotations

from typing import Iterable

__all__ = [
    "PROPERTY_LABELS",
    "UNIT_LABELS",
    "CLASS_TYPES",
    "MEDIA_PROPERTIES",
    "BOOKKEEPING_PROPERTIES",
    "DEFAULT_BLOCKLIST",
    "DEFAULT_BLOCKED_DATATYPES",
    "type_from_classes",
]

PROPERTY_LABELS: dict[str, str] = {
    "P6": "head of government",
    "P17": "country",
    "P19": "place of birth",
    "P20": "place of death",
    "P21": "sex or gender",
    "P22": "father",
    "P25": "mother",
    "P26": "spouse",
    "P27": "country of citizenship",
    "P30": "continent",
    "P31": "instance of",
    "P35": "head of state",
    "P36": "capital",
    "P37": "official language",
    "P38": "currency",
    "P39": "position held",
    "P40": "child",
    "P47": "shares border with",
    "P50": "author",
    "P54": "member of sports team",
    "P57": "director",
    "P58": "screenwriter",
    "P61": "discoverer or inventor",
    "P69": "educated at",
    "P86": "composer",
    "P101": "field of work",
    "P102": "member of political party",
    "P103": "native language",
    "P106": "occupation",
    "P108": "employer",
    "P112": "founded by",
    "P127": "owned by",
    "P131": "located in the administrative territorial entity",
    "P136": "genre",
    "P140": "religion or worldview",
    "P150": "contains the administrative territorial entity",
    "P159": "headquarters location",
    "P161": "cast member",
    "P162": "producer",
    "P166": "award received",
    "P169": "chief executive officer",
    "P170": "creator",
    "P175": "performer",
    "P176": "manufacturer",
    "P178": "developer",
    "P184": "doctoral advisor",
    "P185": "doctoral student",
    "P189": "location of discovery",
    "P264": "record label",
    "P272": "production company",
    "P276": "location",
    "P279": "subclass of",
    "P361": "part of",
    "P355": "has subsidiary",
    "P403": "mouth of the watercourse",
    "P407": "language of work or name",
    "P449": "original broadcaster",
    "P452": "industry",
    "P463": "member of",
    "P495": "country of origin",
    "P527": "has part(s)",
    "P530": "diplomatic relation",
    "P551": "residence",
    "P569": "date of birth",
    "P570": "date of death",
    "P571": "inception",
    "P575": "time of discovery or invention",
    "P576": "dissolved, abolished or demolished date",
    "P577": "publication date",
    "P580": "start time",
    "P582": "end time",
    "P585": "point in time",
    "P710": "participant",
    "P737": "influenced by",
    "P749": "parent organization",
    "P800": "notable work",
    "P802": "student",
    "P1066": "student of",
    "P1082": "population",
    "P1128": "employees",
    "P1303": "instrument",
    "P1344": "participant in",
    "P1376": "capital of",
    "P1411": "nominated for",
    "P1412": "languages spoken, written or signed",
    "P1448": "official name",
    "P2044": "elevation above sea level",
    "P2046": "area",
    "P2048": "height",
    "P2067": "mass",
    "P2139": "total revenue",
}

UNIT_LABELS: dict[str, str] = {
    "Q11573": "metre",
    "Q828224": "kilometre",
    "Q174728": "centimetre",
    "Q174789": "millimetre",
    "Q3710": "foot",
    "Q253276": "mile",
    "Q25343": "square metre",
    "Q712226": "square kilometre",
    "Q35852": "hectare",
    "Q11570": "kilogram",
    "Q41803": "gram",
    "Q11574": "second",
    "Q7727": "minute",
    "Q25235": "hour",
    "Q573": "day",
    "Q577": "year",
    "Q1092296": "annum",
    "Q25267": "degree Celsius",
    "Q11579": "kelvin",
    "Q11229": "percent",
    "Q4917": "United States dollar",
    "Q4916": "euro",
}

# instance-of class → entity type (checked in the priority order of _TYPE_PRIORITY).
CLASS_TYPES: dict[str, str] = {
    # people
    "Q5": "person",
    # locations
    "Q515": "location",
    "Q1549591": "location",
    "Q1637706": "location",
    "Q5119": "location",
    "Q6256": "location",
    "Q3624078": "location",
    "Q486972": "location",
    "Q532": "location",
    "Q3957": "location",
    "Q15284": "location",
    "Q35657": "location",
    "Q107390": "location",
    "Q10864048": "location",
    "Q82794": "location",
    "Q5107": "location",
    "Q8502": "location",
    "Q4022": "location",
    "Q23397": "location",
    "Q23442": "location",
    "Q165": "location",
    # organisations
    "Q43229": "organisation",
    "Q4830453": "organisation",
    "Q783794": "organisation",
    "Q891723": "organisation",
    "Q3918": "organisation",
    "Q875538": "organisation",
    "Q902104": "organisation",
    "Q163740": "organisation",
    "Q7278": "organisation",
    "Q476028": "organisation",
    "Q2385804": "organisation",
    "Q327333": "organisation",
    "Q484652": "organisation",
    "Q31855": "organisation",
    "Q6881511": "organisation",
    # creative works
    "Q11424": "work",
    "Q7725634": "work",
    "Q571": "work",
    "Q482994": "work",
    "Q134556": "work",
    "Q7366": "work",
    "Q5398426": "work",
    "Q7889": "work",
    "Q3305213": "work",
    "Q47461344": "work",
    "Q2188189": "work",
    # events
    "Q1656682": "event",
    "Q198": "event",
    "Q178561": "event",
    "Q1190554": "event",
    # awards
    "Q618779": "award",
    "Q7191": "award",
    # concepts
    "Q151885": "concept",
}

_TYPE_PRIORITY = ("person", "organisation", "location", "work", "event", "award", "concept")

MEDIA_PROPERTIES: frozenset[str] = frozenset(
    {
        "P10",  # video
        "P14",  # traffic sign
        "P18",  # image
        "P41",  # flag image
        "P51",  # audio
        "P94",  # coat of arms image
        "P109",  # signature
        "P154",  # logo image
        "P158",  # seal image
        "P242",  # locator map image
        "P443",  # pronunciation audio
        "P948",  # page banner
        "P989",  # spoken text audio
        "P990",  # audio recording of the subject's spoken voice
        "P1442",  # image of grave
        "P1766",  # place name sign
        "P1801",  # commemorative plaque image
        "P1846",  # distribution map
        "P1943",  # location map
        "P1944",  # plan view image
        "P2716",  # collage image
        "P2910",  # icon
        "P3383",  # film poster
        "P3451",  # nighttime view
        "P4291",  # panoramic view
        "P5775",  # image of interior
        "P6802",  # related image
        "P8592",  # aerial view
    }
)

BOOKKEEPING_PROPERTIES: frozenset[str] = frozenset(
    {
        "P301",  # category's main topic
        "P360",  # is a list of
        "P373",  # Commons category
        "P646",  # Freebase ID
        "P856",  # official website
        "P910",  # topic's main category
        "P935",  # Commons gallery
        "P971",  # category combines topics
        "P973",  # described at URL
        "P1151",  # topic's main Wikimedia portal
        "P1204",  # Wikimedia portal's main topic
        "P1343",  # described by source
        "P1423",  # template's main topic
        "P1424",  # topic's main template
        "P1464",  # category for people born here
        "P1465",  # category for people who died here
        "P1472",  # Commons Creator page
        "P1612",  # Commons Institution page
        "P1687",  # Wikidata property
        "P1740",  # category for films shot at this location
        "P1753",  # list related to category
        "P1791",  # category of people buried here
        "P1792",  # category of associated people
        "P1889",  # different from
        "P2184",  # history of topic
        "P2302",  # property constraint
        "P2633",  # geography of topic
        "P3876",  # category for alumni of educational institution
        "P4224",  # category contains
        "P5008",  # on focus list of Wikimedia project
        "P5125",  # Wikimedia outline
        "P6104",  # maintained by WikiProject
        "P7084",  # related category
        "P8408",  # KBpedia ID
        "P8744",  # economy of topic
    }
)

DEFAULT_BLOCKLIST: frozenset[str] = MEDIA_PROPERTIES | BOOKKEEPING_PROPERTIES

# Datatypes never turned into triples by default: identifiers, media, links and formats that are
# not facts a searcher can state in words.
DEFAULT_BLOCKED_DATATYPES: frozenset[str] = frozenset(
    {
        "external-id",
        "commonsMedia",
        "url",
        "geo-shape",
        "tabular-data",
        "math",
        "musical-notation",
        "wikibase-lexeme",
        "wikibase-form",
        "wikibase-sense",
        "wikibase-property",
        "entity-schema",
    }
)


def type_from_classes(classes: Iterable[str]) -> str:
    """Coarse entity type from the ids of an entity's ``instance of`` classes (``"other"`` if none match)."""
    found = {CLASS_TYPES[c] for c in classes if c in CLASS_TYPES}
    for t in _TYPE_PRIORITY:
        if t in found:
            return t
    return "other"
