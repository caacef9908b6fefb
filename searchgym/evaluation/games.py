"""Play whole games of any searchgym env with an agent and summarise each one (``searchgym play``, the demo,
rejection sampling).

``play_games(env, agent, n)`` runs the user loop of the env contract through the
:class:`~searchgym.evaluation.batch_runner.BatchRunner` on one env, or on a list of clones of one: their games
then run at once, in lock step, every pending turn in one agent call (an LLM agent decodes them as one batch);
the agent is anything with
``act(obs, info)`` or ``act_batch(turns)`` (:class:`~searchgym.agents.llm_agent.LLMAgent`, the scripted agent,
...). The summary per game holds the proposer reward, the solver rewards, their WCR terms when a WCR wrapper
is in place, the question and the gold answer, why a question was rejected, and the game in words.
``on_game`` gets each finished game as a :class:`PlayedGame` as soon as it ends (its events, last info,
summary and wall time); ``until`` stops early. ``export_path`` writes every finished trajectory as one JSON
line (``Trajectory.to_dict`` plus ``game``).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Callable, Iterator, Optional

from ..errors import InvalidArgumentError
from .batch_runner import BatchRunner, Episode, EpisodeStart

logger = logging.getLogger(__name__)

__all__ = ["PlayedGame", "export_line", "play_games", "summarise_game"]


@dataclass
class PlayedGame:
    """One finished game: its number, its reward events in the order they came, the last step's info, its
    summary (:func:`summarise_game`) and the seconds it took."""

    game: int
    events: list
    info: dict
    summary: dict
    seconds: float

    @property
    def verified(self) -> bool:
        """Whether the game's proposed question passed the rule filters and RAG verification (False for a game
        without a Proposer)."""
        return bool((self.info.get("validation") or {}).get("valid"))


def play_games(
    env,
    agent,
    n_games: int,
    *,
    export_path: str | Path | None = None,
    seed: Optional[int] = 0,
    max_steps: int = 10_000,
    seed_each_game: bool = False,
    first_game: int = 0,
    on_game: Optional[Callable[[PlayedGame], None]] = None,
    until: Optional[Callable[[PlayedGame], bool]] = None,
    share_batch_state: bool = False,
) -> list[dict]:
    """Play up to ``n_games`` games numbered from ``first_game``; returns one summary dict per game, in the
    order the games ended.

    ``env``: an env, or a list of clones of one that play ``len(env)`` games at a time, in lock step (the
    games are then a function of the list's length too: it sets which turns share a sampling call and, with
    ``share_batch_state``, what the games share). ``share_batch_state``: the clones share one replay buffer and
    the verification noise of each other's Proposer rollouts, as a self-play training batch does
    (:class:`~searchgym.evaluation.batch_runner.BatchRunner`). The first reset uses ``seed`` and later ones
    continue each env's own sequence (clone ``j``'s first reset uses ``seed + j``); ``seed_each_game`` resets game
    ``g`` with ``seed + g`` instead.
    ``on_game`` is called with each game as it ends; once ``until(game)`` is true for a game that ended, no
    further game starts (games already under way finish). ``max_steps`` guards against an env that never
    ends a game (raises naming the game).
    """
    if n_games < 1:
        raise InvalidArgumentError(f"n_games must be >= 1, got {n_games}")
    envs = list(env) if isinstance(env, (list, tuple)) else [env]
    if not envs:
        raise InvalidArgumentError("play_games needs an env (or a non-empty list of clones)")
    out = Path(export_path) if export_path is not None else None
    fh = None
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        fh = open(out, "w")
    played: list[PlayedGame] = []
    stop = [False]
    began: dict[int, float] = {}

    def starts() -> Iterator[EpisodeStart]:
        for game in range(first_game, first_game + n_games):
            if stop[0]:
                return
            if seed_each_game and seed is not None:
                reset_seed: Optional[int] = seed + game
            else:  # the first game on env j (game first_game + j) seeds it with seed + j; later ones go on from there
                j = game - first_game
                reset_seed = seed + j if seed is not None and j < len(envs) else None
            began[game] = time.perf_counter()
            yield EpisodeStart(key=game, seed=reset_seed)

    def finished(episodes: list[Episode]) -> None:
        for ep in episodes:
            seconds = time.perf_counter() - began.pop(ep.key)
            record = PlayedGame(ep.key, ep.events, ep.info, summarise_game(ep.key, ep.events, ep.info), seconds)
            played.append(record)
            if fh is not None:
                _export_game(fh, record)
            if on_game is not None:
                on_game(record)
            stop[0] = stop[0] or (until is not None and until(record))

    try:
        runner = BatchRunner(envs, share_batch_state=share_batch_state, max_steps=max_steps)
        runner.play(agent, starts(), on_finished=finished, keep=False)
    finally:
        if fh is not None:
            fh.close()
    return [g.summary for g in played]


def _export_game(fh: IO[str], game: PlayedGame) -> None:
    """One JSON line per reward event of ``game``: its trajectory, the game number, the event's reward and slot."""
    for ev in game.events:
        fh.write(export_line(ev["trajectory"], game=game.game, reward=ev["reward"], slot=ev.get("slot")))


def export_line(trajectory: Any, *, game: int, reward: float, slot: Optional[int]) -> str:
    """The exported form of one rollout (``play_games(export_path=...)``, rejection sampling's samples, read back
    by the SFT data loader): its trajectory's fields plus ``game``, ``event_reward`` and ``slot``, one JSON line."""
    rec = trajectory.to_dict()
    rec.update(game=game, event_reward=reward, slot=slot)
    return json.dumps(rec, default=str) + "\n"


def summarise_game(game: int, events: list[dict], info: dict) -> dict:
    """Per-game summary from the game's reward events; ``rejection`` says why a proposed question was
    rejected (``""`` if verified) and ``lines`` is the game in words, each reward with its terms
    (:func:`~searchgym.evaluation.game_text.game_lines`)."""
    from .game_text import game_lines, rejection_text

    solver = sorted((e for e in events if e["role"] == "solver"), key=lambda e: e.get("slot", 0))
    prop = [e for e in events if e["role"] == "proposer"]
    task = info.get("task")
    summary: dict[str, Any] = {
        "game": game,
        "question": getattr(task, "question", None),
        "answer": getattr(task, "answer", None),
        "solver_rewards": [float(e["reward"]) for e in solver],
        "solver_correct": [bool(e["trajectory"].correct) for e in solver],
        "solver_searches": [e["trajectory"].num_searches for e in solver],
    }
    for key in ("wcr_coverage", "wcr_bonus"):
        vals = [(e.get("components") or {}).get(key) for e in solver]
        if any(isinstance(x, (int, float)) for x in vals):
            summary[key] = [float(x) if isinstance(x, (int, float)) else None for x in vals]
    if prop:
        p = prop[-1]
        summary["proposer_reward"] = float(p["reward"])
        summary["valid_question"] = bool(p["components"].get("valid", 1.0))
        summary["proposed_question"] = p["trajectory"].question
        summary["rejection"] = rejection_text(info.get("validation"), list(p["trajectory"].task.answers))
    summary["lines"] = game_lines(game, events, info)
    return summary
