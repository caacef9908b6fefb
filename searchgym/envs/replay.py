"""SSP's replay buffer with periodic reset (search-self-play §4.5, Table 5).

Valid, verified questions are stored; when the Proposer's question is invalid the Solver group
gets a question drawn from the buffer instead, so it still has a learning signal.

Two reset rules, not the same thing:

* **SSP (the trainer)**: one buffer for the whole batch, cleared every 10 *training steps*. The trainer's
  :class:`~searchgym.evaluation.batch_runner.BatchRunner` owns one buffer without per-game reset
  (``reset_every=None``), passes it to each env clone's reset (``options={"replay": buffer}``) and clears it
  every ``replay_reset_steps`` steps.
* **An env driven alone** (no trainer, so no training steps): each env owns its buffer and
  :meth:`ReplayBuffer.end_game` clears it every ``reset_every`` finished *games* (default 10).
"""

from __future__ import annotations

import random
from collections import deque
from typing import Optional

from ..core.arg_checks import MAX_INDEX, check_count
from ..core.types import Task
from ..errors import InvalidTypeError

__all__ = ["ReplayBuffer", "batch_replay"]


class ReplayBuffer:
    """Bounded FIFO of valid tasks, cleared every ``reset_every`` games (``None``/0: never; the
    trainer uses ``None`` and clears by training step instead).

    Call :meth:`add` for each verified question, :meth:`sample` to fill an invalid slot
    (``None`` when empty: the caller then uses its dummy task) and :meth:`end_game` once per game.
    """

    def __init__(self, capacity: int = 256, reset_every: Optional[int] = 10) -> None:
        capacity = check_count("replay capacity", capacity, most=MAX_INDEX)
        reset_every = check_count("reset_every", reset_every, least=0, optional=True, hint="0 or None: never")
        self.capacity = capacity
        self.reset_every = reset_every or None
        self._items: deque[Task] = deque(maxlen=capacity)
        self.games = 0
        self.resets = 0

    def __len__(self) -> int:
        return len(self._items)

    def add(self, task: Task) -> None:
        """Store a verified task (oldest dropped when full)."""
        self._items.append(task)

    def sample(self, rng: random.Random) -> Optional[Task]:
        """A uniformly drawn stored task, or ``None`` if the buffer is empty."""
        if not self._items:
            return None
        return self._items[rng.randrange(len(self._items))]

    def end_game(self) -> bool:
        """Count one finished game; clears the buffer every ``reset_every`` games. Returns whether
        it was cleared."""
        self.games += 1
        if self.reset_every and self.games % self.reset_every == 0:
            self.clear()
            self.resets += 1
            return True
        return False

    def clear(self) -> None:
        """Drop every stored task."""
        self._items.clear()

    def state_dict(self) -> dict:
        """Picklable state: stored tasks (as dicts) and game/reset counters."""
        return {"items": [t.to_dict() for t in self._items], "games": self.games, "resets": self.resets}

    def load_state_dict(self, state: dict) -> None:
        """Inverse of :meth:`state_dict`."""
        self._items.clear()
        self._items.extend(Task.from_dict(d) for d in state["items"])
        self.games, self.resets = int(state["games"]), int(state["resets"])

    def reset(self) -> None:
        """Back to the freshly-constructed state (used by a seeded env reset)."""
        self.clear()
        self.games = 0
        self.resets = 0


def batch_replay(options: dict, own: ReplayBuffer) -> ReplayBuffer:
    """The buffer a game uses: a reset's ``options["replay"]`` (a batch's shared buffer), else the env's ``own``."""
    shared = options.get("replay")
    if shared is None:
        return own
    if not isinstance(shared, ReplayBuffer):
        raise InvalidTypeError(f"options['replay'] must be a ReplayBuffer, got {type(shared).__name__}")
    return shared
