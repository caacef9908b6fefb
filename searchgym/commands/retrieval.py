"""``searchgym index build``, ``searchgym search`` and ``searchgym serve``."""

from __future__ import annotations

import argparse
import logging
import socket
import sys
import time

from ..core.path_errors import refuse_empty_path
from ..core.renamed import add_renamed_flag
from ..errors import InvalidArgumentError
from .number_checks import refuse_bad_numbers

logger = logging.getLogger(__name__)

__all__ = ["register"]


def _add_world_args(p: argparse.ArgumentParser, *, required: bool) -> None:
    g = p.add_mutually_exclusive_group(required=required)
    g.add_argument("--world", metavar="DIR", help="a saved world directory (searchgym world build)")
    g.add_argument("--synthetic", action="store_true", help="the embedded synthetic default world")
    p.add_argument("--seed", type=int, default=None, help="seed of the --synthetic world (default 0)")


def _load_world(args):
    if args.synthetic:
        from ..world.synthetic import default_world

        return default_world(seed=args.seed)
    from ..world import load_world

    return load_world(args.world)


#: backend flag (its ``args`` name) -> (the flag, the backends that read it, its value when not given)
_BACKEND_FLAGS = {
    "k1": ("--k1", ("bm25", "rank-bm25"), 1.5),
    "b": ("--b", ("bm25", "rank-bm25"), 0.75),
    "index_type": ("--index-type", ("dense",), "flat"),
    "nlist": ("--nlist", ("dense",), None),
}
#: the least (and most) value of each number the three commands take (an absent one is not checked)
_LEAST = {
    "seed": 0,
    "timeout": 0,
    "k1": 0,
    "b": 0,
    "nlist": 1,
    "k": 1,
    "max_chars": 1,
    "topk": 1,
    "port": 0,
}
_MOST = {"b": 1, "port": 65535}


def _backend_kwargs(args) -> dict:
    """The keyword arguments of ``args.backend``'s retriever: the backend flags it reads, defaults filled in."""
    return {
        name: default if getattr(args, name) is None else getattr(args, name)
        for name, (_, backends, default) in _BACKEND_FLAGS.items()
        if args.backend in backends and (default is not None or getattr(args, name) is not None)
    }


def _refuse_unused_flags(args) -> None:
    """Refuse a flag given where the command does not read it: a backend flag of another backend, the backend
    flags or ``--seed`` when nothing is indexed now (``--index``, ``--url``), ``--seed`` without ``--synthetic``,
    ``--timeout`` without ``--url``. Such a flag would otherwise be ignored without a word."""
    indexes_now = not (getattr(args, "index", None) or getattr(args, "url", None))
    backend = args.backend or "bm25"
    given = [flag for name, (flag, _, _) in _BACKEND_FLAGS.items() if getattr(args, name) is not None]
    if args.backend is not None:
        given.insert(0, "--backend")
    if given and not indexes_now:
        raise InvalidArgumentError(
            f"{', '.join(given)}: settings of indexing a world now, but a saved --index or a --url server has its "
            "own; drop them"
        )
    for name, (flag, backends, _) in _BACKEND_FLAGS.items():
        if getattr(args, name) is not None and backend not in backends:
            choice = " or ".join(backends)
            raise InvalidArgumentError(f"{flag} applies to --backend {choice} only; drop it or pass --backend {choice}")
    if args.seed is not None and not args.synthetic:
        raise InvalidArgumentError("--seed picks the --synthetic world only; drop it")
    if getattr(args, "timeout", None) is not None and not getattr(args, "url", None):
        raise InvalidArgumentError("--timeout applies to --url only; drop it")


def _refuse_two_sources(args) -> None:
    """Refuse two of ``--world``/``--synthetic``, ``--index`` and ``--url``: only one would be searched."""
    given = [
        flag
        for flag, name in (("--world/--synthetic", "world"), ("--index", "index"), ("--url", "url"))
        if (getattr(args, name, None) or (name == "world" and args.synthetic))
    ]
    if len(given) > 1:
        raise InvalidArgumentError(f"give only one of {', '.join(given)}: each names what to search")


def _check_args(args) -> None:
    """Every check of a command's arguments, before a world is loaded or indexed."""
    refuse_bad_numbers(args, least=_LEAST, most=_MOST)
    _refuse_two_sources(args)
    _refuse_unused_flags(args)
    args.backend = args.backend or "bm25"
    args.seed = args.seed or 0


def _add_backend_args(p: argparse.ArgumentParser, choices: tuple[str, ...]) -> None:
    p.add_argument("--backend", choices=choices, default=None, help="retrieval backend (default bm25)")
    p.add_argument("--k1", type=float, default=None, help="BM25 k1, at least 0 (default 1.5)")
    p.add_argument("--b", type=float, default=None, help="BM25 b, from 0 to 1 (default 0.75)")
    p.add_argument("--index-type", choices=("flat", "ivf"), default=None, help="dense FAISS index (default flat)")
    p.add_argument("--nlist", type=int, default=None, help="IVF cells of --backend dense (default ~4*sqrt(N))")


