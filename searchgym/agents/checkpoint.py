"""Atomic checkpoints of a training run: policy (or LoRA adapter), optimizer, scheduler, RNG and env state.

Layout under ``<output_dir>/checkpoints``::

    step_00000010/  policy/ (save_pretrained: full model or adapter + tokenizer)
                    trainer_state.pt (tensors only: optimizer, scheduler; loaded with weights_only=True)
                    trainer_state.json (plain data: step, RNG states, env + replay state)
                    config.yaml, meta.json (step, config digest, format), COMPLETE
    latest          (name of the newest complete checkpoint)

Nothing in a checkpoint is unpickled: resuming a run directory someone else wrote cannot run code.
Checkpoints of the older pickled format (no ``format`` 2 in meta.json) are refused with a message.

Every checkpoint is written into a hidden temporary directory and renamed into place; ``latest``
is replaced atomically afterwards; older checkpoints are pruned only after that. A run killed at
any moment therefore leaves the previous checkpoint intact and never a half-written one.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from pathlib import Path

from ..errors import MissingFileError, SearchGymError
from .config_io import ConfigIO

logger = logging.getLogger(__name__)

_COMPLETE = "COMPLETE"
#: Checkpoint layout version: 2 = tensors via torch.save (weights_only loadable) + JSON for the rest.
FORMAT = 2
#: trainer_state keys that hold tensors; every other key is plain data saved as JSON.
TENSOR_KEYS = ("optimizer", "scheduler")


class CheckpointMismatchError(SearchGymError, ValueError):
    """A checkpoint was written under a different config; the message lists the differing keys."""


class CheckpointFormatError(SearchGymError, ValueError):
    """A checkpoint is not in the current safe format (or its files are damaged)."""


class CheckpointManager:
    """Save / find / load checkpoints in ``root``, keeping the newest ``keep``."""

    def __init__(self, root: str | Path, keep: int = 2) -> None:
        self.root = Path(root)
        self.keep = max(1, int(keep))

    @staticmethod
    def dir_name(step: int) -> str:
        """Name of the checkpoint directory of ``step``."""
        return f"step_{step:08d}"

    def save(self, step: int, *, model, tokenizer, trainer_state: dict, config: ConfigIO) -> Path:
        """Write checkpoint ``step`` atomically and return its directory.

        ``trainer_state[k]`` for ``k`` in :data:`TENSOR_KEYS` go to ``trainer_state.pt``; every
        other entry must be JSON-serialisable plain data (a TypeError names the offender).
        """
        import torch

        tensors = {k: trainer_state[k] for k in TENSOR_KEYS if k in trainer_state}
        plain = json.dumps({k: v for k, v in trainer_state.items() if k not in TENSOR_KEYS})

        self.root.mkdir(parents=True, exist_ok=True)
        name = self.dir_name(step)
        final = self.root / name
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}.tmp-", dir=self.root))
        try:
            model.save_pretrained(tmp / "policy")
            if tokenizer is not None:
                tokenizer.save_pretrained(tmp / "policy")
            torch.save(tensors, tmp / "trainer_state.pt")
            (tmp / "trainer_state.json").write_text(plain)
            config.save(tmp / "config.yaml")
            (tmp / "meta.json").write_text(json.dumps({"step": step, "digest": config.digest(), "format": FORMAT}))
            (tmp / _COMPLETE).write_text("ok\n")
            if final.exists():  # re-saving the same step: move the old one aside first
                old = self.root / f".{name}.old-{os.getpid()}"
                os.rename(final, old)
                os.rename(tmp, final)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.rename(tmp, final)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        pointer = self.root / ".latest.tmp"
        pointer.write_text(name + "\n")
        os.replace(pointer, self.root / "latest")
        self._prune(keep_name=name)
        return final

    def _complete(self) -> list[Path]:
        return sorted(p for p in self.root.glob("step_*") if (p / _COMPLETE).is_file())

    def _prune(self, keep_name: str) -> None:
        done = self._complete()
        for p in done[: max(0, len(done) - self.keep)]:
            if p.name != keep_name:
                shutil.rmtree(p, ignore_errors=True)
        for p in self.root.glob(".step_*"):  # leftovers of interrupted saves
            shutil.rmtree(p, ignore_errors=True)

    def latest(self) -> Path | None:
        """The newest complete checkpoint, or None."""
        if not self.root.is_dir():
            return None
        ptr = self.root / "latest"
        if ptr.is_file():
            cand = self.root / ptr.read_text().strip()
            if (cand / _COMPLETE).is_file():
                return cand
        done = self._complete()
        return done[-1] if done else None

    @staticmethod
    def check_config(path: str | Path, config: ConfigIO) -> dict:
        """Raise :class:`CheckpointMismatchError` unless ``path`` was written under a compatible config."""
        path = Path(path)
        if not (path / _COMPLETE).is_file():
            raise MissingFileError(f"{path} is not a complete searchgym checkpoint (no {_COMPLETE} marker)")
        meta = json.loads((path / "meta.json").read_text())
        if meta.get("digest") == config.digest():
            return meta
        saved = type(config).load(path / "config.yaml").fingerprint()
        now = config.fingerprint()
        diff = sorted(k for k in set(saved) | set(now) if saved.get(k) != now.get(k))
        if not diff:  # same values; the digest moved only because a later version added a key with its default
            return meta
        detail = ", ".join(f"{k}: checkpoint={saved.get(k)!r} now={now.get(k)!r}" for k in diff)
        raise CheckpointMismatchError(
            f"checkpoint {path} was written with a different config ({detail}); resume with the original "
            f"config ({path / 'config.yaml'}) or use a new output_dir to start a fresh run"
        )

    @staticmethod
    def load_state(path: str | Path) -> dict:
        """The trainer_state dict of a checkpoint, read without unpickling anything.

        Raises :class:`CheckpointFormatError` for a checkpoint of the older pickled format or
        damaged state files.
        """
        import pickle

        import torch

        path = Path(path)
        meta = json.loads((path / "meta.json").read_text())
        if meta.get("format") != FORMAT or not (path / "trainer_state.json").is_file():
            raise CheckpointFormatError(
                f"checkpoint {path} uses the old pickled format (format {meta.get('format', 1)}, this searchgym "
                f"reads format {FORMAT}); loading it could run arbitrary code, so it is refused. Start a fresh run "
                "(a new output_dir), or, if you trust its author, resume it with the searchgym version that wrote it "
                "and let that save again after upgrading"
            )
        try:
            state = torch.load(path / "trainer_state.pt", map_location="cpu", weights_only=True)
            plain = json.loads((path / "trainer_state.json").read_text())
        except (pickle.UnpicklingError, RuntimeError, ValueError) as exc:
            raise CheckpointFormatError(
                f"checkpoint {path} has damaged or unsafe state files ({exc}); "
                "resume from an earlier checkpoint or start a fresh run"
            ) from None
        if not isinstance(state, dict) or not isinstance(plain, dict):
            raise CheckpointFormatError(f"checkpoint {path}: trainer state is not a mapping")
        return {**plain, **state}
