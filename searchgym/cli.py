"""``searchgym`` command line: one sub-command module per area, registered here.

Each module in :data:`COMMAND_MODULES` exposes ``register(subparsers)`` that adds its
sub-commands and sets ``func`` (a callable taking the parsed args and returning an exit code).
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
import importlib
import io
import logging
import os
import re
import sys
import traceback
import warnings
from typing import Optional

from .core.path_errors import unusable_path_reason
from .core.progress import interrupted_message, reset_phases
from .core.renamed import RenamedWarning
from .errors import SearchGymError

COMMAND_MODULES = [
    "searchgym.commands.demo",
    "searchgym.commands.world",
    "searchgym.commands.retrieval",
    "searchgym.commands.subgraphs",
    "searchgym.commands.train",
    "searchgym.commands.sft",
    "searchgym.commands.demonstrations",
    "searchgym.commands.play",
    "searchgym.commands.diagnose",
    "searchgym.commands.evaluate",
]


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser with every sub-command registered."""
    parser = argparse.ArgumentParser(prog="searchgym", description=__doc__.splitlines()[0])
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="log at INFO level and show dependencies' warnings and bars"
    )
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
    show_renamed_warnings()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # the command's own usage and the flags it has that look alike, not the top-level usage
        refuse_unknown_flags(parser, sys.argv[1:] if argv is None else argv, unknown)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    if not args.verbose:
        quiet_dependencies()
        show_renamed_warnings()  # the filters above are inserted first: this one goes back in front
    reset_phases()
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:  # output piped into `head` and closed early: not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except SearchGymError as exc:  # bad input or an unusable setup: one line naming the fix (anything else is a bug
        if args.debug:  # and keeps its traceback)
            traceback.print_exc()
        print(f"searchgym {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: say how far the run got, not where Python was
        if args.debug:
            traceback.print_exc()
        print(f"searchgym {args.command}: {interrupted_message()}", file=sys.stderr)
        return 130
    except Exception as exc:  # a full disk or an unusable path is not a bug; anything else is and keeps its traceback
        target, path = disk_full_target(exc), unusable_path(exc)
        if target is None and path is None:
            raise
        if args.debug:
            traceback.print_exc()
        if target is not None:
            message = f"disk full writing {target}; free space and rerun the same command to resume"
        else:
            message = f"cannot use {path}; give another path"
        print(f"searchgym {args.command}: error: {message}", file=sys.stderr)
        return 2


def refuse_unknown_flags(parser: argparse.ArgumentParser, argv: list[str], unknown: list[str]) -> None:
    """Exit 2 with the usage of the (sub-)command ``argv`` runs, naming the ``unknown`` arguments and, for each
    unknown flag, what the user may have meant (:func:`flag_hints`), not the top-level usage argparse gives."""
    command = _command_parser(parser, argv)
    hints = [f"{name}: did you mean {' or '.join(close)}?" for name in unknown if (close := flag_hints(command, name))]
    command.error(f"unrecognized arguments: {' '.join(unknown)}" + "".join(f"; {h}" for h in hints))


def flag_hints(command: argparse.ArgumentParser, arg: str) -> list[str]:
    """Up to 3 of ``command``'s flags like the unknown ``arg``: a config field of that name first (``train`` and
    ``sft`` take every field as ``--set KEY=...``: ``--kl-coef`` -> ``--set kl_coef=...``), then flags spelled
    alike (``--limt`` -> ``--limit``) or sharing a word (``--hops`` -> ``--min-hops``; ``--top-k`` -> ``-k``), then
    config fields spelled alike."""
    import difflib

    name = arg.split("=", 1)[0]
    if not name.startswith("--"):
        return []
    key = name[2:].replace("-", "_")
    config_class = command.get_default("config_class")
    fields = [f.name for f in dataclasses.fields(config_class)] if config_class is not None else []
    if key in fields:
        return [f"--set {key}=..."]
    flags = {  # the flag to suggest -> the setting it sets
        a.option_strings[-1]: a.dest
        for a in command._actions
        if a.option_strings and not isinstance(a, argparse._HelpAction)
    }
    close = difflib.get_close_matches(name, list(flags), n=3, cutoff=0.6)
    close += [f for f, dest in flags.items() if f not in close and (dest in key.split("_") or key in dest.split("_"))]
    close += [f"--set {k}=..." for k in difflib.get_close_matches(key, fields, n=2, cutoff=0.7)]
    return close[:3]


def _command_parser(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.ArgumentParser:
    """The deepest sub-command parser that ``argv`` names (``searchgym subgraphs build ...`` -> ``build``'s)."""
    current = parser
    for token in argv:
        sub = next((a for a in current._actions if isinstance(a, argparse._SubParsersAction)), None)
        if sub is None:
            break
        if token in sub.choices:
            current = sub.choices[token]
    return current


#: errno values of a write that found no room: no space left on the device, or the file-size limit reached.
DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)
# how writers outside Python (safetensors' Rust, C++ streams) word the same OS errors
_OS_ERROR_TEXT = re.compile(
    rf"os error ({'|'.join(str(e) for e in DISK_FULL_ERRNOS)})\b|No space left on device|File too large|quota exceeded"
)


def disk_full_target(exc: BaseException) -> Optional[str]:
    """The file a disk-full (or file-size-limit) error was writing, or None if ``exc`` is no such error.

    Looks through the exception's chain for an ``OSError`` with errno ENOSPC/EFBIG/EDQUOT (or a writer
    outside Python quoting one). Its file name is the error's own ``filename`` when it has one, else the
    file object (or ``filename`` argument) being written in the innermost frame of the traceback that holds
    one, else ``"a file"``.
    """
    chain = _chain(exc)
    hit = next(
        (e for e in chain if (isinstance(e, OSError) and e.errno in DISK_FULL_ERRNOS) or _OS_ERROR_TEXT.search(str(e))),
        None,
    )
    if hit is None:
        return None
    if isinstance(hit, OSError) and hit.filename:
        return str(hit.filename)
    for e in chain:
        name = _file_in_traceback(e)
        if name:
            return name
    return "a file"


def unusable_path(exc: BaseException) -> Optional[str]:
    """``"<path>: <why>"`` when ``exc`` (or an error in its chain) is an ``OSError`` on a path the command cannot use
    (a file in the way of an output folder, no permission, a read-only file system), else None. An ``EEXIST`` on
    a folder is a code bug (a ``mkdir`` without ``exist_ok``), so it is not one of these."""
    for e in _chain(exc):
        if isinstance(e, OSError) and e.filename:
            why = unusable_path_reason(e)
            if why is not None:
                return f"{os.fsdecode(e.filename)}: {why}"
    return None


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the errors it was raised from or during (at most 8)."""
    chain: list[BaseException] = []
    e: Optional[BaseException] = exc
    while e is not None and e not in chain and len(chain) < 8:
        chain.append(e)
        e = e.__cause__ or e.__context__
    return chain


def _file_in_traceback(exc: BaseException) -> Optional[str]:
    """Name of the file being written where ``exc`` was raised: the innermost frame's open file objects
    (locals, or attributes and list items of ``self``), or its ``filename`` / ``path`` argument."""
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for frame in reversed(frames):
        values = list(frame.f_locals.values())
        owner = frame.f_locals.get("self")
        if owner is not None and hasattr(owner, "__dict__"):
            for v in vars(owner).values():
                values.extend(v if isinstance(v, (list, tuple)) else [v])
        for v in values:
            name = getattr(v, "name", None)
            if isinstance(v, io.IOBase) and isinstance(name, str) and not name.startswith("<") and _writable(v):
                return name
        for key in ("filename", "path", "file"):
            v = frame.f_locals.get(key)
            if isinstance(v, (str, os.PathLike)) and str(v):
                return str(v)
    return None


def _writable(f: io.IOBase) -> bool:
    mode = str(getattr(f, "mode", ""))
    return any(c in mode for c in "wax+")


def quiet_dependencies() -> None:
    """Keep dependencies' chatter out of the command's own output: their FutureWarning, DeprecationWarning and
    UserWarning notes, transformers' log lines, and the ``\\r`` progress bars of
    transformers / huggingface_hub / datasets (searchgym's own progress lines stay). ``-v`` shows it all;
    an explicit ``-W`` / ``PYTHONWARNINGS`` choice of the user is left alone."""
    for var, value in (
        ("TRANSFORMERS_VERBOSITY", "error"),
        ("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1"),
        ("HF_HUB_DISABLE_PROGRESS_BARS", "1"),
        ("HF_DATASETS_DISABLE_PROGRESS_BARS", "1"),
    ):
        os.environ.setdefault(var, value)
    if "transformers" in sys.modules:  # imported already: the variables above came too late for it
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    if not sys.warnoptions:  # searchgym warns through `warnings` only for old spellings (show_renamed_warnings)
        for category in (FutureWarning, DeprecationWarning, PendingDeprecationWarning, UserWarning):
            warnings.filterwarnings("ignore", category=category)


def show_renamed_warnings() -> None:
    """Print a :class:`~searchgym.core.renamed.RenamedWarning` (an old flag, config key or keyword was used) once
    per place: Python hides a DeprecationWarning raised outside ``__main__``, and a user must see this one."""
    if not sys.warnoptions:
        warnings.filterwarnings("default", category=RenamedWarning)
    if not getattr(warnings.formatwarning, "shows_renamed", False):
        warnings.formatwarning = _renamed_as_one_line(warnings.formatwarning)


def _renamed_as_one_line(default_format):
    """``warning: searchgym eval: --out is deprecated, use --output-dir`` for a RenamedWarning (no file, line or
    source: the user typed the old spelling, the code did not); every other warning as ``default_format`` does."""

    def formatwarning(message, category, filename, lineno, line=None):
        if issubclass(category, RenamedWarning):
            return f"warning: {message}\n"
        return default_format(message, category, filename, lineno, line)

    formatwarning.shows_renamed = True  # type: ignore[attr-defined]
    return formatwarning


if __name__ == "__main__":
    sys.exit(main())
