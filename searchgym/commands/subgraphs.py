"""``searchgym subgraphs build|stats|show``: build a subgraph pool, summarise it, look at one subgraph."""

from __future__ import annotations

import argparse
import json
import logging
import sys

from ..core.artefacts import check_report_output
from ..core.ray_support import add_ray_args, ray_config_from_args
from ..core.renamed import add_renamed_flag
from ..errors import InvalidArgumentError, NotFoundError
from .number_checks import refuse_bad_numbers

logger = logging.getLogger(__name__)

#: the least value of each numeric ``subgraphs build`` flag (checked before any file is made)
BUILD_LEAST = {
    "seed": 0,
    "timeout": 0.1,
    "temperature": 0.0,
    "concurrency": 1,
    "ray_workers": 1,
    "ray_chunk": 0,
    "min_hops": 1,
    "max_candidates": 1,
    "max_retries": 0,
    "plan_retries": 0,
}


def _csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def register(subparsers) -> None:
    """Add the ``subgraphs`` command group to the top-level parser."""
    p = subparsers.add_parser("subgraphs", help="build, inspect and plot KG subgraph pools (kg-paths-wcr Alg. 1)")
    sub = p.add_subparsers(dest="subgraphs_command", required=True)

    b = sub.add_parser("build", help="extract a resumable pool of subgraphs into a JSONL file")
    src = b.add_mutually_exclusive_group(required=True)
    src.add_argument("--world", metavar="DIR", help="a saved world directory (searchgym world build / World.save)")
    src.add_argument("--synthetic", action="store_true", help="the embedded default synthetic world")
    b.add_argument("--world-seed", type=int, default=0, help="seed of the --synthetic world (default 0)")
    b.add_argument("--n", type=int, default=1000, help="number of subgraphs to accept (default 1000)")
    b.add_argument("--out", required=True, help="output JSONL; re-running with the same settings resumes it")
    b.add_argument("--seed", type=int, default=0, help="pool seed: seeds, sampling and heuristic choices (default 0)")
    b.add_argument("--selector", choices=["heuristic", "llm"], default="heuristic")
    b.add_argument("--endpoint", help="OpenAI-compatible base URL for --selector llm, e.g. http://127.0.0.1:8000/v1")
    b.add_argument("--model", default="default", help="model name sent to the endpoint")
    b.add_argument("--api-key", default=None, help="bearer token for the endpoint, if it needs one")
    b.add_argument("--timeout", type=float, default=20.0, help="total seconds per selector request (default 20)")
    b.add_argument("--temperature", type=float, default=0.6, help="LLM selector temperature (default 0.6)")
    add_ray_args(b)
    b.add_argument(
        "--concurrency", type=int, default=None, help="extractions in flight (default 1; 10 with --selector llm)"
    )
    add_renamed_flag(b, "--workers", "--concurrency", type=int)
    b.add_argument("--min-hops", type=int, default=3)
    b.add_argument("--max-hops", type=int, default=7)
    b.add_argument("--max-candidates", type=int, default=10)
    b.add_argument("--max-retries", type=int, default=5)
    b.add_argument(
        "--plan-retries",
        type=int,
        default=4,
        help="re-draw a path that ends short of the heuristic selector's planned length up to N times (0: off)",
    )
    b.add_argument(
        "--relation-blocklist",
        type=_csv,
        default=None,
        help="comma-separated relation ids/labels to exclude (replaces the default list; '' for none)",
    )
    b.add_argument("--relation-allowlist", type=_csv, default=None, help="comma-separated relation ids/labels to keep")
    b.add_argument("--no-literal-answers", action="store_true", help="never end a path at a literal value")
    b.add_argument("--inverse-edges", action="store_true", help="let the target path walk edges backwards too")
    b.add_argument("--no-progress", action="store_true", help="no progress bar")
    b.set_defaults(func=_cmd_build)

    s = sub.add_parser("stats", help="pool statistics like kg-paths-wcr Fig. 5")
    s.add_argument("pool", help="pool JSONL file")
    s.add_argument("--png", help="also draw the four panels into this PNG")
    s.add_argument("--json", action="store_true", help="print JSON instead of text")
    s.add_argument("--top", type=int, default=15, help="number of top relations (default 15)")
    s.set_defaults(func=_cmd_stats)

    w = sub.add_parser("show", help="print one subgraph (and draw it like kg-paths-wcr Fig. 6)")
    w.add_argument("pool", help="pool JSONL file")
    sel = w.add_mutually_exclusive_group()
    sel.add_argument("--index", type=int, default=0, help="position in the ordered pool (default 0)")
    sel.add_argument("--id", help="subgraph id, e.g. sg000042")
    w.add_argument(
        "--order",
        choices=["none", "curriculum"],
        default="none",
        help="order --index refers to: seed index (none, default) or descending node count",
    )
    w.add_argument("--png", help="draw the subgraph into this PNG")
    w.set_defaults(func=_cmd_show)


def _load_world(args):
    if args.synthetic:
        from searchgym.world.synthetic import default_world

        return default_world(seed=args.world_seed)
    from searchgym.world import load_world

    return load_world(args.world)


