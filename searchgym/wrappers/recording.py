"""Recording finished games as the outermost wrapper (Gymnasium's ``RecordEpisodeStatistics``, for searchgym games).

Reward wrappers rewrite the events of ``info["rewards"]`` after the env has emitted them, so only a layer
outside all of them sees the rewards the caller sees. :class:`RecordGames` is that layer: it collects the
events of every step of a game from the ``info`` its inner stack returns and, when the game ends, writes one
export line (:mod:`searchgym.envs.export`) -- the shaped rewards, their components and the trajectories.

The right order is the only easy one:

* ``gym.make(env_id, export_path=p)`` alone: the env writes its own games (nothing shapes them);
* ``wrap_rewards(gym.make(env_id, export_path=p), "wcr")`` (and the trainer, ``searchgym play``, the
  integrations, which all build stacks with it): the env hands its writer over and a :class:`RecordGames`
  goes outside the reward wrappers; a :class:`RecordGames` already on top of the stack is moved outside them;
* a stack built by hand: wrap the finished stack, ``RecordGames(MyWrapper(WCR(env)), p)``. A reward wrapper
  refuses to go outside a :class:`RecordGames`, or over an env that still writes its games itself, naming
  these two ways (:func:`check_recording_outside`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Union

import gymnasium as gym

from ..envs.export import GameRecorder, TrajectoryWriter
from ..errors import InvalidArgumentError

__all__ = ["RecordGames", "find_recorder", "check_recording_outside", "take_recording"]


def _layers(env: Any) -> list:
    """The wrappers of ``env``'s stack, outermost first, then the env itself."""
    out = [env]
    while isinstance(env, gym.Wrapper):
        env = env.env
        out.append(env)
    return out


def find_recorder(env: Any) -> Optional["RecordGames"]:
    """The :class:`RecordGames` in ``env``'s wrapper stack, or ``None``."""
    return next((layer for layer in _layers(env) if isinstance(layer, RecordGames)), None)


def check_recording_outside(env: Any, wrapper: str) -> None:
    """Refuse to put ``wrapper`` (a reward wrapper's name) over a stack whose games are already written below it:
    a :class:`RecordGames` in the stack, or an env made with ``export_path=`` that writes its games itself.
    Either would export the rewards before ``wrapper`` shapes them."""
    fix = (
        f"build the stack with searchgym.wrappers.wrap_rewards(env, {wrapper!r}) (it keeps the recording "
        "outermost), or make the env without export_path= and wrap the finished stack in RecordGames(stack, path)"
    )
    if find_recorder(env) is not None:
        raise InvalidArgumentError(
            f"{wrapper} would go outside RecordGames, which must be the outermost wrapper; {fix}"
        )
    if getattr(env.unwrapped, "records_games", False):
        raise InvalidArgumentError(
            f"the env writes its games itself (made with export_path=), before {wrapper} would shape them; {fix}"
        )


def take_recording(env: Any) -> tuple[Any, Optional[TrajectoryWriter]]:
    """Take the recording off ``env`` before more wrappers go on it: ``(stack without a RecordGames on top,
    the writer its games go to)`` -- the top :class:`RecordGames`'s writer, else the writer an env made with
    ``export_path=`` hands over, else ``None``. Put ``RecordGames(stack, writer)`` back on the finished stack."""
    if isinstance(env, RecordGames):
        return env.env, env.writer
    hand_over = getattr(env.unwrapped, "hand_over_export", None)
    if getattr(env.unwrapped, "records_games", False) and callable(hand_over):
        return env, hand_over()
    return env, None


class RecordGames(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Writes every finished game as one export line, with the events as this wrapper sees them in ``info``.

    Apply it last (see the module docstring). ``export_path``: a JSONL path or a shared
    :class:`~searchgym.envs.export.TrajectoryWriter`; ``None`` takes the writer of an env made with
    ``export_path=`` (the env then stops writing games itself). A game is written on the step that terminates
    or truncates it; the events of all its steps are written (a self-play game's rejected-question event
    comes on the verification step). :meth:`close` closes the file.
    """

    def __init__(self, env: gym.Env, export_path: Union[str, Path, TrajectoryWriter, None] = None) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, export_path=export_path)
        if find_recorder(env) is not None:
            raise InvalidArgumentError("this stack already has a RecordGames; one recorder per stack, outermost")
        base = env.unwrapped
        own: Optional[TrajectoryWriter] = getattr(base, "writer", None)
        if export_path is None and own is None:
            raise InvalidArgumentError("RecordGames needs export_path= (or an env made with export_path=)")
        if own is not None and export_path is not None and export_path is not own:
            raise InvalidArgumentError(
                f"the env already exports to {own.path} (made with export_path=); use RecordGames(env) to write there"
            )
        super().__init__(env)
        hand_over = getattr(base, "hand_over_export", None)
        if callable(hand_over):
            hand_over()
        if isinstance(export_path, TrajectoryWriter) or export_path is None:
            self.writer: TrajectoryWriter = export_path or own  # type: ignore[assignment]
        else:
            self.writer = TrajectoryWriter(export_path)
        self._recorder = GameRecorder(self.writer)

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        """Reset the stack and start collecting a new game's events."""
        obs, info = self.env.reset(seed=seed, options=options)
        self._recorder.start()
        return obs, info

    def step(self, action):
        """Step the stack; on the step that ends the game, write it."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._recorder.observe(info, bool(terminated or truncated))
        return obs, reward, terminated, truncated, info

    def close(self) -> None:
        """Close the stack and the export file."""
        super().close()
        self.writer.close()
