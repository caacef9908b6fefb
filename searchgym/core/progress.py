"""One progress line for every long phase of every command: count, rate, ETA, elapsed time.

Every loop that can run for more than a few seconds (evaluation, training and SFT steps, subgraph
extraction, demonstrations, world generation, index analysis, dump loading) reports through
:class:`Progress`, so all of them look alike and none is silent::

    train: 3/10 steps (30%), 41.2 s/step, ETA 4m48s, 2m04s elapsed, solver=0.125 proposer=0.500

* On a terminal the line is redrawn in place (``\\r``), and a background heartbeat keeps the elapsed
  time moving while one item takes long (the first training step, a slow model load inside a phase).
* Anywhere else (a log file, a pipe) it prints a whole line at most every :data:`LOG_EVERY_S` seconds
  (10; the environment variable ``SEARCHGYM_PROGRESS_EVERY`` sets another) and one at the end, never a ``\\r``.
* Rates below one item per second are shown the other way round (``s/step``).

The module also keeps the outermost phase of the run (:func:`interrupted_message`), so the command line
can answer Ctrl-C with "interrupted after 37/200 questions; rerun the same command to resume" instead of
a traceback. A disabled ``Progress`` prints nothing but still counts, for that message.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, Iterable, Iterator, Optional, TextIO, TypeVar

__all__ = ["Progress", "progress_iter", "format_duration", "interrupted_message", "reset_phases", "LOG_EVERY_S"]

#: Seconds between two whole progress lines when the output is not a terminal (``$SEARCHGYM_PROGRESS_EVERY``).
LOG_EVERY_S = float(os.environ.get("SEARCHGYM_PROGRESS_EVERY") or 10.0)
#: Seconds between two redraws (and heartbeat ticks) on a terminal.
TTY_EVERY_S = 0.5

_T = TypeVar("_T")
_registry_lock = threading.Lock()
_open: list["Progress"] = []
_top: Optional["Progress"] = None


def format_duration(seconds: float) -> str:
    """``42s``, ``3m05s`` or ``1h02m``: short enough for a progress line."""
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def _scaled(n: float) -> str:
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.1f}{unit}"
    return f"{n:.0f}"


class Progress:
    """The progress of one phase: ``total`` items (None: unknown) of ``unit``, ``initial`` already done.

    ``update(n)`` after each item (or batch), ``set_postfix(key=value)`` for live metrics, ``close()``
    (or use it as a context manager) at the end. ``enabled=False`` prints nothing. ``resume_hint``: what
    to tell a user who interrupts this phase (e.g. "rerun the same command to resume"). ``scale``: show
    counts as 1.2k / 3.4M (bytes, documents). ``stream``: default ``sys.stderr``.
    """

    def __init__(
        self,
        total: Optional[int],
        desc: str,
        *,
        unit: str = "item",
        units: Optional[str] = None,
        initial: int = 0,
        enabled: bool = True,
        resume_hint: Optional[str] = None,
        scale: bool = False,
        stream: Optional[TextIO] = None,
    ) -> None:
        self.total = total
        self.desc = desc
        self.unit = unit
        self.units = units or (unit if unit.endswith("s") or len(unit) < 2 else unit + "s")
        self.initial = self.count = int(initial)
        self.enabled = enabled
        self.resume_hint = resume_hint
        self.scale = scale
        self.stream = stream if stream is not None else sys.stderr
        self.postfix: dict[str, Any] = {}
        self.start = time.monotonic()
        self._updated = self.start  # when the last item finished: the rate is measured up to it
        self.closed = False
        self._lock = threading.Lock()
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._last_draw = float("-inf") if self._tty else self.start  # a log gets its first line after LOG_EVERY_S
        self._width = 0
        self._printed = False
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        global _top
        outer = _innermost() if enabled and self._tty else None
        with _registry_lock:
            if not _open:
                _top = self
            _open.append(self)
        if enabled:
            if outer is not None and outer._tty and outer._width:  # leave the outer phase's line above this one
                with outer._lock:
                    outer.stream.write("\n")
                    outer._width = 0
            if self._tty:
                self._draw()
            self._thread = threading.Thread(target=self._heartbeat, name=f"progress-{desc}", daemon=True)
            self._thread.start()

    # ------------------------------------------------------------ reporting
    def update(self, n: int = 1) -> None:
        """``n`` more items are done."""
        with self._lock:
            self.count += n
            self._updated = time.monotonic()
        self._maybe_draw()

    def set_postfix(self, **fields: Any) -> None:
        """Live values shown at the end of the line (``loss=0.312``); replaces the previous ones."""
        with self._lock:
            self.postfix = dict(fields)

    def write(self, text: str, file: Optional[TextIO] = None) -> None:
        """Print ``text`` as its own line (to ``file``, default the progress stream) without breaking the bar."""
        with self._lock:
            if self.enabled and self._tty and self._width:
                self.stream.write("\r" + " " * self._width + "\r")
                self.stream.flush()
                self._width = 0
            print(text, file=file or self.stream, flush=True)
            self._last_draw = float("-inf")
        if self.enabled and self._tty:
            self._draw()

    def close(self) -> None:
        """End the phase: the final line (always, when enabled) and, on a terminal, a newline."""
        if self.closed:
            return
        self.closed = True
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        if self.enabled:
            self._draw(final=True)
        with _registry_lock:
            if self in _open:
                _open.remove(self)

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------ text
    def line(self) -> str:
        """The progress line as it would be printed now."""
        with self._lock:
            count, postfix, updated = self.count, dict(self.postfix), self._updated
        now = time.monotonic()
        elapsed, measured = now - self.start, updated - self.start
        shown = _scaled(count) if self.scale else str(count)
        parts = [f"{self.desc}: {shown}"]
        if self.total is not None:
            total = _scaled(self.total) if self.scale else str(self.total)
            pct = f" ({100 * count / self.total:.0f}%)" if self.total > 0 else ""
            parts = [f"{self.desc}: {shown}/{total} {self.units}{pct}"]
        else:
            parts[0] += f" {self.units}"
        done = count - self.initial
        # the rate up to the last finished item (not to now: between two slow steps it would climb by itself), and
        # the ETA less the time the current item has already run
        rate = done / measured if measured > 0 and done > 0 else None
        if rate is None:
            parts.append(f"? s/{self.unit}")
        elif rate >= 1:
            parts.append(f"{_scaled(rate) if self.scale else f'{rate:.2f}'} {self.units}/s")
        else:
            parts.append(f"{1 / rate:.1f} s/{self.unit}")
        if self.total is not None and count < self.total:
            eta = max(0.0, (self.total - count) / rate - (now - updated)) if rate else None
            parts.append("ETA " + (format_duration(eta) if eta is not None else "?"))
        parts.append(f"{format_duration(elapsed)} elapsed")
        text = ", ".join(parts)
        if postfix:
            text += ", " + " ".join(f"{k}={v}" for k, v in postfix.items())
        return text

    # ------------------------------------------------------------ drawing
    def _maybe_draw(self) -> None:
        if not self.enabled or (self._tty and _innermost() is not self):  # one line on a terminal: the inner phase's
            return
        every = TTY_EVERY_S if self._tty else LOG_EVERY_S
        if time.monotonic() - self._last_draw >= every:
            self._draw()

    def _heartbeat(self) -> None:
        every = TTY_EVERY_S if self._tty else LOG_EVERY_S
        while not self._stop.wait(every):
            self._maybe_draw()

    def _draw(self, final: bool = False) -> None:
        text = self.line()
        with self._lock:
            self._last_draw = time.monotonic()
            try:
                if self._tty:
                    pad = " " * max(0, self._width - len(text))
                    self.stream.write("\r" + text + pad + ("\n" if final else ""))
                    self._width = 0 if final else len(text)
                elif final and not self._printed and self.count == self.initial:
                    return  # nothing was done and nothing was said: stay quiet
                else:
                    self.stream.write(text + "\n")
                self._printed = True
                self.stream.flush()
            except ValueError:  # the stream was closed under a daemon heartbeat at interpreter exit
                self._stop.set()


def _innermost() -> Optional[Progress]:
    """The most recently opened phase that is still open and shown."""
    with _registry_lock:
        shown = [p for p in _open if p.enabled]
    return shown[-1] if shown else None


def progress_iter(
    items: Iterable[_T], total: Optional[int], desc: str, *, enabled: bool = True, **kwargs: Any
) -> Iterator[_T]:
    """Yield ``items``, counting each one on a :class:`Progress` (closed when the loop ends or breaks)."""
    with Progress(total, desc, enabled=enabled, **kwargs) as bar:
        for item in items:
            yield item
            bar.update(1)


def interrupted_message() -> str:
    """What to print when the run is interrupted: how far its outermost phase got and how to resume."""
    with _registry_lock:
        top = _top
    if top is None:
        return "interrupted before any work was done"
    total = f"/{top.total}" if top.total is not None else ""
    text = f"interrupted after {top.count}{total} {top.units}"
    return f"{text}; {top.resume_hint}" if top.resume_hint else text


def reset_phases() -> None:
    """Forget earlier phases (the command line calls this before each command)."""
    global _top
    with _registry_lock:
        _open.clear()
        _top = None