def _make_selector(args, concurrency: int):
    from ..construction.selectors import HeuristicSelector, LLMSelector, LLMSelectorConfig

    if args.selector == "heuristic":
        given = [flag for flag, value in (("--endpoint", args.endpoint), ("--api-key", args.api_key)) if value]
        if given:
            raise InvalidArgumentError(f"{' and '.join(given)}: only used with --selector llm")
        return HeuristicSelector(args.seed)
    if not args.endpoint:
        raise InvalidArgumentError(
            "--selector llm needs --endpoint URL (an OpenAI-compatible server, e.g. `vllm serve`)"
        )
    from searchgym.llm.openai_client import OpenAICompatibleGenerator

    # the extractor retries failed calls itself (--max-retries), so the HTTP client does not
    gen = OpenAICompatibleGenerator(
        args.endpoint, args.model, api_key=args.api_key, timeout=args.timeout, max_retries=0, concurrency=concurrency
    )
    return LLMSelector(gen, LLMSelectorConfig(temperature=args.temperature, seed=args.seed))


def _cmd_build(args) -> int:
    from ..construction.extract import DEFAULT_RELATION_BLOCKLIST, ExtractionConfig
    from ..construction.pool import build_pool, rejections_path

    if args.n < 1:  # an empty pool file would pass for a built one
        raise InvalidArgumentError(f"--n must be >= 1, got {args.n}")
    refuse_bad_numbers(args, least=BUILD_LEAST)
    config = ExtractionConfig(
        min_hops=args.min_hops,
        max_hops=args.max_hops,
        max_candidates=args.max_candidates,
        max_retries=args.max_retries,
        plan_retries=args.plan_retries,
        relation_blocklist=DEFAULT_RELATION_BLOCKLIST if args.relation_blocklist is None else args.relation_blocklist,
        relation_allowlist=args.relation_allowlist or (),
        allow_literal_answers=not args.no_literal_answers,
        allow_inverse_edges=args.inverse_edges,
    )
    world = _load_world(args)
    concurrency = args.concurrency if args.concurrency is not None else (10 if args.selector == "llm" else 1)
    selector = _make_selector(args, concurrency)
    try:
        result = build_pool(
            world,
            args.n,
            seed=args.seed,
            selector=selector,
            config=config,
            out=args.out,
            concurrency=concurrency,
            progress=not args.no_progress,
            ray=ray_config_from_args(args),
        )
    finally:
        gen = getattr(selector, "generator", None)
        if gen is not None:
            gen.close()
    print(result.summary())
    print(f"pool: {args.out}  rejections: {rejections_path(args.out)}")
    if result.selector_stats:
        print(f"selector calls: {json.dumps(result.selector_stats)}")
    for line in result.errors[:5]:
        print(f"  e.g. {line}")
    if result.stopped_early:
        print(f"searchgym subgraphs: error: {result.stopped_early}", file=sys.stderr)
        return 1
    return 0


def _cmd_stats(args) -> int:
    from ..construction.pool import load_pool
    from ..construction.stats import format_stats, plot_stats, pool_stats

    refuse_bad_numbers(args, least={"top": 1})
    _check_png(args)
    subgraphs = load_pool(args.pool)
    stats = pool_stats(subgraphs, top=args.top)
    png = plot_stats(stats, args.png) if args.png is not None else None  # files first: a closed stdout loses none
    print(json.dumps(stats, indent=2) if args.json else format_stats(stats))
    if png is not None:
        print(f"wrote {png}", file=sys.stderr if args.json else sys.stdout)
    return 0


def _check_png(args) -> None:
    """Refuse a ``--png`` path that would lose something (the pool itself, a world's file, another kind of file)
    before the pool is read."""
    if args.png is not None:
        check_report_output(args.png, "PNG figure", inputs=[args.pool])


def _cmd_show(args) -> int:
    from ..construction.curriculum import order_pool
    from ..construction.plot import plot_subgraph
    from ..construction.pool import load_pool

    _check_png(args)
    subgraphs = order_pool(load_pool(args.pool), args.order)
    if args.id is not None:
        found = [s for s in subgraphs if s.id == args.id]
        if not found:
            raise NotFoundError(f"no subgraph with id {args.id!r} in {args.pool}")
        sg = found[0]
    else:
        if not -len(subgraphs) <= args.index < len(subgraphs):
            raise InvalidArgumentError(
                f"--index {args.index} is out of range: {args.pool} has {len(subgraphs)} subgraphs"
            )
        sg = subgraphs[args.index]
    png = plot_subgraph(sg, args.png) if args.png is not None else None
    print(f"{sg.id}: seed {sg.seed}, {sg.hops} hops, {sg.node_count} nodes, answer {sg.answer!r} ({sg.answer_type})")
    print(f"waypoints: {sg.waypoints}")
    print(sg.describe())
    if png is not None:
        print(f"wrote {png}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run ``subgraphs`` sub-commands standalone (``python -m searchgym.commands.subgraphs build ...``)."""
    parser = argparse.ArgumentParser(prog="searchgym")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
