"""``searchgym world build|stats``: build a world from a named source, save it, describe it.

``world build --source NAME`` dispatches through :data:`WORLD_SOURCES`, a registry mapping a source
name to a builder. A builder is a callable ``builder(args) -> World`` taking the parsed command
line (``args.input``, ``args.seed``, ``args.entities``, ``args.scale``, ``args.progress``), or a
``"module:function"`` string naming one, imported only when that source is chosen (so adding a
heavy loader does not slow the CLI down). Other areas add their sources with
:func:`register_source` or a one-line entry in :data:`WORLD_SOURCES`.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import time
from typing import TYPE_CHECKING, Callable, Union

from ..core.artefacts import check_output, folder_kind
from ..core.path_errors import refuse_empty_path
from ..core.renamed import add_renamed_flag
from ..errors import InvalidArgumentError
from ..world.synthetic_config import MAX_ENTITIES, MIN_ENTITIES
from .number_checks import refuse_bad_numbers

if TYPE_CHECKING:
    from ..world.world import World

logger = logging.getLogger(__name__)

__all__ = ["WORLD_SOURCES", "register_source", "register", "build_synthetic", "format_stats"]

Builder = Callable[[argparse.Namespace], "World"]


def build_synthetic(args: argparse.Namespace) -> World:
    """Builder of the ``synthetic`` source: the embedded fictional world, sized by
    ``--entities`` (exact count) or ``--scale`` (multiple of the default size)."""
    from ..world.synthetic import SyntheticConfig, generate_world

    for option in ("input", "corpus"):
        if getattr(args, option, None):
            raise InvalidArgumentError(f"--{option} is not used by --source synthetic; drop it or pick a loader source")
    entities, scale = getattr(args, "entities", None), getattr(args, "scale", None)
    if entities is not None:
        config = SyntheticConfig.for_entities(entities)
    elif scale is not None:
        config = SyntheticConfig().scaled(scale)
    else:
        config = SyntheticConfig()
    return generate_world(config, seed=args.seed, progress=getattr(args, "progress", False))


#: source name → builder callable, or ``"module:function"`` resolved on use.
WORLD_SOURCES: dict[str, Union[Builder, str]] = {
    "synthetic": build_synthetic,
    "wikidata": "searchgym.commands.world_sources:build_wikidata",
    "wikidata5m": "searchgym.commands.world_sources:build_wikidata5m",
    "flashrag": "searchgym.commands.world_sources:build_flashrag",
    "atlas": "searchgym.commands.world_sources:build_atlas_source",
}


def register_source(name: str, builder: Union[Builder, str]) -> None:
    """Make ``searchgym world build --source name`` call ``builder(args)``."""
    if not name or not name.replace("-", "").replace("_", "").isalnum():
        raise InvalidArgumentError(f"source name must be alphanumeric (with - or _), got {name!r}")
    WORLD_SOURCES[name] = builder


def _resolve(name: str) -> Builder:
    try:
        builder = WORLD_SOURCES[name]
    except KeyError:
        raise InvalidArgumentError(f"unknown world source {name!r}; choose one of {sorted(WORLD_SOURCES)}") from None
    if isinstance(builder, str):
        module, _, func = builder.partition(":")
        if not func:
            raise InvalidArgumentError(
                f"world source {name!r} is registered as {builder!r}; expected 'module:function'"
            )
        builder = getattr(importlib.import_module(module), func)
    return builder


def format_stats(stats) -> str:
    """Human-readable multi-line rendering of a :class:`~searchgym.world.model.WorldStats`."""
    lines = [
        f"world        {stats.name}",
        f"entities     {stats.entities:,}",
        f"relations    {stats.relations:,}",
        f"triples      {stats.triples:,}  ({stats.literal_triples:,} with a literal tail)",
        f"documents    {stats.documents:,}  ({stats.linked_documents:,} linked to an entity)",
        f"out-degree   mean {stats.mean_out_degree:.2f}, max {stats.max_out_degree:,}",
        "entity types",
    ]
    lines += [f"  {t:<14} {n:>10,}" for t, n in stats.entity_types.items()]
    lines.append("top relations")
    lines += [f"  {label:<40} {n:>10,}" for label, n in stats.top_relations]
    return "\n".join(lines)


def _add_size_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seed", type=int, default=0, help="random seed (same seed, same world; default 0)")
    size = p.add_mutually_exclusive_group()
    size.add_argument(
        "--entities",
        type=int,
        metavar="N",
        help=f"synthetic world with exactly N entities ({MIN_ENTITIES:,} to {MAX_ENTITIES:,})",
    )
    size.add_argument(
        "--scale",
        type=float,
        metavar="X",
        help=f"synthetic world X times the default size (~2,850; at most {MAX_ENTITIES:,} entities)",
    )


def _refuse_stats_size_args(args: argparse.Namespace) -> None:
    """``world stats DIR`` describes a saved world: the sizing flags of ``--synthetic`` would be ignored."""
    given = [flag for flag, value in (("--entities", args.entities), ("--scale", args.scale)) if value is not None]
    if args.seed != 0:
        given.append("--seed")
    if given:
        raise InvalidArgumentError(
            f"{', '.join(given)}: settings of a --synthetic world only; drop them to describe the saved world "
            f"{args.path}"
        )


def _cmd_build(args: argparse.Namespace) -> int:
    from .world_sources import refuse_unused_loader_flags

    refuse_bad_numbers(args, least={"seed": 0, "max_cities": 1, "max_entities": 1})
    out = refuse_empty_path(args.output_dir, "--output-dir")
    refuse_unused_loader_flags(args)
    check_output(out, "world", force=args.force)
    if folder_kind(out) == "world" and not args.force:
        raise InvalidArgumentError(f"{out} already holds a world; pass --force to overwrite it")
    builder = _resolve(args.source)
    t0 = time.perf_counter()
    world = builder(args)
    t1 = time.perf_counter()
    world.save(out, progress=args.progress)
    t2 = time.perf_counter()
    print(f"built {world!r} in {t1 - t0:.1f}s, saved to {out} in {t2 - t1:.1f}s")
    for key in ("kg_load_report", "load_report"):  # a loader's one-line summary: read, kept, skipped by reason
        report = world.metadata.get(key)
        if isinstance(report, dict) and report.get("summary"):
            print(report["summary"])
    return 0


def _cmd_stats(args: argparse.Namespace) -> int:
    if (args.path is None) == (not args.synthetic):
        raise InvalidArgumentError("give either a world directory or --synthetic (not both)")
    refuse_bad_numbers(args, least={"seed": 0, "top": 0})
    if args.synthetic:
        args.input = None
        world = build_synthetic(args)
    else:
        from ..world import load_world

        _refuse_stats_size_args(args)
        world = load_world(args.path, progress=args.progress)
    stats = world.stats(top=args.top)
    print(json.dumps(stats.as_dict(), indent=2, ensure_ascii=False) if args.json else format_stats(stats))
    return 0


def register(subparsers) -> None:
    """Add ``world build`` and ``world stats`` to the ``searchgym`` command line."""
    world = subparsers.add_parser("world", help="build, save and describe worlds (KG + corpus)")
    sub = world.add_subparsers(dest="world_command", required=True)

    b = sub.add_parser("build", help="build a world and save it to a directory")
    out = b.add_mutually_exclusive_group(required=True)
    out.add_argument("--output-dir", metavar="DIR", help="directory to write the world to")
    add_renamed_flag(out, "--out", "--output-dir", metavar="DIR")
    b.add_argument(
        "--source",
        default="synthetic",
        help=f"where the world comes from (registered: {', '.join(WORLD_SOURCES)}; default synthetic)",
    )
    b.add_argument("--input", metavar="PATH", help="input file/directory for loader sources (not synthetic)")
    _add_size_args(b)
    b.add_argument(
        "--force",
        action="store_true",
        help="overwrite what --output-dir holds (an existing world, or another artefact)",
    )
    b.add_argument("--no-progress", dest="progress", action="store_false", help="hide progress bars")
    from .world_sources import add_loader_arguments

    add_loader_arguments(b)
    b.set_defaults(func=_cmd_build)

    s = sub.add_parser("stats", help="print counts, entity types, top relations and degrees of a world")
    s.add_argument("path", nargs="?", metavar="DIR", help="a saved world directory")
    s.add_argument("--synthetic", action="store_true", help="describe a freshly generated synthetic world instead")
    _add_size_args(s)
    s.add_argument("--top", type=int, default=10, help="how many relations to list (default 10)")
    s.add_argument("--json", action="store_true", help="print machine-readable JSON")
    s.add_argument("--no-progress", dest="progress", action="store_false", help="hide progress bars")
    s.set_defaults(func=_cmd_stats)
