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
import shutil
from pathlib import Path

from ..core.atomic_writes import write_folder, write_text
from ..core.config_io import ConfigIO
from ..errors import MissingFileError, SearchGymError
from ..llm.weights_check import DamagedWeightsError, check_weights_folder

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


#: a training run keeps its checkpoints in ``<output_dir>/checkpoints``, and each checkpoint its weights in ``policy``
CHECKPOINTS_DIR = "checkpoints"
POLICY_DIR = "policy"


class CheckpointManager:
    """Save / find / load checkpoints in ``root``, keeping the newest ``keep`` and, when ``keep_every`` > 0, every
    checkpoint whose step is a multiple of it (milestones a run is scored at afterwards)."""

    def __init__(self, root: str | Path, keep: int = 2, keep_every: int = 0) -> None:
        self.root = Path(root)
        self.keep = max(1, int(keep))
        self.keep_every = max(0, int(keep_every))

    @classmethod
    def of_run(cls, output_dir: str | Path, keep: int = 2, keep_every: int = 0) -> CheckpointManager:
        """The checkpoints of the training run writing to ``output_dir`` (its ``checkpoints`` folder)."""
        return cls(Path(output_dir) / CHECKPOINTS_DIR, keep=keep, keep_every=keep_every)

    def policy_dir(self, step: int) -> Path:
        """Where checkpoint ``step`` keeps its weights (a model or adapter folder ``from_pretrained`` opens)."""
        return self.root / self.dir_name(step) / POLICY_DIR

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

        name = self.dir_name(step)

        def write(tmp: Path) -> None:
            model.save_pretrained(tmp / POLICY_DIR)
            if tokenizer is not None:
                tokenizer.save_pretrained(tmp / POLICY_DIR)
            torch.save(tensors, tmp / "trainer_state.pt")
            (tmp / "trainer_state.json").write_text(plain)
            config.save(tmp / "config.yaml")
            (tmp / "meta.json").write_text(json.dumps({"step": step, "digest": config.digest(), "format": FORMAT}))
            (tmp / _COMPLETE).write_text("ok\n")

        final = write_folder(self.root / name, write)  # re-saving a step replaces it whole
        write_text(self.root / "latest", name + "\n")
        self._prune(keep_name=name)
        return final

    def _complete(self) -> list[Path]:
        return sorted(p for p in self.root.glob("step_*") if (p / _COMPLETE).is_file())

    def _prune(self, keep_name: str) -> None:
        done = self._complete()
        for p in done[: max(0, len(done) - self.keep)]:
            if p.name != keep_name and not self._milestone(p):
                shutil.rmtree(p, ignore_errors=True)
        for p in self.root.glob(".step_*"):  # leftovers of interrupted saves
            shutil.rmtree(p, ignore_errors=True)

    def _milestone(self, path: Path) -> bool:
        """Whether ``path`` is a checkpoint ``keep_every`` keeps for good."""
        step = path.name.removeprefix("step_")
        return bool(self.keep_every) and step.isdigit() and int(step) % self.keep_every == 0

    def latest(self) -> Path | None:
        """The newest complete and readable checkpoint, or None if there is none yet.

        A newer checkpoint whose ``meta.json``, ``trainer_state.json`` or weight-file headers are damaged is
        skipped with a warning naming the file, and the one before it is used (as an incomplete one is);
        when every checkpoint is damaged a :class:`CheckpointFormatError` lists them (resuming from nothing
        would silently start over).
        """
        if not self.root.is_dir():
            return None
        done = self._complete()
        ptr = self.root / "latest"
        name = ptr.read_text(encoding="utf-8", errors="replace").strip() if ptr.is_file() else ""
        pointed = [p for p in done if p.name == name]  # the pointer names a directory here, nothing else
        damaged: list[str] = []
        for cand in pointed + [p for p in reversed(done) if p not in pointed]:
            problem = self.damage(cand)
            if problem is None:
                if damaged:
                    logger.warning("resuming from %s instead", cand)
                return cand
            logger.warning("skipping damaged checkpoint %s: %s", cand, problem)
            damaged.append(f"{cand.name}: {problem}")
        if damaged:
            raise CheckpointFormatError(
                f"no readable checkpoint in {self.root} ({'; '.join(damaged)}); use a new output_dir, or delete "
                f"{self.root}, to start a fresh run"
            )
        return None

    @staticmethod
    def damage(path: str | Path) -> str | None:
        """What is damaged in checkpoint ``path`` (its meta.json, trainer_state.json or a weight file's
        header: cheap checks, no tensor is read), or None if those are sound."""
        path = Path(path)
        try:
            read_meta(path)
            json.loads((path / "trainer_state.json").read_text(encoding="utf-8"))
            check_weights_folder(path / POLICY_DIR)
        except (CheckpointFormatError, DamagedWeightsError) as exc:
            return str(exc)
        except FileNotFoundError:
            return None  # an old-format checkpoint: load_state refuses it with its own message
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            return f"trainer_state.json is damaged ({exc})"
        return None

    @staticmethod
    def check_config(path: str | Path, config: ConfigIO) -> dict:
        """Raise :class:`CheckpointMismatchError` unless ``path`` was written under a compatible config."""
        path = Path(path)
        if not (path / _COMPLETE).is_file():
            raise MissingFileError(f"{path} is not a complete searchgym checkpoint (no {_COMPLETE} marker)")
        meta = read_meta(path)
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
        meta = read_meta(path)
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


def read_meta(path: str | Path) -> dict:
    """The ``meta.json`` of checkpoint ``path``; :class:`CheckpointFormatError` naming the file when it is
    missing, not JSON or not an object (the checkpoint is then damaged, not a config mismatch)."""
    f = Path(path) / "meta.json"
    try:
        meta = json.loads(f.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        meta, why = None, f"{type(exc).__name__}: {exc}"
    else:
        why = "not a JSON object"
    if not isinstance(meta, dict):
        raise CheckpointFormatError(f"{f} is damaged ({why}); resume from an earlier checkpoint or start a fresh run")
    return meta
