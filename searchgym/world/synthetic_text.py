"""Sentence templates and word pools for the synthetic world's Wikipedia-like articles.

Each relation has several phrasings for the head entity's article (``HEAD_TEMPLATES``) and, for
the relations whose facts may be stated *only* in the tail entity's article, a list-style
phrasing for that article (``TAIL_TEMPLATES``: "People born in X include A and B."). Filler
sentences per entity kind pad the articles the way real encyclopedia prose surrounds facts.

Placeholders: ``{S}``/``{s}`` subject at sentence start / mid-sentence (a title or a pronoun such
as "She" / "the city"), ``{P}``/``{p}`` possessive ("Her" / "its"), ``{x}`` the head title, ``{t}``
the tail(s), ``{T}`` the tail title in tail-side sentences, ``{list}`` the heads listed there.
Filler also uses ``{adj}``, ``{noun}``, ``{n}``.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "FILLER_ADJECTIVES",
    "FILLER_NOUNS",
    "HEAD_TEMPLATES",
    "KIND_TEMPLATES",
    "TAIL_TEMPLATES",
    "FILLER",
    "SUBJECTS",
    "MONTHS",
    "TITLE_ADJECTIVES",
    "TITLE_NOUNS",
    "GENRES",
    "INDUSTRIES",
    "AWARD_FIELDS",
    "NICK_ADJECTIVES",
    "NICK_NOUNS",
    "REGION_FORMS",
    "join_names",
]

MONTHS = (
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

HEAD_TEMPLATES: dict[str, tuple[str, ...]] = {
    "P19": (
        "{S} was born in {t}.",
        "{S} was born and raised in {t}.",
        "Born in {t}, {s} grew up in modest circumstances.",
        "{P} birthplace was {t}.",
    ),
    "P20": ("{S} died in {t}.", "{S} spent {p} final years in {t}, where {s} died.", "{S} passed away in {t}."),
    "P27": (
        "{S} was a citizen of {t}.",
        "{S} held the citizenship of {t}.",
        "By nationality {s} was a subject of {t}.",
    ),
    "P569": ("{S} was born on {t}.", "{P} date of birth is recorded as {t}."),
    "P570": ("{S} died on {t}.", "{S} passed away on {t}."),
    "P69": (
        "{S} studied at {t}.",
        "{S} was educated at {t}.",
        "{S} received {p} education at {t}.",
        "After school, {s} enrolled at {t}.",
    ),
    "P108": ("{S} worked for {t}.", "{S} was employed by {t}.", "For several years {s} held a position at {t}."),
    "P463": ("{S} was a member of {t}.", "{S} joined {t}.", "{S} played in the band {t}."),
    "P54": ("{S} played for {t}.", "{S} was a member of the club {t}.", "During {p} career {s} played for {t}."),
    "P166": ("{S} received {t}.", "{S} was awarded {t}.", "Among {p} honours is {t}."),
    "P26": ("{S} was married to {t}.", "{P} spouse was {t}.", "{S} married {t}."),
    "P40": ("{P} children include {t}.", "{S} was the parent of {t}.", "{S} had a child, {t}."),
    "P22": ("{P} father was {t}.", "{S} was the child of {t}."),
    "P25": ("{P} mother was {t}.", "{S} was born to {t}."),
    "P1412": ("{S} spoke {t}.", "{S} wrote and spoke {t}."),
    "P1344": ("{S} took part in {t}.", "{S} participated in {t}.", "{S} was present at {t}."),
    "P131": ("{S} is located in {t}.", "{S} lies in {t}.", "Administratively, {s} belongs to {t}."),
    "P36": ("{P} capital is {t}.", "The capital of {x} is {t}.", "{S} is governed from {t}."),
    "P1376": ("{S} is the capital of {t}.", "{S} serves as the seat of {t}."),
    "P37": ("The official language of {x} is {t}.", "{P} official language is {t}."),
    "P1082": (
        "{S} has a population of {t}.",
        "As of the last census, {s} had {t} inhabitants.",
        "The population of {x} is {t}.",
    ),
    "P2046": ("{S} covers an area of {t} square kilometres.", "{P} area is {t} square kilometres."),
    "P571": ("{S} was founded in {t}.", "{S} was established in {t}.", "{P} history begins in {t}."),
    "P112": ("{S} was founded by {t}.", "{P} founder was {t}.", "{t} founded {x}."),
    "P159": ("{S} is headquartered in {t}.", "{P} headquarters are in {t}.", "{S} is based in {t}."),
    "P17": ("{S} is a national award of {t}.", "{S} is awarded in {t}."),
    "P740": ("{S} was formed in {t}.", "The band was founded in {t}."),
    "P35": ("{P} head of state is {t}.", "{t} serves as head of state of {x}."),
    "P6": ("The head of government of {x} is {t}.", "{t} is the mayor of {x}."),
    "P50": ("{S} was written by {t}.", "{S} is a work by the author {t}.", "The author of {x} is {t}."),
    "P123": ("{S} was published by {t}.", "{t} published {x}.", "{S} first appeared through {t}."),
    "P577": ("{S} was published in {t}.", "{S} was first released in {t}.", "{S} appeared in {t}."),
    "P57": ("{S} was directed by {t}.", "{t} directed {x}.", "The director of {x} is {t}."),
    "P161": ("The cast of {x} includes {t}.", "{S} stars {t}.", "Its cast features {t}."),
    "P144": ("{S} is based on the novel {t}.", "{S} was adapted from the novel {t}."),
    "P580": ("{S} began in {t}.", "Hostilities started in {t}."),
    "P582": ("{S} ended in {t}.", "The fighting came to an end in {t}."),
    "P175": ("{S} was recorded by {t}.", "{t} recorded {x}.", "{S} was performed by {t}."),
    "P495": ("{S} was produced in {t}.", "{P} country of origin is {t}."),
    "P170": ("{S} was painted by {t}.", "{S} is a work by the painter {t}.", "{t} created {x}."),
    "P195": ("{S} is held in the collection of {t}.", "{S} hangs in {t}.", "Today {s} belongs to {t}."),
    "P180": ("{S} depicts {t}.", "The painting shows {t}.", "{t} is the subject of {x}."),
    "P276": ("{S} took place in {t}.", "{S} was held in {t}.", "The location of {x} was {t}."),
    "P585": ("{S} took place on {t}.", "{S} happened on {t}.", "The date of {x} was {t}."),
    "P361": ("{S} was part of {t}.", "{S} was fought during {t}.", "{S} was an engagement of {t}."),
    "P710": ("The participants of {x} were {t}.", "{S} was fought between {t}."),
    "P1891": ("{S} was signed by {t}.", "The signatories of {x} were {t}."),
    "P664": ("{S} is organised by {t}.", "{t} organises {x}."),
    "P1027": ("{S} is conferred by {t}.", "{t} awards {x}.", "{S} is presented by {t}."),
    "P138": ("{S} is named after {t}.", "{S} honours the memory of {t}.", "The prize bears the name of {t}."),
}

#: Phrasings that replace ``HEAD_TEMPLATES`` for one kind of head entity.
KIND_TEMPLATES: dict[tuple[str, str], tuple[str, ...]] = {
    ("P577", "novel"): ("{S} was published in {t}.", "{S} first appeared in print in {t}."),
    ("P577", "film"): ("{S} was released in {t}.", "{S} premiered in {t}."),
    ("P577", "album"): ("{S} was released in {t}.", "{S} came out in {t}."),
    ("P577", "painting"): ("{S} was painted in {t}.", "{S} dates from {t}.", "{S} was completed in {t}."),
    ("P571", "band"): ("{S} was formed in {t}.", "The band got together in {t}."),
    ("P571", "club"): ("{S} was founded in {t}.", "The club was established in {t}."),
    ("P571", "festival"): ("{S} was first held in {t}.", "{S} has taken place since {t}."),
    ("P571", "country"): ("{S} was established as a state in {t}.", "{S} became independent in {t}."),
}

TAIL_TEMPLATES: dict[str, tuple[str, ...]] = {
    "P19": ("Notable people born in {T} include {list}.", "Among those born in {T} are {list}."),
    "P20": ("People who died in {T} include {list}.", "{T} was the place of death of {list}."),
    "P69": ("Notable alumni of {T} include {list}.", "Among the former students of {T} are {list}."),
    "P108": ("Notable employees of {T} have included {list}.", "{T} has employed {list}."),
    "P463": ("Members of {T} have included {list}.", "The line-up of {T} featured {list}."),
    "P54": ("Players of {T} have included {list}.", "Notable former players of {T} are {list}."),
    "P166": ("Recipients of {T} include {list}.", "{T} has been awarded to {list}."),
    "P1344": ("Participants in {T} included {list}.", "Among those who took part in {T} were {list}."),
    "P131": ("{T} contains {list}.", "Places in {T} include {list}."),
    "P159": ("Organisations based in {T} include {list}.", "{T} is home to {list}."),
    "P195": ("The collection of {T} includes {list}.", "Works held by {T} include {list}."),
}

SUBJECTS: dict[str, tuple[str, str, str, str]] = {
    # kind: (Subject at start, subject mid-sentence, Possessive at start, possessive mid)
    "country": ("The country", "the country", "Its", "its"),
    "region": ("The region", "the region", "Its", "its"),
    "city": ("The city", "the city", "Its", "its"),
    "language": ("The language", "the language", "Its", "its"),
    "university": ("The university", "the university", "Its", "its"),
    "company": ("The company", "the company", "Its", "its"),
    "publisher": ("The publisher", "the publisher", "Its", "its"),
    "museum": ("The museum", "the museum", "Its", "its"),
    "band": ("The band", "the band", "Its", "its"),
    "club": ("The club", "the club", "Its", "its"),
    "novel": ("The novel", "the novel", "Its", "its"),
    "film": ("The film", "the film", "Its", "its"),
    "album": ("The album", "the album", "Its", "its"),
    "painting": ("The painting", "the painting", "Its", "its"),
    "war": ("The war", "the war", "Its", "its"),
    "battle": ("The battle", "the battle", "Its", "its"),
    "festival": ("The festival", "the festival", "Its", "its"),
    "treaty": ("The treaty", "the treaty", "Its", "its"),
    "award": ("The award", "the award", "Its", "its"),
    "female": ("She", "she", "Her", "her"),
    "male": ("He", "he", "His", "his"),
}

_PLACE_FILLER = (
    "The climate of {s} is temperate.",
    "Winters in {x} are long and wet.",
    "{S} is known for its {adj} {noun}.",
    "Much of the surrounding land is farmland.",
    "Travellers often remark on the {adj} {noun} of {x}.",
    "A local festival celebrating the {noun} is held every autumn.",
    "The economy relies on trade, crafts and the {noun} industry.",
    "Several old {noun}s survive from earlier centuries.",
)
_PERSON_FILLER = (
    "Little is known about {p} early childhood.",
    "{S} was described by contemporaries as {adj} and reserved.",
    "In later life {s} took an interest in {noun}s.",
    "{S} often spoke of the influence of a {adj} {noun} on {p} work.",
    "Critics have debated {p} legacy for decades.",
    "{S} kept a diary for more than {n} years.",
)
_ORG_FILLER = (
    "{S} employs several hundred people.",
    "{S} grew steadily during its first {n} years.",
    "{P} emblem shows a {adj} {noun}.",
    "{S} has been reorganised several times.",
    "{S} is known for its {adj} {noun}.",
    "A history of {x} was published on its anniversary.",
)
_WORK_FILLER = (
    "Critics praised its {adj} atmosphere.",
    "The central motif of {s} is a {adj} {noun}.",
    "{S} received mixed reviews on its release.",
    "Scholars have compared {s} to earlier works about the {noun}.",
)
_PAINTING_FILLER = (
    "The canvas is dominated by {adj} colours.",
    "A {adj} {noun} appears in the background.",
    "{S} was restored after suffering damage.",
    "Art historians have compared {s} to earlier views of the {noun}.",
    "{S} measures roughly {n} by {n} inches.",
)
_EVENT_FILLER = (
    "Accounts of {s} differ in many details.",
    "Contemporary chroniclers described a {adj} {noun}.",
    "{S} is commemorated by a {noun} near the site.",
    "Historians still debate the significance of {x}.",
    "Around {n} thousand people are said to have been present.",
)
_AWARD_FILLER = (
    "The award consists of a medal shaped like a {adj} {noun}.",
    "{S} has been presented at irregular intervals.",
    "Nominations are made by a jury of {n} members.",
    "{S} is regarded as a {adj} distinction in its field.",
)

FILLER: dict[str, tuple[str, ...]] = {
    "country": _PLACE_FILLER,
    "region": _PLACE_FILLER,
    "city": _PLACE_FILLER,
    "language": (
        "{S} has several regional dialects.",
        "{S} is written in a {adj} script.",
        "Its vocabulary includes many words for the {noun}.",
    ),
    "person": _PERSON_FILLER,
    "university": _ORG_FILLER,
    "company": _ORG_FILLER,
    "publisher": _ORG_FILLER,
    "museum": _ORG_FILLER,
    "band": (
        "{S} toured widely in its early years.",
        "{P} early recordings were made in a {adj} {noun}.",
        "Critics have described {p} sound as {adj}.",
        "{S} went through several line-up changes.",
    ),
    "club": _ORG_FILLER,
    "novel": _WORK_FILLER,
    "film": _WORK_FILLER,
    "album": _WORK_FILLER,
    "painting": _PAINTING_FILLER,
    "war": _EVENT_FILLER,
    "battle": _EVENT_FILLER,
    "festival": _EVENT_FILLER,
    "treaty": _EVENT_FILLER,
    "award": _AWARD_FILLER,
}

FILLER_ADJECTIVES = (
    "mild",
    "harsh",
    "quiet",
    "bright",
    "weathered",
    "restless",
    "gentle",
    "stern",
    "lofty",
    "curious",
    "remarkable",
    "sombre",
    "vivid",
    "humble",
    "famous",
)
FILLER_NOUNS = (
    "bridge",
    "orchard",
    "harbour",
    "tower",
    "river",
    "market",
    "garden",
    "lantern",
    "mill",
    "archive",
    "chapel",
    "meadow",
    "forge",
    "gatehouse",
    "fountain",
)

TITLE_ADJECTIVES = (
    "Silent",
    "Crimson",
    "Hollow",
    "Distant",
    "Broken",
    "Golden",
    "Winter",
    "Pale",
    "Iron",
    "Burning",
    "Last",
    "Hidden",
    "Sleeping",
    "Amber",
    "Wandering",
    "Glass",
    "Northern",
    "Bitter",
    "Quiet",
    "Seventh",
)
TITLE_NOUNS = (
    "Harbour",
    "Lantern",
    "Orchard",
    "Tide",
    "Crown",
    "Garden",
    "Mirror",
    "Bridge",
    "River",
    "Tower",
    "Song",
    "Letter",
    "Meadow",
    "Shadow",
    "Forge",
    "Compass",
    "Feather",
    "Archive",
    "Bell",
    "Ember",
)
GENRES = ("folk", "jazz", "rock", "choral", "electronic", "brass", "chamber", "theatre", "film", "poetry")
INDUSTRIES = (
    "shipping",
    "textile",
    "mining",
    "railway",
    "brewing",
    "printing",
    "banking",
    "steel",
    "pharmaceutical",
    "glassworks",
    "timber",
    "instrument",
)
AWARD_FIELDS = {
    "literature": ("writer",),
    "physics": ("scientist",),
    "medicine": ("physician", "scientist"),
    "painting": ("painter",),
    "music": ("musician",),
    "film": ("film director", "actor"),
    "engineering": ("engineer",),
    "public service": ("politician", "military officer"),
    "sport": ("athlete",),
    "enterprise": ("businessperson",),
}
NICK_ADJECTIVES = ("Iron", "Silver", "Red", "Quiet", "Old", "Little", "Black", "Laughing", "Grey", "Wild")
NICK_NOUNS = ("Lark", "Baron", "Fox", "Widow", "Captain", "Owl", "Scholar", "Lion", "Poet", "Hammer")
REGION_FORMS = (
    "{w} Province",
    "{w} Region",
    "Upper {w}",
    "Lower {w}",
    "{w} Valley",
    "{w} Coast",
    "{w} Highlands",
    "{w} District",
)


def join_names(names: Sequence[str]) -> str:
    """English list: ``[]`` → ``""``, ``A``, ``A and B``, ``A, B and C``."""
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " and " + names[-1]