def _retriever(args):
    """The retriever a search/serve command asked for: a server URL, a saved index or a world."""
    if getattr(args, "url", None):
        from ..retrieval.client import RemoteRetriever

        return RemoteRetriever(args.url, timeout=10.0 if args.timeout is None else args.timeout)
    if args.index:
        from ..retrieval.factory import load_index

        t0 = time.perf_counter()
        r = load_index(args.index)
        logger.info("loaded %s index (%d docs) in %.2f s", r.backend, r.num_docs, time.perf_counter() - t0)
        return r
    if not (args.world or args.synthetic):
        sources = ["--world DIR", "--synthetic", "--index DIR"] + (["--url URL"] if hasattr(args, "url") else [])
        raise InvalidArgumentError(f"say what to search: {', '.join(sources[:-1])} or {sources[-1]}")
    from ..retrieval.factory import make_retriever

    world = _load_world(args)
    kwargs = _backend_kwargs(args)
    if args.backend in ("bm25", "rank-bm25"):
        kwargs["progress"] = sys.stderr.isatty()
    return make_retriever(world, args.backend, cache=False, **kwargs)


def _cmd_build(args) -> int:
    from ..core.artefacts import check_output
    from ..retrieval.factory import build_retriever

    _check_args(args)
    refuse_empty_path(args.output_dir, "--output-dir")
    check_output(args.output_dir, "index", force=args.force)
    world = _load_world(args)
    kwargs = _backend_kwargs(args)
    if args.backend in ("bm25", "rank-bm25"):
        kwargs["progress"] = True
    t0 = time.perf_counter()
    r = build_retriever(world, args.backend, **kwargs)
    r.save(args.output_dir)
    print(
        f"indexed {r.num_docs} documents of world {world.name!r} with {args.backend} in "
        f"{time.perf_counter() - t0:.1f} s -> {args.output_dir}"
    )
    return 0


def _cmd_search(args) -> int:
    from ..retrieval.base import format_hits

    _check_args(args)
    query = " ".join(args.query)
    hits = _retriever(args).search(query, k=args.k)
    if not hits:
        print(f"no documents match {query!r}")
        return 1
    print(format_hits(hits, max_chars=args.max_chars))
    return 0


def _check_host(host: str) -> None:
    """Refuse a ``--host`` that does not resolve, before the index is built (binding it later fails with a
    message about the port)."""
    try:
        socket.getaddrinfo(host, None)
    except (socket.gaierror, UnicodeError) as exc:
        raise InvalidArgumentError(
            f"--host {host} cannot be resolved ({exc}); give 127.0.0.1 (this machine only), 0.0.0.0 (every "
            "interface) or an address or name of this machine"
        ) from None


def _cmd_serve(args) -> int:
    from ..retrieval.multiproc import MultiProcessRetrievalServer
    from ..retrieval.server import RetrievalServer

    _check_args(args)
    if args.workers < 1:
        raise InvalidArgumentError(f"--workers must be >= 1, got {args.workers}")
    _check_host(args.host)
    server: RetrievalServer | MultiProcessRetrievalServer
    if args.workers > 1:
        server = MultiProcessRetrievalServer(
            _retriever(args), host=args.host, port=args.port, processes=args.workers, default_topk=args.topk
        )
    else:
        server = RetrievalServer(_retriever(args), host=args.host, port=args.port, default_topk=args.topk)
    server.bind()
    print(
        f"serving {server.retriever!r} on {server.url} (POST /retrieve, GET /health) with {args.workers} "
        "process(es); Ctrl-C to stop",
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("stopped")
    return 0


def register(subparsers) -> None:
    """Add ``index``, ``search`` and ``serve`` to the ``searchgym`` command line."""
    p = subparsers.add_parser("index", help="build retrieval indexes")
    sub = p.add_subparsers(dest="index_command", required=True)
    b = sub.add_parser("build", help="index a world's corpus and save it")
    _add_world_args(b, required=True)
    out = b.add_mutually_exclusive_group(required=True)
    out.add_argument("--output-dir", metavar="DIR", help="directory to write the index to")
    add_renamed_flag(out, "--out", "--output-dir", metavar="DIR")
    b.add_argument(
        "--force", action="store_true", help="write into --output-dir even if it holds another artefact (e.g. a world)"
    )
    _add_backend_args(b, ("bm25", "rank-bm25", "dense"))
    b.set_defaults(func=_cmd_build)

    s = subparsers.add_parser("search", help="search a world's corpus and print the hits as the agent sees them")
    s.add_argument("query", nargs="+", help="the query (words are joined with spaces)")
    _add_world_args(s, required=False)
    s.add_argument("--index", metavar="DIR", help="a saved index (searchgym index build) instead of indexing now")
    s.add_argument("--url", help="ask a running retrieval server (searchgym serve) instead")
    s.add_argument(
        "--timeout", type=float, default=None, help="total seconds per server request (with --url; default 10)"
    )
    s.add_argument("-k", type=int, default=3, help="number of documents (default 3)")
    s.add_argument(
        "--max-chars", type=int, default=None, help="cap each document's text at this many characters (at least 1)"
    )
    _add_backend_args(s, ("bm25", "rank-bm25", "dense"))
    s.set_defaults(func=_cmd_search)

    v = subparsers.add_parser("serve", help="serve retrieval over HTTP (the Search-R1 protocol)")
    _add_world_args(v, required=False)
    v.add_argument("--index", metavar="DIR", help="serve a saved index instead of indexing a world")
    v.add_argument("--host", default="127.0.0.1", help="interface to listen on (default loopback)")
    v.add_argument("--port", type=int, default=8000, help="port, 0 to 65535 (default 8000; 0 = any free port)")
    v.add_argument("--topk", type=int, default=3, help="top-k when a request gives none (default 3)")
    v.add_argument(
        "--workers",
        type=int,
        default=1,
        help="worker processes sharing the port and the index (default 1; search is CPU-bound)",
    )
    add_renamed_flag(v, "--processes", "--workers", type=int)
    _add_backend_args(v, ("bm25", "rank-bm25", "dense"))
    v.set_defaults(func=_cmd_serve)
