"""The config-file options ``searchgym train`` and ``searchgym sft`` share: ``--set`` overrides, ``--no-resume`` and
``--dump-config``, defined once so both commands read and document them the same way."""

from __future__ import annotations

import argparse
import os
from typing import Iterable, Optional

from ..core.artefacts import write_report

__all__ = ["add_config_arguments", "dump_config"]


def add_config_arguments(p: argparse.ArgumentParser) -> None:
    """Add ``--set KEY=VALUE`` (repeatable), ``--no-resume`` and ``--dump-config PATH`` to ``p``."""
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override any config key (repeatable); KEY.NAME=VALUE sets one entry of a mapping key and keeps its "
        "others (env_kwargs.top_k=5)",
    )
    p.add_argument("--no-resume", action="store_true", help="ignore checkpoints already in the output dir")
    p.add_argument("--dump-config", metavar="PATH", help="write the resolved config as YAML and exit")


def dump_config(cfg, path: str | None, *, inputs: Iterable[Optional[str | os.PathLike]] = ()) -> bool:
    """Write ``cfg`` as YAML to ``path`` when ``--dump-config`` asked for it; True if it did. The file is written
    whole, never over the command's ``inputs`` (its ``--config``), a world or another kind of file
    (:func:`~searchgym.core.artefacts.write_report`)."""
    if path is None:
        return False
    print(f"wrote {write_report(path, 'YAML config', cfg.save, inputs=inputs)}")
    return True
