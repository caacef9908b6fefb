"""``searchgym`` command line: one sub-command module per area, registered here.

Each module in :data:`COMMAND_MODULES` exposes ``register(subparsers)`` that adds its
sub-commands and sets ``func`` (a callable taking the parsed args and returning an exit code).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
import traceback

from .errors import SearchGymError

COMMAND_MODULES = [
    "searchgym.demo",
    "searchgym.commands.world",
    "searchgym.commands.retrieval",
    "searchgym.commands.subgraphs",
    "searchgym.commands.train",
    "searchgym.commands.sft",
    "searchgym.commands.demos",
    "searchgym.commands.play",
    "searchgym.commands.diagnose",
    "searchgym.commands.evaluate",
]


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser with every sub-command registered."""
    parser = argparse.ArgumentParser(prog="searchgym", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    parser.add_argument(
        "--debug",
        action="store_true",
        help="show the full traceback of searchgym's own errors too (others always show one)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``searchgym`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:  # output piped into `head` and closed early: not an error
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except SearchGymError as exc:  # bad input or an unusable setup: one line naming the fix (anything else is a bug
        if args.debug:  # and keeps its traceback)
            traceback.print_exc()
        print(f"searchgym {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
