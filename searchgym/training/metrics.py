"""Training metrics: one JSON line per step (+ optional TensorBoard), and PNG training curves.

The JSONL file is the source of truth (``searchgym plot metrics.jsonl --out curves.png`` reads it);
TensorBoard is written only when ``torch.utils.tensorboard`` is importable and asked for. On resume
the log is truncated to the checkpoint's step so a killed run never leaves duplicate steps (a line torn
by the kill is cut first). The file is locked while a logger writes it: a second run into the same
output folder fails at once naming the first.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Iterable, Sequence

from ..core.artefacts import check_output, write_report
from ..core.atomic_writes import write_text
from ..core.jsonl import loads_json, open_append, repair_torn_tail
from ..core.output_lock import OutputLock
from ..core.path_errors import not_there
from ..errors import InvalidArgumentError, MissingFileError

logger = logging.getLogger(__name__)

# Curves drawn by default, in panel order (missing keys are skipped).
DEFAULT_CURVES = (
    ("solver/reward", "solver reward"),
    ("proposer/reward", "proposer reward"),
    ("proposer/valid_rate", "valid-question rate"),
    ("val/accuracy", "validation accuracy (T=0)"),
    ("solver/searches", "search calls per solver rollout"),
    ("solver/wcr_coverage", "WCR coverage"),
    ("update/kl", "KL to reference"),
    ("update/entropy", "entropy"),
    ("perf/tokens_per_s", "rollout tokens/s"),
    ("sft/loss", "SFT loss (agent tokens)"),
    ("sft/val_loss", "SFT held-out loss"),
    ("sft/entropy", "held-out entropy (agent tokens)"),
    ("sft/tokens_per_s", "SFT tokens/s"),
)


class MetricsLogger:
    """Append ``{"step": n, key: value, ...}`` records to ``path`` (and TensorBoard under ``tb_dir``).

    Holds ``path``'s :class:`~searchgym.core.output_lock.OutputLock` until :meth:`close`."""

    def __init__(self, path: str | Path, *, tb_dir: str | Path | None = None, resume_step: int | None = None) -> None:
        self.path = Path(path)
        check_output(self.path, "training metrics")
        self._lock = OutputLock(self.path, what="--output-dir").acquire()
        try:
            if resume_step is not None and self.path.exists():
                repair_torn_tail(self.path)
                self._truncate(resume_step)
            elif resume_step is None and self.path.exists():
                self.path.unlink()  # a fresh run starts a fresh log
            self._f = open_append(self.path)
        except BaseException:
            self._lock.release()
            raise
        self._tb = None
        if tb_dir is not None:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:
                logger.warning("TensorBoard logging skipped: install the 'tensorboard' package (searchgym[llm])")
            else:
                self._tb = SummaryWriter(str(tb_dir))

    def _truncate(self, step: int) -> None:
        kept = [r for r in read_metrics(self.path) if r.get("step", 0) <= step]
        write_text(self.path, "".join(json.dumps(r) + "\n" for r in kept))

    def log(self, step: int, values: dict) -> None:
        """Write one record (non-finite floats become null in JSON)."""
        rec = {"step": int(step)}
        for k, v in values.items():
            if isinstance(v, float) and not math.isfinite(v):
                v = None
            rec[k] = v
        self._f.write(json.dumps(rec) + "\n")
        self._f.flush()
        if self._tb is not None:
            for k, v in rec.items():
                if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool):
                    self._tb.add_scalar(k, v, step)
            self._tb.flush()

    def close(self) -> None:
        """Close the log (releasing its lock) and TensorBoard; idempotent."""
        if not self._f.closed:
            self._f.close()
        self._lock.release()
        if self._tb is not None:
            self._tb.close()
            self._tb = None


def read_metrics(path: str | Path) -> list[dict]:
    """All records of a metrics JSONL file; a line that is not a record with a whole-number ``step`` (not
    UTF-8, not JSON, not an object, a step of another type) is one error naming the file, the line and the fix,
    never a traceback or a nonsense plot."""
    p = Path(path)
    if not p.is_file():
        raise MissingFileError(f"metrics file {p} {not_there(p)}; `searchgym train` writes <output_dir>/metrics.jsonl")
    lines = p.read_bytes().split(b"\n")
    return [_metrics_record(f"{p}:{n}", raw) for n, raw in enumerate(lines, 1) if raw.strip()]


def _metrics_record(where: str, raw: bytes) -> dict:
    """The record on the metrics line ``raw`` (``where`` is ``FILE:LINE``), or an error saying what is wrong."""
    fix = "fix or delete that line (is this a searchgym metrics.jsonl?)"
    try:
        rec = loads_json(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise InvalidArgumentError(f"{where}: not UTF-8 text; {fix}") from None
    except json.JSONDecodeError as exc:
        raise InvalidArgumentError(f"{where}: not JSON ({exc.msg}); {fix}") from None
    if not isinstance(rec, dict) or "step" not in rec:
        raise InvalidArgumentError(f"{where}: each line must be an object with a 'step' key; {fix}")
    step = rec["step"]
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise InvalidArgumentError(f"{where}: 'step' is {json.dumps(step)}, not a whole number >= 0; {fix}")
    return rec


def plot_metrics(records: Sequence[dict], out: str | Path, *, keys: Iterable[str] | None = None) -> Path:
    """Draw one panel per metric (step on x) into a PNG; returns the path written. The PNG is written whole and
    never over another kind of file (:func:`~searchgym.core.artefacts.write_report`)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    if not records:
        raise InvalidArgumentError("no metrics to plot: the file has no records yet")
    labels = dict(DEFAULT_CURVES)
    wanted = list(keys) if keys else [k for k, _ in DEFAULT_CURVES]
    present = [k for k in wanted if any(isinstance(r.get(k), (int, float)) for r in records)]
    if not present:
        raise InvalidArgumentError(
            f"none of the metrics {wanted} is in the file; available: {sorted({k for r in records for k in r})}"
        )
    cols = min(3, len(present))
    rows = math.ceil(len(present) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.0 * rows), squeeze=False)
    for ax, key in zip(axes.flat, present):
        pts = [(r["step"], r[key]) for r in records if isinstance(r.get(key), (int, float))]
        xs, ys = zip(*pts)
        ax.plot(xs, ys, marker="o" if len(xs) < 30 else None, linewidth=1.5)
        ax.set_title(labels.get(key, key), fontsize=10)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(present) :]:
        ax.axis("off")
    fig.tight_layout()
    try:
        return write_report(out, "PNG figure", lambda tmp: fig.savefig(tmp, format="png", dpi=110))
    finally:
        plt.close(fig)
