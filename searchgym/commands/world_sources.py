"""``searchgym world build --source wikidata|wikidata5m|flashrag|atlas``: the loader sources.

Each builder takes the parsed ``world build`` arguments and returns a World; they are registered
in :data:`searchgym.commands.world.WORLD_SOURCES` as ``"module:function"`` strings, so nothing here
is imported unless the source is chosen. :func:`add_loader_arguments` adds the options they
read (``--corpus``, ``--max-entities``, ``--on-error``, ``--max-cities``, ``--no-wiki-summaries``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import InvalidArgumentError, MissingFileError, SearchGymRuntimeError

__all__ = [
    "add_loader_arguments",
    "refuse_unused_loader_flags",
    "build_wikidata",
    "build_wikidata5m",
    "build_flashrag",
    "build_atlas_source",
]

#: loader flag (its ``args`` name, the flag, the value it has when not given) -> the built-in sources that read it
_LOADER_FLAGS = (
    ("max_cities", "--max-cities", None, ("atlas",)),
    ("wiki_summaries", "--no-wiki-summaries", True, ("atlas",)),
    ("max_entities", "--max-entities", None, ("wikidata",)),
)
_BUILTIN_SOURCES = ("synthetic", "wikidata", "wikidata5m", "flashrag", "atlas")


def add_loader_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of the real-data sources on ``world build``."""
    g = parser.add_argument_group("real-data sources (wikidata, wikidata5m, flashrag, atlas)")
    g.add_argument(
        "--corpus", metavar="JSONL", help="Search-R1/FlashRAG corpus to attach and link by title (wikidata, wikidata5m)"
    )
    g.add_argument("--max-entities", type=int, metavar="N", help="wikidata: stop after N items")
    g.add_argument(
        "--on-error",
        choices=("skip", "raise"),
        default="skip",
        help="malformed input lines: skip and count them (default) or stop with file:line",
    )
    g.add_argument("--max-cities", type=int, metavar="N", help="atlas: keep the N most populous cities (default 3000)")
    g.add_argument(
        "--no-wiki-summaries",
        dest="wiki_summaries",
        action="store_false",
        help="atlas: leave out the CC BY-SA Wikipedia summaries",
    )


def refuse_unused_loader_flags(args: argparse.Namespace) -> None:
    """Refuse a loader flag given with a built-in source that does not read it (``--max-cities 5`` with the
    synthetic source would otherwise be ignored without a word). A source registered by others is not checked:
    its builder may read any of them."""
    source = getattr(args, "source", None)
    if source not in _BUILTIN_SOURCES:
        return
    for name, flag, unset, readers in _LOADER_FLAGS:
        if getattr(args, name, unset) != unset and source not in readers:
            raise InvalidArgumentError(
                f"{flag} applies to --source {' or '.join(readers)} only, not --source {source}; drop it"
            )


def _reject_size_args(args: argparse.Namespace, source: str) -> None:
    if getattr(args, "entities", None) is not None or getattr(args, "scale", None) is not None:
        raise InvalidArgumentError(
            f"--entities/--scale size the synthetic world only; --source {source} reads its size from the input"
        )


_WIKIDATA5M_FILES = "wikidata5m_entity.txt, wikidata5m_relation.txt, *_triplet.txt and optionally wikidata5m_text.txt"


def _input(args: argparse.Namespace, source: str, what: str) -> Path:
    _reject_size_args(args, source)
    if not getattr(args, "input", None):
        raise InvalidArgumentError(f"--source {source} needs --input {what}")
    return Path(args.input)


def _corpus(args: argparse.Namespace) -> str | None:
    """The ``--corpus`` path, checked to exist before the (possibly hour-long) read of ``--input`` starts."""
    corpus = getattr(args, "corpus", None)
    if corpus and not Path(corpus).is_file():
        raise MissingFileError(
            f"--corpus {corpus}: no such file; give the path of a Search-R1/FlashRAG corpus (.jsonl, .jsonl.gz)"
        )
    return corpus


def _with_corpus(world, args: argparse.Namespace, corpus: str | None):
    if not corpus:
        return world
    from ..world.loaders.flashrag import load_flashrag_corpus

    return load_flashrag_corpus(corpus, world=world, on_error=args.on_error, progress=args.progress)


def build_wikidata(args: argparse.Namespace):
    """``--source wikidata --input latest-all.json.gz [--max-entities N] [--corpus corpus.jsonl]``."""
    from ..world.loaders.wikidata import load_wikidata_dump

    path = _input(args, "wikidata", "DUMP (latest-all.json[.gz|.bz2])")
    return load_wikidata_dump(
        path,
        max_entities=getattr(args, "max_entities", None),
        corpus=_corpus(args),
        on_error=args.on_error,
        progress=args.progress,
    )


def build_wikidata5m(args: argparse.Namespace):
    """``--source wikidata5m --input DIR [--corpus corpus.jsonl]``."""
    from ..world.loaders.wikidata5m import find_wikidata5m_files, load_wikidata5m

    path = _input(args, "wikidata5m", f"DIR (with {_WIKIDATA5M_FILES})")
    corpus = _corpus(args)
    try:  # a folder listing: refuse a wrong --input before anything is read
        find_wikidata5m_files(path)
    except MissingFileError:
        problem = "missing Wikidata5M files" if path.is_dir() else "no such folder"
        raise MissingFileError(
            f"--input {path}: {problem}; give the folder holding {_WIKIDATA5M_FILES} (each optionally .gz), "
            "or the wikidata5m_transductive_*.txt / wikidata5m_inductive_*.txt split files in place of *_triplet.txt"
        ) from None
    world = load_wikidata5m(path, on_error=args.on_error, progress=args.progress)
    return _with_corpus(world, args, corpus)


def build_flashrag(args: argparse.Namespace):
    """``--source flashrag --input corpus.jsonl``: a corpus-only world."""
    from ..world.loaders.flashrag import load_flashrag_corpus

    path = _input(args, "flashrag", "CORPUS (a Search-R1/FlashRAG .jsonl[.gz])")
    if getattr(args, "corpus", None):
        raise InvalidArgumentError("--source flashrag reads its corpus from --input; drop --corpus")
    return load_flashrag_corpus(path, on_error=args.on_error, progress=args.progress)


def build_atlas_source(args: argparse.Namespace):
    """``--source atlas [--max-cities N] [--no-wiki-summaries] [--seed S]``."""
    from ..world.atlas import DEFAULT_MAX_CITIES, build_atlas

    _reject_size_args(args, "atlas")
    if getattr(args, "input", None):
        raise InvalidArgumentError("--source atlas is built from installed packages; drop --input")
    max_cities = getattr(args, "max_cities", None)
    try:
        return build_atlas(
            include_wiki_summaries=getattr(args, "wiki_summaries", True),
            max_cities=DEFAULT_MAX_CITIES if max_cities is None else max_cities,
            seed=args.seed,
        )
    except ImportError as exc:  # the CLI reports RuntimeErrors as one clean line
        raise SearchGymRuntimeError(str(exc)) from exc
